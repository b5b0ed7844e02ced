#!/usr/bin/env bash
# The cost of tracing: runs scripts/bench-compare.sh (Shoal beside
# Mosquitto, same run) with tracing off, then with tracing on at a sampling
# ratio, exporting over OTLP/gRPC to bin/otlp-sink (a collector that counts
# and discards), and prints both tables.
#
#   scripts/bench-tracing.sh                     # pairs-qos0 latency-qos0, 2 rounds, 1%
#   RATIO=0.1 ROUNDS=3 scripts/bench-tracing.sh
#
# Environment: SCENARIOS, ROUNDS, WARMUP, DURATION as bench-compare.sh;
# RATIO the sampling ratio (default 0.01); OUT the results directory
# (default bench/results/<UTC date>-tracing), with off/ and on/ inside.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export SCENARIOS=${SCENARIOS:-pairs-qos0 latency-qos0} ROUNDS=${ROUNDS:-2} PLOT=${PLOT:-0}
ratio=${RATIO:-0.01}
out=${OUT:-bench/results/$(date -u +%F)-tracing}
go build -o bin/otlp-sink ./bench/cmd/otlp-sink
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
bin/otlp-sink -addr "127.0.0.1:$port" 2>"$out.sink.log" &
sink=$!
trap 'kill $sink 2>/dev/null || true' EXIT

OUT=$out/off scripts/bench-compare.sh
OTEL_TRACES_EXPORTER=otlp OTEL_EXPORTER_OTLP_PROTOCOL=grpc OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$port" \
  OTEL_TRACES_SAMPLER=parentbased_traceidratio OTEL_TRACES_SAMPLER_ARG="$ratio" \
  OUT=$out/on scripts/bench-compare.sh
kill "$sink"; wait "$sink" 2>/dev/null || true
trap - EXIT
echo "== tracing off"; cat "$out/off/README.md" 2>/dev/null || ls "$out/off"
echo "== tracing on, ratio $ratio"; cat "$out/on/README.md" 2>/dev/null || ls "$out/on"
cat "$out.sink.log"
