#!/usr/bin/env bash
# Writes a data directory of `shoal all` with a given shoal binary, for
# TestDataDirOfEarlierRelease: a persistent session (never expires) with a
# subscription and two queued QoS 1 messages, and retained messages of two
# tenants. Run it with the binary of a release to keep its data as a
# fixture:
#
#   go build -o /tmp/shoal-old ./cmd/shoal   # at the release's commit
#   compose/broker/testdata/make-datadir.sh /tmp/shoal-old compose/broker/testdata/datadir-<commit>.tgz
#
# Needs mosquitto_pub and mosquitto_sub (scripts/test-deps.sh).
set -euo pipefail
bin=$1 out=$2
work=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; rm -rf "$work"' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
mqtt=$(port) http=$(port)
"$bin" all --data-dir "$work/data" --mqtt-listen "127.0.0.1:$mqtt" --http-listen "127.0.0.1:$http" \
  --ws-listen "" --kafka-partitions 2 >"$work/log" 2>&1 &
pid=$!
for _ in $(seq 100); do curl -sf "127.0.0.1:$http/readyz" >/dev/null && break; sleep 0.2; done
pub() { mosquitto_pub -h 127.0.0.1 -p "$mqtt" -V mqttv5 -q 1 "$@"; }
# The persistent session: subscribe, then go away without a DISCONNECT
# that ends it (session expiry 0xFFFFFFFF: never).
mosquitto_sub -h 127.0.0.1 -p "$mqtt" -V mqttv5 -i acme-sub -c -x 4294967295 -q 1 -t 'fleet/+/temp' -W 1 || true
pub -i acme-pub -t fleet/d1/temp -m queued-1
pub -i acme-pub -t fleet/d2/temp -m queued-2
pub -i acme-pub -r -t fleet/d1/status -m retained-acme
pub -i other-pub -r -t fleet/d1/status -m retained-other
sleep 1
kill -INT $pid
wait $pid
rm -f "$work/data/kafka/shoal-embedded.lock"
tar czf "$out" -C "$work" data
echo "wrote $out"
