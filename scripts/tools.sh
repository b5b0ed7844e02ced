#!/usr/bin/env bash
# Installs the developer tools Shoal's make targets need, pinned by
# tools/go.mod, into a cache outside the work tree so that fresh clones on
# the same machine reuse them. Idempotent: a tool already built at the pinned
# version is not rebuilt. Prints the tool directory.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${SHOAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/shoal}
bin=$cache/bin
mkdir -p "$bin"

# golangci-lint, at the version tools/go.mod pins.
want=$(awk '$1=="github.com/golangci/golangci-lint/v2"{print $2}' "$root/tools/go.mod")
have=""
if [ -x "$bin/golangci-lint" ]; then
  have=$("$bin/golangci-lint" version --short 2>/dev/null || true)
fi
if [ "v${have#v}" != "$want" ]; then
  echo "tools: building golangci-lint $want into $bin" >&2
  (cd "$root/tools" && go build -o "$bin/golangci-lint" github.com/golangci/golangci-lint/v2/cmd/golangci-lint)
fi
# The protobuf tool chain: buf (lint, breaking, generate) and the Go
# generators it runs as local plugins. A stamp file records the tools/go.mod
# they were built from.
stamp=$bin/.proto-tools.sum
sum=$(sha256sum "$root/tools/go.mod" | cut -d' ' -f1)
if [ ! -x "$bin/buf" ] || [ ! -x "$bin/protoc-gen-go" ] || [ ! -x "$bin/protoc-gen-go-vtproto" ] ||
   [ "$(cat "$stamp" 2>/dev/null)" != "$sum" ]; then
  echo "tools: building buf, protoc-gen-go, protoc-gen-go-vtproto into $bin" >&2
  (cd "$root/tools" &&
    go build -o "$bin/buf" github.com/bufbuild/buf/cmd/buf &&
    go build -o "$bin/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go &&
    go build -o "$bin/protoc-gen-go-vtproto" github.com/planetscale/vtprotobuf/cmd/protoc-gen-go-vtproto)
  echo "$sum" >"$stamp"
fi
# helm, for the chart's tests (deploy/helm): built from its Go module, as
# no Debian package ships it. A large build (a few minutes), done once.
# helm's own Makefile stamps the Kubernetes version of its client-go
# (v0.37 for v3.22.0) into the default capabilities; without it helm
# assumes v1.20 and refuses the chart's kubeVersion (>=1.28) in `helm
# install --dry-run`. The stamp is part of what is checked below.
helm_version=v3.22.0
helm_k8s_minor=37
helm_ldflags="-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$helm_k8s_minor -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$helm_k8s_minor"
helm_built=$(go version -m "$bin/helm" 2>/dev/null || true)
if [ "$(awk '$1=="mod" && $2=="helm.sh/helm/v3"{print $3}' <<<"$helm_built")" != "$helm_version" ] ||
   ! grep -q "k8sVersionMinor=$helm_k8s_minor" <<<"$helm_built"; then
  echo "tools: building helm $helm_version into $bin" >&2
  GOBIN=$bin GOFLAGS=-mod=mod go install -ldflags "$helm_ldflags" "helm.sh/helm/v3/cmd/helm@$helm_version"
fi
echo "$bin"
