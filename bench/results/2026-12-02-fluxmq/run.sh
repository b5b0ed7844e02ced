#!/usr/bin/env bash
# The run behind bench/results/2026-12-02-fluxmq: FluxMQ v0.51.0 and
# Mosquitto 2.0.11, one after the other in each round (who goes first
# alternates), with shoal-bench and the flags of scripts/bench-compare.sh.
# Run from the repository's root:
#   ROUNDS=2 bench/results/2026-12-02-fluxmq/run.sh
set -euo pipefail
root=$(pwd)
out=${OUT:-$root/bench/results/2026-12-02-fluxmq}
rounds=${ROUNDS:-2}
scenarios=${SCENARIOS:-latency-qos0 latency-qos1 pairs-qos0 pairs-qos1}
log() { echo "fluxmq-run: $*" >&2; }
. "$root/scripts/bench-lib.sh" # free_port, stop_pid
flags() {
  case $1 in
  pairs-qos0) echo "-scenario pairs -clients 50 -qos 0 -payload 64 -window 100" ;;
  pairs-qos1) echo "-scenario pairs -clients 50 -qos 1 -payload 64 -inflight 64" ;;
  latency-qos0) echo "-scenario latency -clients 50 -qos 0 -payload 64 -rate 10000" ;;
  latency-qos1) echo "-scenario latency -clients 50 -qos 1 -payload 64 -rate 10000 -inflight 64" ;;
  connections) echo "-scenario connections -clients 10000 -connect-concurrency 64" ;;
  esac
}
fluxmq=$(scripts/fluxmq.sh)
tmp=$(mktemp -d)
chmod 0711 "$tmp"
go build -o "$tmp/shoal-bench" ./bench/cmd/shoal-bench
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
broker_pid=""
trap 'stop_pid "$broker_pid" 10; rm -rf "$tmp"' EXIT
wait_port() {
  for _ in $(seq 300); do
    kill -0 "$broker_pid" 2>/dev/null || return 1
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  return 1
}
start_mosquitto() { # dir port: bench-compare.sh's configuration
  chmod 0777 "$1"
  cat >"$1/mosquitto.conf" <<CONF
listener $2 127.0.0.1
allow_anonymous true
persistence false
max_queued_messages 1000000
max_queued_bytes 0
max_inflight_messages 0
set_tcp_nodelay true
log_dest file $1/broker.log
log_type error
log_type warning
CONF
  /usr/sbin/mosquitto -c "$1/mosquitto.conf" >"$1/stdout.log" 2>&1 &
  broker_pid=$!
  wait_port "$2"
}
start_fluxmq() { # dir port: scripts/fluxmq.sh's minimal configuration
  scripts/fluxmq.sh config "$2" "$1/data" >"$1/fluxmq.yaml"
  cp "$1/fluxmq.yaml" "$out/fluxmq.yaml"
  "$fluxmq" -config "$1/fluxmq.yaml" >"$1/broker.log" 2>&1 &
  broker_pid=$!
  wait_port "$2"
}
mkdir -p "$out"
for round in $(seq "$rounds"); do
  for name in $scenarios; do
    if [ $((round % 2)) -eq 1 ]; then order="mosquitto fluxmq"; else order="fluxmq mosquitto"; fi
    for label in $order; do
      log "round $round: $name on $label"
      dir=$tmp/$name-$label-r$round
      mkdir -p "$dir"
      port=$(free_port)
      "start_$label" "$dir" "$port"
      # shellcheck disable=SC2046
      "$tmp/shoal-bench" -addr "127.0.0.1:$port" $(flags "$name") -warmup 3s -duration 10s \
        -broker-pid "$broker_pid" -name "$name" -label "$label" -round "$round" -prefix bench \
        -out "$out/$name-$label-r$round.json" 2>"$out/$name-$label-r$round.progress.txt" || log "$name on $label: generator exited $?"
      stop_pid "$broker_pid" 10
      broker_pid=""
      cat "$dir"/*.log >"$out/$name-$label-r$round.log" 2>/dev/null || true
    done
  done
done
"$tmp/shoal-bench" report -dir "$out" -a fluxmq -b mosquitto -md "$out/tables.md"
