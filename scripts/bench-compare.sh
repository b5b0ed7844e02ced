#!/usr/bin/env bash
# Runs the load generator's scenarios against Mosquitto and Shoal, one
# broker after the other in the same run, for several rounds, and writes
# every JSON result, a markdown table and the plots into OUT.
#
#   scripts/bench-compare.sh                       # every scenario, 3 rounds
#   SCENARIOS=pairs-qos0 ROUNDS=1 scripts/bench-compare.sh
#
# Environment:
#   SCENARIOS  space- or comma-separated names (default: all of them, below)
#   ROUNDS     rounds of each scenario (default 3); the brokers alternate
#              within a round and swap who goes first every round
#   WARMUP     warm-up before each measured window (default 3s)
#   DURATION   measured window (default 10s)
#   OUT        results directory (default bench/results/<UTC date>);
#              results already there are kept and reported with the new ones
#   PLOT       0 to skip the plots
#   PIN        1 to run the broker on CPU 0 and the generator on CPU 1
#              (taskset), so that neither takes the other's core
#   SHOAL_BIN  a shoal binary to measure instead of building bin/shoal from
#              the tree (an older commit's, to compare two builds against
#              the same Mosquitto)
#   PRELOAD    how long the *-after-load scenarios load the broker first
#              (default 20s of pairs-qos0, not reported)
#   SHOAL_FLAGS extra flags for `shoal all` (e.g. "--audit-record-acks true")
#   BROKERS    the two brokers, the reference first (default "mosquitto
#              shoal"); "mosquitto fluxmq" measures FluxMQ (scripts/fluxmq.sh,
#              its minimal configuration) beside Mosquitto with the same flags
#   PROFILE    1 to take a CPU profile of Shoal over each measured window
#              (--pprof, /debug/pprof/profile): <scenario>-shoal-r<N>.pprof
#              and its top functions in <scenario>-shoal-r<N>.top.txt; for
#              the connection scenarios, over the first CONNECT_PROFILE
#              seconds (default 2) of the connects; and the runtime's memory
#              classes at the end of each run (/debug/memory):
#              <scenario>-shoal-r<N>.memory.txt
#
# Each broker is fresh for each run: Mosquitto with its own configuration
# (persistence off, queue limits high enough not to drop), Shoal as `shoal
# all` on the embedded backbone with a new data directory. Both listen on
# free loopback ports. Needs root or sudo once, to install mosquitto.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

