#!/usr/bin/env bash
# Measures the broker CPU of a whole connection's life, connect and
# disconnect, as a fleet reconnecting after a network cut costs it:
# waves of 10,000 clients that connect (64 at a time), stay a moment and
# disconnect. For each wave it prints connects/s, the broker's CPU per
# connect while they connect (the generator's figure), and the broker's CPU
# per client over the generator's whole run (connects and disconnects) and
# over the SETTLE seconds after it (what the disconnects still cost once
# the clients are gone), read from /proc. Mosquitto, Shoal and, when
# BASE_BIN is set, a second shoal binary take turns, each fresh for each
# round.
#
#   scripts/connect-cycle.sh
#   BASE_BIN=/tmp/shoal-before ROUNDS=3 scripts/connect-cycle.sh
#
# Environment:
#   ROUNDS     rounds (default 3); each broker once per round
#   WAVES      waves per broker per round (default 3)
#   CLIENTS    clients per wave (default 10000)
#   SETTLE     seconds measured after each wave (default 6)
#   SHOAL_BIN  the shoal binary to measure instead of building the tree's
#   BASE_BIN   a second shoal binary to measure beside it (an older commit's)
#   NO_MOSQUITTO 1 to leave Mosquitto out
#   SAME_IDS   1: every wave of a broker uses the same client ids (a fleet
#              that comes back after its sessions ended); by default each
#              wave's are new
#   TAKEOVER   1: before each wave, as many clients with the same client
#              ids connect and stay, so that every connect of the measured
#              wave takes a live connection over (a fleet that comes back
#              before the broker noticed it had gone)
#
# Runs on loopback only; the generator is bench/cmd/shoal-bench
# (-scenario connections).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

rounds=${ROUNDS:-3}
waves=${WAVES:-3}
clients=${CLIENTS:-10000}
settle=${SETTLE:-6}
tmp=$(mktemp -d /tmp/shoal-connect-cycle.XXXXXX)
# shellcheck source=scripts/bench-lib.sh
. "$root/scripts/bench-lib.sh" # build_tools, free_port, stop_pid, install_copy, start_shoal_all
build_tools "$tmp"          # shoal, bench
base=""
if [ -n "${BASE_BIN:-}" ]; then
  install_copy "$BASE_BIN" "$tmp/shoal-base"
  base=$tmp/shoal-base
fi

log() { echo "connect-cycle: $*" >&2; }

stop_broker_on_exit "$tmp"

tck=$(getconf CLK_TCK)
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# start_broker LABEL: starts the broker LABEL names on port mqtt and sets
# broker_pid.
start_broker() {
  local label=$1 http
  case $label in
  mosquitto)
    printf 'listener %s 127.0.0.1\nallow_anonymous true\nmax_connections -1\npersistence false\n' "$mqtt" >"$tmp/mosquitto.conf"
    mosquitto -c "$tmp/mosquitto.conf" >"$tmp/mosquitto.log" 2>&1 &
    broker_pid=$!
    for _ in $(seq 100); do
      ss -Hltn "sport = :$mqtt" | grep -q . && return 0
      sleep 0.05
    done
    ;;
  *)
    local bin=$shoal
    [ "$label" = shoal ] || bin=$base
    http=$(free_port)
    start_shoal_all "$bin" "$tmp" "$mqtt" "$http" "$tmp/$label.log"
    return
    ;;
  esac
  log "$label did not start"
  return 1
}

run() {
  local label=$1 w c0 c1 c2
  mqtt=$(free_port)
  start_broker "$label"
  sleep 1
  for w in $(seq "$waves"); do
    prefix=cycle$w
    [ "${SAME_IDS:-0}" = 1 ] && prefix=cycle
    holder=""
    if [ "${TAKEOVER:-0}" = 1 ]; then
      "$bench" -addr "127.0.0.1:$mqtt" -scenario connections -clients "$clients" -connect-concurrency 64 \
        -warmup 500ms -duration 10m -prefix "$prefix" -out "$tmp/held.json" >"$tmp/held.log" 2>&1 &
      holder=$!
      for _ in $(seq 600); do # until they are all connected (the generator's progress line)
        grep -q "connected $clients " "$tmp/held.log" && break
        sleep 0.1
      done
    fi
    c0=$(cpu_ticks "$broker_pid")
    "$bench" -addr "127.0.0.1:$mqtt" -scenario connections -clients "$clients" -connect-concurrency 64 \
      -warmup 500ms -duration 500ms -prefix "$prefix" -broker-pid "$broker_pid" -out "$tmp/wave.json" >"$tmp/wave.log" 2>&1
    c1=$(cpu_ticks "$broker_pid")
    sleep "$settle"
    c2=$(cpu_ticks "$broker_pid")
    stop_pid "$holder" 5
    python3 - "$tmp/wave.json" "$label" "$w" "$c0" "$c1" "$c2" "$tck" "$clients" "$settle" <<'EOF'
import json, sys
path, label, wave, c0, c1, c2, tck, n, settle = sys.argv[1:]
c0, c1, c2, tck, n = float(c0), float(c1), float(c2), float(tck), float(n)
c = json.load(open(path))["connect"]
us = lambda ticks: ticks / tck * 1e6 / n
print(f"{label:<10} wave {wave}: {c['per_s']:>7.0f} connects/s, {c['broker_cpu_us_per_connect']:>4.0f} µs per connect; "
      f"per client: {us(c1 - c0):>4.0f} µs during the run, {us(c2 - c1):>4.0f} µs in the {settle} s after, "
      f"{us(c2 - c0):>4.0f} µs in all")
EOF
  done
  stop_pid "$broker_pid"
  broker_pid=""
}

for r in $(seq "$rounds"); do
  [ "${NO_MOSQUITTO:-0}" = 1 ] || run mosquitto
  run shoal
  [ -z "$base" ] || run base
done
