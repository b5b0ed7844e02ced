#!/usr/bin/env bash
# Installs the system packages Shoal's tests drive: Debian's
# mosquitto-clients (mosquitto_pub/mosquitto_sub, used by the end-to-end
# tests as independent MQTT clients) and mosquitto (its mosquitto_passwd
# writes the password files the authentication tests read, as
# scripts/bench-compare.sh installs it for its broker), haproxy (the
# integration suite routes clients through the real one) and kcat
# (librdkafka's console client: cmd/shoal's TestKcatReadsTheEmbeddedLog
# reads the embedded Kafka with it, as the README does) and chromium
# (the web console's tests drive it headless, compose/console). Idempotent:
# nothing is done when the commands are already there.
set -euo pipefail
need=()
command -v mosquitto_pub >/dev/null 2>&1 && command -v mosquitto_sub >/dev/null 2>&1 || need+=(mosquitto-clients)
command -v mosquitto_passwd >/dev/null 2>&1 || need+=(mosquitto)
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || need+=(haproxy)
command -v kcat >/dev/null 2>&1 || need+=(kcat)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
[ ${#need[@]} -eq 0 ] && exit 0
echo "test-deps: installing ${need[*]}" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
$sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
