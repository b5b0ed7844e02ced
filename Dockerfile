# Shoal's container image: one static binary on distroless, run as a
# non-root user. Every role is the same image (shoal gateway | router |
# session | all); the Helm chart in deploy/helm/shoal runs it.
#
#   make image                       # VERSION from git describe
#   docker build --build-arg VERSION=1.2.3 -t ghcr.io/shoal-mqtt/shoal:1.2.3 .
#
# deploy/helm/charttest/dockerfile_test.go checks this file against the
# chart (user, ports) and runs its go build.

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
# The modules first: their layer stays cached while only Shoal's code
# changes. (No RUN --mount caches: the file builds with the legacy builder
# and with podman as well as with BuildKit.)
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# Static (no cgo: nothing to link against on distroless/static), no paths
# of the build machine, no symbol tables; the version is `shoal version`'s.
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/shoal ./cmd/shoal

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.title="shoal" \
      org.opencontainers.image.description="Shoal, an MQTT 3.1.1 and 5.0 broker on Kafka" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/shoal-mqtt/shoal" \
      org.opencontainers.image.url="https://github.com/shoal-mqtt/shoal" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/shoal /shoal
# distroless's nonroot user; the chart's podSecurityContext runs as the same
# uid and gid (runAsUser, runAsGroup 65532).
USER 65532:65532
# Its home: `shoal all` without --data-dir keeps ./shoal-data there. The
# chart mounts /var/lib/shoal (data_dir) and /tmp and keeps the root file
# system read-only.
WORKDIR /home/nonroot
# MQTT, MQTT over TLS, WebSocket, WebSocket over TLS, HTTP (/metrics,
# /healthz, /readyz), the admin API and web console (with admin.listen
# :9091; loopback by default).
EXPOSE 1883 8883 8083 8084 9090 9091
ENTRYPOINT ["/shoal"]
