#!/usr/bin/env bash
# Builds FluxMQ (github.com/absmach/fluxmq), the broker bench/README.md
# compares Shoal and Mosquitto with, into the tool cache of scripts/tools.sh,
# once per version. Idempotent: a binary already built at FLUXMQ_VERSION is
# not rebuilt. Prints the binary's path.
#
#   scripts/fluxmq.sh                     # build (once), print the path
#   scripts/fluxmq.sh config PORT DIR     # print a minimal configuration:
#                                         # MQTT 5.0 on 127.0.0.1:PORT, every
#                                         # other listener off, in-memory
#                                         # storage, its queue files in DIR
#
# Environment:
#   FLUXMQ_VERSION  the tag to build (default v0.51.0)
#   FLUXMQ_SRC      where the source comes from when the Go module proxy
#                   does not serve it: a git repository of FluxMQ (bare or
#                   not; the tag is read with git archive) or a directory
#                   holding that version's source. Without it the script
#                   tries the module proxy, then a shallow git clone of
#                   https://github.com/absmach/fluxmq at the tag.
#   SHOAL_CACHE     the cache directory (default ~/.cache/shoal, as tools.sh)
set -euo pipefail
version=${FLUXMQ_VERSION:-v0.51.0}
module=github.com/absmach/fluxmq

if [ "${1:-}" = config ]; then
  port=${2:?usage: fluxmq.sh config PORT DIR} dir=${3:?usage: fluxmq.sh config PORT DIR}
  # The v5 listener is MQTT 5.0 only (shoal-bench's default protocol); the
  # v3 one would take MQTT 3.1.1 only. An empty address leaves a listener
  # off. Rate limits are off by default.
  cat <<EOF
server:
  tcp:
    v3: {addr: ""}
    v5: {addr: "127.0.0.1:$port", max_connections: 20000}
  websocket:
    v3: {addr: ""}
    v5: {addr: ""}
  amqp:
    plain: {addr: ""}
  amqp091:
    plain: {addr: ""}
  health_enabled: false
  admin_api_addr: ""
  metrics_enabled: false
session:
  max_sessions: 20000
storage:
  type: memory
  badger_dir: "$dir"
cluster:
  enabled: false
log:
  level: error
EOF
  exit 0
fi

cache=${SHOAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/shoal}
bin=$cache/bin
mkdir -p "$bin"
stamp=$bin/.fluxmq.version
if [ -x "$bin/fluxmq" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$version" ]; then
  echo "$bin/fluxmq"
  exit 0
fi

tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
src=$tmp/src
mkdir -p "$src"
if [ -n "${FLUXMQ_SRC:-}" ]; then
  if git -C "$FLUXMQ_SRC" rev-parse --git-dir >/dev/null 2>&1; then
    echo "fluxmq: $version from the git repository $FLUXMQ_SRC" >&2
    git -C "$FLUXMQ_SRC" archive "$version" | tar -x -C "$src"
  else
    echo "fluxmq: the source in $FLUXMQ_SRC" >&2
    cp -R "$FLUXMQ_SRC/." "$src"
  fi
elif dir=$(cd "$tmp" && GOFLAGS=-mod=mod go mod download -json "$module@$version" 2>/dev/null |
  awk -F'"' '$2=="Dir"{print $4}') && [ -n "$dir" ]; then
  echo "fluxmq: $version from the Go module proxy" >&2
  cp -R "$dir/." "$src" # the module cache is read-only
  chmod -R u+w "$src"
else
  echo "fluxmq: the Go module proxy does not serve $module@$version; cloning its tag" >&2
  rm -rf "$src"
  git clone -q --depth 1 --branch "$version" "https://$module" "$src"
fi
[ "$(awk '$1=="module"{print $2}' "$src/go.mod")" = "$module" ] ||
  { echo "fluxmq: $src is not the source of $module" >&2; exit 1; }

# The broker's main package is the module's cmd/ (go install would name
# the binary "cmd").
echo "fluxmq: building $version into $bin (a few minutes the first time)" >&2
(cd "$src" && GOFLAGS=-mod=mod go build -trimpath -o "$bin/fluxmq.part" ./cmd)
mv "$bin/fluxmq.part" "$bin/fluxmq"
echo "$version" >"$stamp"
echo "$bin/fluxmq"
