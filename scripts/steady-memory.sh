#!/usr/bin/env bash
# Measures the memory of `shoal all` under a steady moderate rate for minutes
# (bench/README.md, "The embedded log's index at a steady rate"): 50 pairs at
# a fixed 10,000 msg/s QoS 0 (the load of bench-compare.sh's latency-qos0,
# which measures one minute at most), and every INTERVAL seconds the broker's
# RSS, its anonymous memory, the size of the embedded log on disk and the
# live heap of kfake's batch index (a heap profile after a collection:
# `pprof` is turned on for the run). Prints one line per reading, then the
# generator's figures.
#
#   scripts/steady-memory.sh                              # 420 s
#   SHOAL_FLAGS="--kafka-partitions 16" scripts/steady-memory.sh
#   DURATION=300 SHOAL_FLAGS="--kafka-retention-bytes 4194304" scripts/steady-memory.sh
#
# Environment:
#   DURATION    seconds of load (default 420)
#   INTERVAL    seconds between readings (default 30)
#   RATE        messages per second (default 10000)
#   SHOAL_BIN   a shoal binary to measure instead of building the tree's
#   SHOAL_FLAGS extra flags for `shoal all` (a new data directory each run)
#
# Runs on loopback only; the generator is bench/cmd/shoal-bench.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

duration=${DURATION:-420}
interval=${INTERVAL:-30}
rate=${RATE:-10000}
tmp=$(mktemp -d /tmp/shoal-steady-memory.XXXXXX)
# shellcheck source=scripts/bench-lib.sh
. "$root/scripts/bench-lib.sh" # build_tools, free_port, stop_pid
build_tools "$tmp"          # shoal, bench

log() { echo "steady-memory: $*" >&2; }

broker_pid="" gen_pid=""
cleanup() {
  stop_pid "$gen_pid"
  stop_pid "$broker_pid"
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mqtt=$(free_port)
http=$(free_port)
# shellcheck disable=SC2086 # SHOAL_FLAGS is flags, split into words
"$shoal" all --data-dir "$tmp/data" --mqtt-listen "127.0.0.1:$mqtt" --http-listen "127.0.0.1:$http" \
  --ws-listen '' --admin-listen '' --pprof true ${SHOAL_FLAGS:-} >"$tmp/broker.log" 2>&1 &
broker_pid=$!
for _ in $(seq 600); do
  curl -sf "http://127.0.0.1:$http/readyz" >/dev/null 2>&1 && break
  if ! kill -0 "$broker_pid" 2>/dev/null; then
    log "shoal stopped before it was ready; its log:"
    tail -20 "$tmp/broker.log" >&2
    exit 1
  fi
  sleep 0.05
done
grep -E 'kafka topic (created|keeps)' "$tmp/broker.log" | grep -o 'topic=shoal.messages partitions=[0-9]*' | head -1 >&2 || true

"$bench" -addr "127.0.0.1:$mqtt" -scenario latency -clients 50 -qos 0 -payload 64 -rate "$rate" \
  -warmup 1s -duration "${duration}s" -broker-pid "$broker_pid" -out "$tmp/load.json" >"$tmp/load.log" 2>&1 &
gen_pid=$!

# index prints kfake's batch index (the live heap allocated by pushBatch)
# in MB from a heap profile taken after a collection.
index() {
  curl -sf "http://127.0.0.1:$http/debug/pprof/heap?gc=1" -o "$tmp/heap.pprof" || return 0
  go tool pprof -sample_index=inuse_space -top "$shoal" "$tmp/heap.pprof" 2>/dev/null |
    awk '$NF ~ /kfake\.\(\*Cluster\)\.pushBatch$/ { u = $1; sub(/^[0-9.]+/, "", u)
      printf "%.1f", ($1 + 0) * (u == "B" ? 1e-6 : u == "kB" ? 1e-3 : u == "GB" ? 1e3 : 1); exit }'
}

printf '%8s %10s %10s %10s %10s\n' seconds rss_mb anon_mb log_mb index_mb
t=0
while kill -0 "$gen_pid" 2>/dev/null; do
  sleep "$interval"
  t=$((t + interval))
  kill -0 "$gen_pid" 2>/dev/null || break
  rss=$(awk '$1 == "VmRSS:" { printf "%.0f", $2 / 1000 }' "/proc/$broker_pid/status")
  anon=$(awk '$1 == "Anonymous:" { printf "%.0f", $2 / 1000 }' "/proc/$broker_pid/smaps_rollup")
  logmb=$(du -sm "$tmp/data/kafka/partitions" 2>/dev/null | cut -f1)
  printf '%8d %10s %10s %10s %10s\n' "$t" "$rss" "$anon" "$logmb" "$(index)"
done
wait "$gen_pid" || log "the generator exited $?; its output: $(tail -3 "$tmp/load.log")"
gen_pid=""
tail -2 "$tmp/load.log"
