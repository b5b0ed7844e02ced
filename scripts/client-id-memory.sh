#!/usr/bin/env bash
# Measures what a `shoal all` keeps of clients that are gone: waves of
# CLIENTS clients with client ids never seen before (a fleet of clients
# that make up a new id at every connection, as mosquitto_sub without -i
# and many web clients do), each connecting (64 at a time) and
# disconnecting. SETTLE seconds after each wave, every client gone, it
# reads the broker's heap after a forced collection (/debug/pprof/heap,
# gc=1) and its RSS. A broker that forgets ended sessions keeps the same
# heap from wave to wave; one that remembers every client grows by the
# same amount at each.
#
#   scripts/client-id-memory.sh
#   BASE_BIN=/tmp/shoal-before scripts/client-id-memory.sh
#
# Environment:
#   WAVES      waves (default 5)
#   CLIENTS    clients per wave (default 10000)
#   SETTLE     seconds between a wave's end and the reading (default 8)
#   SHOAL_BIN  the shoal binary to measure instead of building the tree's
#   BASE_BIN   a second shoal binary measured the same way after it
#
# Runs on loopback only; the generator is bench/cmd/shoal-bench
# (-scenario connections).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

waves=${WAVES:-5}
clients=${CLIENTS:-10000}
settle=${SETTLE:-8}
tmp=$(mktemp -d /tmp/shoal-client-id-memory.XXXXXX)
# shellcheck source=scripts/bench-lib.sh
. "$root/scripts/bench-lib.sh" # build_tools, free_port, stop_pid, install_copy, start_shoal_all
build_tools "$tmp"          # shoal, bench
bins=("$shoal")
if [ -n "${BASE_BIN:-}" ]; then
  install_copy "$BASE_BIN" "$tmp/shoal-base"
  bins+=("$tmp/shoal-base")
fi

log() { echo "client-id-memory: $*" >&2; }

stop_broker_on_exit "$tmp"

# reading prints the heap in use (MB, after a collection) and the RSS
# (MiB) of the broker whose HTTP listener is on port $1.
reading() {
  local heap rss
  heap=$(curl -sf "http://127.0.0.1:$1/debug/pprof/heap?gc=1&debug=1" | awk '/^# HeapInuse = / { print $4 }')
  rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$broker_pid/status")
  awk -v h="$heap" -v r="$rss" 'BEGIN { printf "%.1f MB heap, %.0f MiB RSS", h / 1e6, r / 1024 }'
}

for bin in "${bins[@]}"; do
  mqtt=$(free_port)
  http=$(free_port)
  start_shoal_all "$bin" "$tmp" "$mqtt" "$http" "$tmp/shoal.log" --pprof true
  sleep 2
  echo "$bin: 0 client ids: $(reading "$http")"
  for w in $(seq "$waves"); do
    "$bench" -addr "127.0.0.1:$mqtt" -scenario connections -clients "$clients" -connect-concurrency 64 \
      -warmup 500ms -duration 500ms -prefix "id$w" -out "$tmp/wave.json" >"$tmp/wave.log" 2>&1
    sleep "$settle"
    echo "$bin: $((w * clients)) client ids: $(reading "$http")"
  done
  stop_pid "$broker_pid"
  broker_pid=""
done
