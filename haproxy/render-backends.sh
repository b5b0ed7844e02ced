#!/usr/bin/env bash
# Writes the backends of haproxy.cfg to standard output: one pool of
# gateways per argument.
#
#   haproxy/render-backends.sh POOL=SERVER@MQTT@HEALTH[@MQTTS[@WS[@WSS]]][,SERVER@…] …
#
#   POOL    the pool's name as tenants.map names it ("default" for the pool
#           of unknown tenants): backend pool_POOL, and pool_POOL_tls,
#           pool_POOL_ws and pool_POOL_wss
#   SERVER  a gateway's name (its stick-table entries follow the name)
#   MQTT    its plain MQTT listener, host:port (PROXY v2 is sent to it and
#           to each listener below: gateway.proxy_protocol must be on)
#   HEALTH  its HTTP port on the same host (GET /readyz)
#   MQTTS   its TLS listener, host:port, for the pass-through frontend
#   WS      its WebSocket listener, host:port, for frontend ws
#   WSS     its WebSocket over TLS listener, host:port, for frontend wss
#
# MQTTS, WS and WSS may be empty or left out ("gw@h:1883@9090@@h:8083": no
# TLS, a WebSocket listener); a pool none of whose gateways has one leaves
# that backend without servers, and its clients are refused.
#
# With RESOLVERS=1 the servers are DNS names resolved at run time (a
# "resolvers dns" section from /etc/resolv.conf, re-resolved every 10 s,
# a server whose name does not resolve yet left down until it does): for
# Kubernetes, where a restarted gateway comes back with a new address
# under the same name. The Helm chart renders the same file
# (deploy/helm/shoal/templates/haproxy.yaml; its test compares them).
#
# Example, a laptop with one gateway:
#   haproxy/render-backends.sh default=gw-0@127.0.0.1:11883@9090 > /tmp/backends.cfg
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 POOL=SERVER@MQTT@HEALTH[@MQTTS[@WS[@WSS]]][,…] …" >&2; exit 2; }
have_default=0
resolve=""
if [ "${RESOLVERS:-}" = 1 ]; then
  resolve=" resolvers dns init-addr last,libc,none"
  cat <<CFG
resolvers dns
    parse-resolv-conf
    hold valid 10s
CFG
fi
for arg in "$@"; do
  pool=${arg%%=*}
  servers=${arg#*=}
  case $pool in '' | *[!A-Za-z0-9_]*) echo "render-backends: bad pool name '$pool'" >&2; exit 2 ;; esac
  [ "$pool" = default ] && have_default=1
  for kind in plain tls ws wss; do
    name=pool_$pool
    [ $kind = plain ] || name=${name}_$kind
    printf '\nbackend %s\n' "$name"
    # WebSocket upgrades are HTTP, as frontend ws is.
    [ $kind != ws ] || echo "    mode http"
    cat <<CFG
    # A client sticks to the gateway it last reached (by its identifier;
    # by its address where HAProxy cannot read the CONNECT: TLS passed
    # through, WebSocket), and moves only when that gateway is down. A
    # connection the gateway refuses is tried again on another at once
    # (redispatch on every retry), so clients of a gateway that just died
    # do not wait for the health checks to mark it down: measured, 70 ms
    # from kill -9 to the resumed session's CONNACK, against 3.2 s
    # redispatching on the last retry.
    balance leastconn
    option redispatch 1
    stick-table type string len 256 size 1m expire 24h
CFG
    if [ $kind = plain ]; then
      echo "    stick on req.payload(0,0),mqtt_field_value(connect,client_identifier)"
    else
      echo "    stick on src"
    fi
    cat <<CFG
    option httpchk GET /readyz
    http-check expect status 200
    default-server inter 1s fall 2 rise 2 on-marked-down shutdown-sessions
CFG
    IFS=, read -r -a list <<<"$servers"
    for s in "${list[@]}"; do
      IFS=@ read -r sname mqtt health mqtts ws wss <<<"$s"
      if [ -z "$sname" ] || [ -z "$mqtt" ] || [ -z "$health" ] || [[ $wss == *@* ]]; then
        echo "render-backends: bad server '$s'" >&2
        exit 2
      fi
      host=${mqtt%:*}
      addr=" addr $host"
      [ -z "$resolve" ] || addr=$resolve
      case $kind in
        plain) listen=$mqtt ;;
        tls) listen=$mqtts ;;
        ws) listen=$ws ;;
        wss) listen=$wss ;;
      esac
      [ -z "$listen" ] || echo "    server $sname $listen send-proxy-v2 check port $health$addr"
    done
  done
done
[ $have_default = 1 ] || { echo "render-backends: a pool named default is required" >&2; exit 2; }
