#!/usr/bin/env bash
# Measures the memory of `shoal all` after a restart with a large log
# (bench/README.md, "Memory after a restart"): fills the embedded backbone's
# log with the load generator, reads the broker's RSS after an idle pause,
# stops it (SIGTERM), starts it again on the same data directory and reads
# its RSS when ready and after the same pause. Prints one line of figures
# (RSS in MiB, log in MiB).
#
#   scripts/restart-memory.sh                        # ~1 GiB of log, 30 s idle
#   LOG_MIB=2048 RETENTION_BYTES=-1 scripts/restart-memory.sh
#   SHOAL_BIN=/tmp/shoal-before scripts/restart-memory.sh
#
# Environment:
#   LOG_MIB          log to write before the restart, MiB of
#                    data_dir/kafka/partitions (default 1024). The
#                    generator stops when the log holds that much, or after
#                    FILL_MAX seconds (default 120): a bound on retention
#                    may keep the log below it
#   RETENTION_BYTES  --kafka-retention-bytes for `shoal all` (default: none,
#                    the broker's default)
#   IDLE             seconds of idle before each RSS reading (default 30)
#   COLD             1 drops the data directory's pages from the page cache
#                    before the restart (dd iflag=nocache), as after a reboot
#   RESTARTS         restarts to measure (default 1)
#   KILL             1 stops the broker with SIGKILL instead of SIGTERM: the
#                    next start recovers the log without kfake's snapshots
#   SHOAL_BIN        a shoal binary to measure instead of building the tree's
#   SHOAL_FLAGS      extra flags for `shoal all`
#   KEEP             1 keeps the data directory (printed)
#
# Runs on loopback only; the generator is bench/cmd/shoal-bench (pairs, 50
# pairs, QoS 1, 64-byte payloads: the bench's pairs-qos1).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

log_mib=${LOG_MIB:-1024}
fill_max=${FILL_MAX:-120}
idle=${IDLE:-30}
restarts=${RESTARTS:-1}
tmp=$(mktemp -d /tmp/shoal-restart-memory.XXXXXX)
# shellcheck source=scripts/bench-lib.sh
. "$root/scripts/bench-lib.sh" # build_tools, free_port, stop_pid
build_tools "$tmp"          # shoal, bench

log() { echo "restart-memory: $*" >&2; }

broker_pid="" gen_pid=""
cleanup() {
  stop_pid "$gen_pid"
  stop_pid "$broker_pid"
  if [ "${KEEP:-0}" = 1 ]; then
    log "data directory kept: $tmp/data"
  else
    rm -rf "$tmp"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# status prints a field of /proc/PID/status in MiB (VmRSS, VmHWM).
status() { awk -v k="$2:" '$1 == k { printf "%d", $2 / 1024 }' "/proc/$1/status"; }
log_size() { du -sm "$tmp/data/kafka/partitions" 2>/dev/null | cut -f1; }

mqtt=$(free_port)
http=$(free_port)
flags=(--data-dir "$tmp/data" --mqtt-listen "127.0.0.1:$mqtt" --http-listen "127.0.0.1:$http" --ws-listen '' --admin-listen '')
if [ -n "${RETENTION_BYTES:-}" ]; then
  flags+=(--kafka-retention-bytes "$RETENTION_BYTES")
fi
run=0 ready=""
start_shoal() { # sets ready to the seconds it took
  local t0
  run=$((run + 1))
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086 # SHOAL_FLAGS is flags, split into words
  "$shoal" all "${flags[@]}" ${SHOAL_FLAGS:-} >"$tmp/broker-$run.log" 2>&1 &
  broker_pid=$!
  for _ in $(seq 1200); do
    if curl -sf "http://127.0.0.1:$http/readyz" >/dev/null 2>&1; then
      ready=$(echo "$(date +%s.%N) - $t0" | bc)
      return 0
    fi
    kill -0 "$broker_pid" 2>/dev/null || break
    sleep 0.05
  done
  log "shoal did not become ready; its log:"
  tail -20 "$tmp/broker-$run.log" >&2
  return 1
}

start_shoal
log "filling the log to $log_mib MiB (at most ${fill_max}s)"
"$bench" -addr "127.0.0.1:$mqtt" -scenario pairs -clients 50 -qos 1 -payload 64 -inflight 64 \
  -warmup 0s -duration "$((fill_max + 60))s" -out "$tmp/fill.json" 2>"$tmp/fill.log" &
gen_pid=$!
t0=$SECONDS
while [ $((SECONDS - t0)) -lt "$fill_max" ] && [ "$(log_size)" -lt "$log_mib" ]; do
  sleep 1
done
stop_pid "$gen_pid"
gen_pid=""
fill_s=$((SECONDS - t0))
sleep "$idle"
rss_before=$(status "$broker_pid" VmRSS)
hwm_before=$(status "$broker_pid" VmHWM)
size=$(log_size)
line="log ${size} MiB (filled in ${fill_s}s); before shutdown: RSS ${rss_before} MiB (peak ${hwm_before})"
for r in $(seq "$restarts"); do
  if [ "${KILL:-0}" = 1 ]; then
    kill -KILL "$broker_pid"
    wait "$broker_pid" 2>/dev/null || true
  fi
  stop_pid "$broker_pid"
  broker_pid=""
  size=$(log_size)
  if [ "${COLD:-0}" = 1 ]; then
    find "$tmp/data" -type f -exec sh -c 'for f; do dd if="$f" iflag=nocache count=0 status=none; done' _ {} +
  fi
  start_shoal
  rss_ready=$(status "$broker_pid" VmRSS)
  sleep "$idle"
  rss_idle=$(status "$broker_pid" VmRSS)
  hwm=$(status "$broker_pid" VmHWM)
  line="$line; restart $r (log ${size} MiB): ready in ${ready}s, RSS at ready ${rss_ready} MiB, after ${idle}s ${rss_idle} MiB, peak ${hwm} MiB"
done
echo "$line"