all_scenarios="pairs-qos0 pairs-qos1 pairs-qos1-window pairs-qos2 fanout-qos0 latency-qos0 latency-qos1 wildcards-qos0 connections connections-light connections-after-load connections-auth pairs-qos1-persistent offline-qos1 subscriptions subscriptions-wildcard"
scenarios=${SCENARIOS:-$all_scenarios}
scenarios=${scenarios//,/ }
rounds=${ROUNDS:-3}
pin_broker=() pin_gen=()
if [ "${PIN:-0}" = 1 ]; then
  pin_broker=(taskset -c 0) pin_gen=(taskset -c 1)
fi
warmup=${WARMUP:-3s}
duration=${DURATION:-10s}
out=${OUT:-bench/results/$(date -u +%F)}
case $out in /*) ;; *) out=$root/$out ;; esac

# The scenarios: load generator flags. The numbers are those the targets
# of the benchmark issue are stated for.
scenario_flags() {
  case $1 in
  pairs-qos0) echo "-scenario pairs -clients 50 -qos 0 -payload 64 -window 100" ;;
  pairs-qos1) echo "-scenario pairs -clients 50 -qos 1 -payload 64 -inflight 64" ;;
  pairs-qos1-window) echo "-scenario pairs -clients 50 -qos 1 -payload 64 -inflight 64 -window 100" ;;
  pairs-qos2) echo "-scenario pairs -clients 50 -qos 2 -payload 64 -inflight 64" ;;
  fanout-qos0) echo "-scenario fanout -clients 1000 -qos 0 -payload 64 -rate 20" ;;
  latency-qos0) echo "-scenario latency -clients 50 -qos 0 -payload 64 -rate 10000" ;;
  latency-qos1) echo "-scenario latency -clients 50 -qos 1 -payload 64 -rate 10000 -inflight 64" ;;
  wildcards-qos0) echo "-scenario wildcards -clients 50 -publishers 50 -qos 0 -payload 64 -rate 2000" ;;
  connections) echo "-scenario connections -clients 10000 -connect-concurrency 64" ;;
  # QoS 1 between persistent sessions (TBMQ's point-to-point payload),
  # windowed: a broker that acknowledges a publish before it reached the
  # subscriber's queue would otherwise let its queue overflow.
  pairs-qos1-persistent) echo "-scenario pairs -clients 50 -qos 1 -payload 62 -inflight 64 -window 100 -session-expiry 10m" ;;
  # 500 sessions offline while 200 messages each are queued for them,
  # then back for the backlog (within both brokers' queue bounds).
  offline-qos1) echo "-scenario offline -clients 500 -qos 1 -payload 62 -queued 200 -session-expiry 10m" ;;
  # 1,000 connections subscribing 100 filters each, one SUBSCRIBE apiece;
  # then 10 filters with a '+' each.
  subscriptions) echo "-scenario connections -clients 1000 -connect-concurrency 64 -subscriptions 100 -qos 1" ;;
  subscriptions-wildcard) echo "-scenario connections -clients 1000 -connect-concurrency 64 -subscriptions 10 -wildcard-filters -qos 1" ;;
  # Connects at a light load (4 at a time): the latency of one device's
  # reconnect when the broker is not saturated by the storm itself.
  connections-light) echo "-scenario connections -clients 2000 -connect-concurrency 4" ;;
  # The same on a broker that has just carried a saturating load (PRELOAD,
  # default 20s of pairs-qos0, unmeasured): a broker's memory per idle
  # connection after traffic, not only on a fresh process.
  connections-after-load) echo "-scenario connections -clients 10000 -connect-concurrency 64" ;;
  # The same with a password file, one made by mosquitto_passwd that both
  # brokers read (the same $7$ PBKDF2-SHA512 entry): every CONNECT is
  # authenticated. (Scenarios named *-auth start the brokers with it.)
  connections-auth) echo "-scenario connections -clients 10000 -connect-concurrency 64 -username bench-user -password bench-pass" ;;
  *)
    echo "bench-compare: unknown scenario $1 (known: $all_scenarios)" >&2
    return 1
    ;;
  esac
}
for s in $scenarios; do scenario_flags "$s" >/dev/null; done
case $rounds in '' | *[!0-9]* | 0)
  echo "bench-compare: ROUNDS must be a positive integer, got '$rounds'" >&2
  exit 2
  ;;
esac

log() { echo "bench-compare: $*" >&2; }

# Mosquitto from Debian, when missing.
mosquitto=$(command -v mosquitto || true)
[ -n "$mosquitto" ] || [ ! -x /usr/sbin/mosquitto ] || mosquitto=/usr/sbin/mosquitto
if [ -z "$mosquitto" ]; then
  log "installing mosquitto"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get install -y -qq --no-install-recommends mosquitto >/dev/null ||
    { $sudo apt-get update -qq >/dev/null && $sudo apt-get install -y -qq --no-install-recommends mosquitto >/dev/null; }
  mosquitto=$(command -v mosquitto || echo /usr/sbin/mosquitto)
fi

read -r -a brokers <<<"${BROKERS:-mosquitto shoal}"
if [ "${#brokers[@]}" -ne 2 ]; then
  echo "bench-compare: BROKERS must name two brokers, got '${BROKERS:-}'" >&2
  exit 2
fi
for b in "${brokers[@]}"; do
  case $b in mosquitto | shoal | fluxmq) ;; *)
    echo "bench-compare: BROKERS: unknown broker $b (mosquitto, shoal, fluxmq)" >&2
    exit 2
    ;;
  esac
done
fluxmq=""
case " ${brokers[*]} " in *" fluxmq "*) fluxmq=$(scripts/fluxmq.sh) ;; esac

shoal=${SHOAL_BIN:-}
if [ -z "$shoal" ]; then
  log "building bin/shoal"
  go build -o bin/shoal ./cmd/shoal
  shoal=bin/shoal
fi
log "building bin/shoal-bench"
go build -o bin/shoal-bench ./bench/cmd/shoal-bench

# 10,000 connections need as many descriptors in the generator and in the
# broker (both inherit this limit).
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
log "open files limit $(ulimit -n)"

mkdir -p "$out"
tmp=$(mktemp -d)
chmod 0711 "$tmp" # mosquitto started as root runs as user mosquitto: it must reach its run's directory
# The password file of the *-auth scenarios (user bench-user of tenant
# bench, the generator's prefix); readable by mosquitto's own user.
passwd=$tmp/passwd
mosquitto_passwd -c -b "$passwd" bench-user bench-pass >/dev/null 2>&1 ||
  { log "mosquitto_passwd failed"; exit 1; }
chmod 0644 "$passwd"
broker_pid=""
# shellcheck source=scripts/bench-lib.sh
. "$root/scripts/bench-lib.sh" # free_port, stop_pid, install_copy
install_copy "$shoal" "$tmp/shoal" # measured as an installed binary (bench-lib.sh)
shoal=$tmp/shoal
stop_broker() {
  stop_pid "$broker_pid" 10
  broker_pid=""
}
cleanup() {
  stop_broker
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# wait_mqtt waits (30 s at most) until the port accepts TCP connections
# while the broker process lives.
wait_mqtt() {
  local port=$1
  for _ in $(seq 300); do
    kill -0 "$broker_pid" 2>/dev/null || return 1
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  return 1
}

start_mosquitto() { # dir port scenario
  local dir=$1 port=$2 auth="allow_anonymous true"
  case $3 in *-auth) auth="allow_anonymous false
password_file $passwd" ;; esac
  chmod 0777 "$dir" # mosquitto started as root runs as user mosquitto and writes its log here
  cat >"$dir/mosquitto.conf" <<EOF
listener $port 127.0.0.1
$auth
persistence false
max_queued_messages 1000000
max_queued_bytes 0
max_inflight_messages 0
set_tcp_nodelay true
log_dest file $dir/broker.log
log_type error
log_type warning
EOF
  "${pin_broker[@]}" "$mosquitto" -c "$dir/mosquitto.conf" >"$dir/stdout.log" 2>&1 &
  broker_pid=$!
  wait_mqtt "$port"
}

start_fluxmq() { # dir port scenario: scripts/fluxmq.sh's minimal configuration
  local dir=$1 port=$2
  case $3 in *-auth) log "fluxmq: the *-auth scenarios are not set up for it"; return 1 ;; esac
  scripts/fluxmq.sh config "$port" "$dir/data" >"$dir/fluxmq.yaml"
  "${pin_broker[@]}" "$fluxmq" -config "$dir/fluxmq.yaml" >"$dir/broker.log" 2>&1 &
  broker_pid=$!
  wait_mqtt "$port"
}

shoal_http=""
start_shoal() { # dir port scenario
  local dir=$1 port=$2 http auth=()
  case $3 in *-auth) auth=(--password-file "$passwd") ;; esac
  http=$(free_port)
  shoal_http=$http
  # shellcheck disable=SC2086 # SHOAL_FLAGS is flags, split into words
  "${pin_broker[@]}" "$shoal" all --data-dir "$dir/data" --mqtt-listen "127.0.0.1:$port" --http-listen "127.0.0.1:$http" \
    --ws-listen '' --pprof "${PROFILE:-0}" "${auth[@]}" ${SHOAL_FLAGS:-} >"$dir/broker.log" 2>&1 &
  broker_pid=$!
  wait_mqtt "$port" || return 1
  for _ in $(seq 300); do # the listener opens before every role is ready
    curl -sf "http://127.0.0.1:$http/readyz" >/dev/null 2>&1 && return 0
    kill -0 "$broker_pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

failures=0
run_one() { # scenario label round
  local name=$1 label=$2 round=$3 dir port rc=0
  dir=$tmp/$name-$label-r$round
  mkdir -p "$dir"
  port=$(free_port)
  if ! "start_$label" "$dir" "$port" "$name"; then
    log "$label did not start; its log:"
    cat "$dir"/*.log 2>/dev/null | tail -20 >&2 || true
    cat "$dir"/*.log >"$out/$name-$label-r$round.log" 2>/dev/null || true
    stop_broker
    failures=$((failures + 1))
    return 0
  fi
  local prof_pid="" mem_pid=""
  if [ "${PROFILE:-0}" = 1 ] && [ "$label" = shoal ]; then
    # The measured window starts after the generator's set-up (a few
    # seconds at most) and the warm-up: profile from then on. The
    # connection scenarios measure their connects before the warm-up
    # (after the load, for *-after-load): profile the first seconds of
    # the storm instead (CONNECT_PROFILE, default 2s).
    local prof_after=$((${warmup%s} + 2)) prof_secs=$((${duration%s} - 2)) preload=${PRELOAD:-20s}
    case $name in
      connections*-after-load) prof_after=$((${preload%s} + 2)) prof_secs=${CONNECT_PROFILE:-2} ;;
      connections*) prof_after=0 prof_secs=${CONNECT_PROFILE:-2} ;;
    esac
    (sleep "$prof_after" && curl -sf -o "$out/$name-shoal-r$round.pprof" \
      "http://127.0.0.1:$shoal_http/debug/pprof/profile?seconds=$prof_secs") &
    prof_pid=$!
    # The runtime's memory classes near the end of the measured window
    # (of the hold, for the connection scenarios: its connections open).
    local mem_at=$((prof_after + prof_secs))
    case $name in connections*) mem_at=$((prof_after + ${warmup%s} + ${duration%s} - 1)) ;; esac
    (sleep "$mem_at" && curl -sf -o "$out/$name-shoal-r$round.memory.txt" "http://127.0.0.1:$shoal_http/debug/memory") &
    mem_pid=$!
  fi
  local rss_base=()
  case $name in *-after-load)
    # Each connection's memory counts from the fresh process's RSS, taken
    # before the load.
    rss_base=(-broker-rss-base "$(awk '$1=="VmRSS:"{print $2*1024}' "/proc/$broker_pid/status")")
    # The load before: its figures are kept beside the run's, not reported.
    # shellcheck disable=SC2046 # the flags are words
    "${pin_gen[@]}" bin/shoal-bench -addr "127.0.0.1:$port" $(scenario_flags pairs-qos0) -warmup 1s -duration "${PRELOAD:-20s}" \
      -broker-pid "$broker_pid" -name "$name-preload" -label "$label" -round "$round" -prefix preload \
      -out "$dir/preload.json" >/dev/null || rc=$?
    ;;
  esac
  # shellcheck disable=SC2046 # the flags are words
  "${pin_gen[@]}" bin/shoal-bench -addr "127.0.0.1:$port" $(scenario_flags "$name") -warmup "$warmup" -duration "$duration" \
    -broker-pid "$broker_pid" "${rss_base[@]}" -name "$name" -label "$label" -round "$round" -prefix bench \
    -out "$out/$name-$label-r$round.json" || rc=$?
  if [ -n "$prof_pid" ]; then
    wait "$prof_pid" 2>/dev/null || log "no profile for $name round $round"
    wait "$mem_pid" 2>/dev/null || log "no memory classes for $name round $round"
    [ ! -s "$out/$name-shoal-r$round.pprof" ] ||
      go tool pprof -top -nodecount=40 "$shoal" "$out/$name-shoal-r$round.pprof" >"$out/$name-shoal-r$round.top.txt" 2>/dev/null || true
  fi
  if ! kill -0 "$broker_pid" 2>/dev/null; then
    log "$label exited during $name round $round"
    [ "$rc" -ne 0 ] || rc=1
  fi
  stop_broker
  # Both brokers log little at these levels: keep every log with its run.
  cat "$dir"/*.log >"$out/$name-$label-r$round.log" 2>/dev/null || true
  if [ -d "$dir/data" ]; then du -sh "$dir/data" >>"$out/$name-$label-r$round.log" 2>/dev/null || true; fi
  if [ "$rc" -ne 0 ]; then
    log "$name on $label, round $round: shoal-bench exited $rc (log kept in $out)"
    failures=$((failures + 1))
  fi
}

start=$(date +%s)
for round in $(seq "$rounds"); do
  for name in $scenarios; do
    if [ $((round % 2)) -eq 1 ]; then order="${brokers[0]} ${brokers[1]}"; else order="${brokers[1]} ${brokers[0]}"; fi
    for label in $order; do
      log "round $round/$rounds: $name on $label"
      run_one "$name" "$label" "$round"
    done
  done
done
log "runs done in $(($(date +%s) - start))s, $failures failed"

{
  echo "# ${brokers[1]} vs ${brokers[0]}"
  echo
  echo "Generated by \`scripts/bench-compare.sh\` ($(date -u +%FT%TZ)); machine: $(nproc) cores, $(uname -r),"
  echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), Go $(go env GOVERSION), $("$mosquitto" -h 2>/dev/null | head -1 || true)."
  echo
} >"$out/README.md"
bin/shoal-bench report -dir "$out" -a "${brokers[1]}" -b "${brokers[0]}" -md "$tmp/tables.md"
cat "$tmp/tables.md" >>"$out/README.md"
if [ "${PLOT:-1}" != 0 ]; then
  (cd bench/plot && go run . -dir "$out" -a "${brokers[1]}" -b "${brokers[0]}") || log "plots failed"
  {
    echo
    for f in "$out"/*.png; do
      [ -e "$f" ] || continue
      b=$(basename "$f")
      echo "![$b]($b)"
    done
  } >>"$out/README.md"
fi
log "results in $out"
[ "$failures" -eq 0 ]
