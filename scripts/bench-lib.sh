# shellcheck shell=bash
# Sourced by the benchmark scripts (bench-compare.sh, restart-memory.sh,
# steady-memory.sh, connect-cycle.sh, client-id-memory.sh): what they need to build what they measure and to run
# brokers on loopback ports.
#
# free_port prints a loopback port nothing uses, below the ephemeral range:
# a load generator's closed client sockets linger in TIME_WAIT on ephemeral
# ports, and a listener cannot bind a port they hold. It calls the
# sourcing script's log function when it finds none.
free_port() {
  local p lo
  lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
  [ "$lo" -gt 12000 ] || lo=32768
  for _ in $(seq 200); do
    p=$((10000 + RANDOM % (lo - 10000)))
    if [ -z "$(ss -Htan "sport = :$p" 2>/dev/null)" ]; then
      echo "$p"
      return 0
    fi
  done
  log "no free port found"
  return 1
}

# stop_pid stops process pid (nothing when pid is empty or gone): SIGTERM,
# then SIGKILL if it is still there after secs seconds (default 30).
stop_pid() {
  local pid=$1 secs=${2:-30}
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq $((secs * 10))); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

# install_copy copies binary src to dst as an installation does (read and
# written), and the benchmarks measure that copy. A binary the Go linker
# has just written maps more of its file into a process than the same
# binary read from disk or copied: `shoal all`, idle, held 43 MiB of file
# pages run from the linker's output and 34 MiB run from a copy of it (and
# 34 MiB from either after the page cache was dropped), 9 MiB of its RSS
# that no deployed broker has.
install_copy() {
  cp "$1" "$2.part" && chmod 0755 "$2.part" && mv "$2.part" "$2"
}

# build_tools builds, into directory dir, the shoal binary to measure
# (unless SHOAL_BIN names one; either is measured as its installed copy in
# dir) and the load generator, and sets shoal and bench to their paths.
# Run from the repository's root.
build_tools() {
  local dir=$1
  shoal=${SHOAL_BIN:-}
  if [ -z "$shoal" ]; then
    shoal=$dir/shoal.linked
    go build -o "$shoal" ./cmd/shoal
  fi
  install_copy "$shoal" "$dir/shoal"
  shoal=$dir/shoal
  # shellcheck disable=SC2034 # bench is the sourcing script's
  bench=$dir/shoal-bench
  go build -o "$bench" ./bench/cmd/shoal-bench
}

# stop_broker_on_exit makes the sourcing script stop the broker whose pid
# is in broker_pid (set by start_shoal_all) and remove directory $1 when
# it exits, also on Ctrl-C.
stop_broker_on_exit() {
  broker_pid=""
  cleanup_dir=$1
  trap 'stop_pid "$broker_pid"; rm -rf "$cleanup_dir"' EXIT
  trap 'exit 130' INT TERM
}

# start_shoal_all BIN DIR MQTT HTTP LOG [ARGS...] starts `BIN all` on a new
# data directory DIR/data, MQTT on loopback port MQTT and HTTP on HTTP (no
# WebSocket or admin listener), with ARGS after, its output into LOG; sets
# broker_pid and returns once /readyz answers, or fails (calling log) when
# the broker exits or is not ready within a minute.
start_shoal_all() {
  local bin=$1 dir=$2 mqtt=$3 http=$4 out=$5
  shift 5
  rm -rf "$dir/data"
  "$bin" all --data-dir "$dir/data" --mqtt-listen "127.0.0.1:$mqtt" --http-listen "127.0.0.1:$http" \
    --ws-listen '' --admin-listen '' "$@" >"$out" 2>&1 &
  broker_pid=$!
  for _ in $(seq 1200); do
    curl -sf "http://127.0.0.1:$http/readyz" >/dev/null 2>&1 && return 0
    kill -0 "$broker_pid" 2>/dev/null || break
    sleep 0.05
  done
  log "$bin did not start (its output: $out)"
  return 1
}
