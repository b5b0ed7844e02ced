#!/usr/bin/env bash
# Measures Shoal through HAProxy (haproxy/haproxy.cfg, PROXY v2 to the
# gateway) against straight to the gateway, in the same run: one `shoal all`
# with --proxy-protocol optional serves both (HAProxy's connections carry a
# header, the direct ones do not), the generator alternates targets, two
# rounds of connects, the 10k msg/s latency scenario and QoS 1 pairs.
#
#   scripts/bench-haproxy.sh            # results in bench/results/<UTC date>-haproxy
#
# HAProxy runs on the same two cores as Shoal and the generator: its CPU is
# part of what "through HAProxy" costs here. The broker is not restarted
# between runs, so its RSS figures are not comparable across labels.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash scripts/test-deps.sh
haproxy=$(command -v haproxy || echo /usr/sbin/haproxy)
out=${OUT:-bench/results/$(date -u +%F)-haproxy}
tmp=$(mktemp -d)
go build -o bin/shoal ./cmd/shoal
go build -o bin/shoal-bench ./bench/cmd/shoal-bench
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
mkdir -p "$out"
bin/shoal all --data-dir "$tmp/data" --mqtt-listen 127.0.0.1:17883 --ws-listen '' --http-listen 127.0.0.1:17090 \
  --proxy-protocol optional --proxy-trusted 127.0.0.1/32 >"$tmp/shoal.log" 2>&1 &
spid=$!
haproxy/render-backends.sh default=gw-0@127.0.0.1:17883@17090 >"$tmp/backends.cfg"
cp haproxy/tenants.map "$tmp/tenants.map"
SHOAL_HAPROXY_MQTT=127.0.0.1:17884 SHOAL_HAPROXY_MQTTS=127.0.0.1:17885 SHOAL_HAPROXY_MAP="$tmp/tenants.map" \
  SHOAL_HAPROXY_RUNTIME="$tmp/haproxy.sock" "$haproxy" -db -f haproxy/haproxy.cfg -f "$tmp/backends.cfg" >"$tmp/haproxy.log" 2>&1 &
hpid=$!
trap 'kill $spid $hpid 2>/dev/null || true; wait $spid $hpid 2>/dev/null || true; rm -rf "$tmp"' EXIT
for _ in $(seq 150); do curl -sf http://127.0.0.1:17090/readyz >/dev/null && break; sleep 0.2; done
sleep 3 # HAProxy's health check marks the gateway up
for round in 1 2; do
  for label in direct haproxy; do
    port=17883 extra=()
    [ $label = direct ] || { port=17884; extra=(-proc "haproxy=$hpid"); }
    run() { # name flags…
      local name=$1
      shift
      bin/shoal-bench -addr 127.0.0.1:$port "$@" -broker-pid $spid "${extra[@]}" -name "$name" -label $label -round $round \
        -prefix bench -out "$out/$name-$label-r$round.json" >/dev/null
    }
    run connections -scenario connections -clients 2000 -connect-concurrency 64 -warmup 1s -duration 2s
    run latency-qos0 -scenario latency -clients 50 -qos 0 -payload 64 -rate 10000 -warmup 2s -duration 8s
    run pairs-qos1 -scenario pairs -clients 50 -qos 1 -payload 64 -inflight 64 -warmup 2s -duration 8s
    echo "bench-haproxy: round $round, $label done" >&2
  done
done
bin/shoal-bench report -dir "$out" -a haproxy -b direct -md "$out/README.md"
echo "bench-haproxy: results in $out" >&2
