# shellcheck shell=bash
# Sourced by the benchmark scripts (bench-compare.sh, restart-memory.sh,
# steady-memory.sh): what they need to build what they measure and to run
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

# build_tools builds, into directory dir, the shoal binary to measure
# (unless SHOAL_BIN names one) and the load generator, and sets shoal and
# bench to their paths. Run from the repository's root.
build_tools() {
  local dir=$1
  shoal=${SHOAL_BIN:-}
  if [ -z "$shoal" ]; then
    shoal=$dir/shoal
    go build -o "$shoal" ./cmd/shoal
  fi
  # shellcheck disable=SC2034 # bench is the sourcing script's
  bench=$dir/shoal-bench
  go build -o "$bench" ./bench/cmd/shoal-bench
}
