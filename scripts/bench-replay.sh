#!/usr/bin/env bash
# Measures how fast `shoal replay` reads the log, next to Kafka's own
# kafka-console-consumer reading the same log in the same run.
#
#   scripts/bench-replay.sh        # MESSAGES=1000000 ROUNDS=2 by default
#
# One `shoal all` (its embedded backbone also on a loopback TCP port for the
# Java consumer, with the SASL/SCRAM credentials of its data directory) is
# filled with at least MESSAGES QoS 0 publishes of 64 bytes by the load
# generator, then shoal.messages is read end to end, ROUNDS times each:
#   - kafka-console-consumer (Kafka 4.3.1's ConsoleConsumer, values to
#     /dev/null: it prints raw bytes, decodes nothing);
#   - shoal replay --format json (every record decoded, one JSON line each);
#   - shoal replay --format table;
#   - shoal replay with a filter that selects one client's publishes
#     (--client: every record's key and header are looked at, a few
#     decoded).
# Records/s is the topic's records over the wall time of the whole command,
# start-up included, output counted with wc -l. The broker keeps running
# (idle) meanwhile, and replay attaches to it through its socket.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
messages=${MESSAGES:-1000000}
rounds=${ROUNDS:-2}
version=4.3.1
cache=${SHOAL_CACHE:-$HOME/.cache/shoal}
kafkalib=$(./scripts/fetch-kafka.sh)
tools=$cache/kafka-tools-$version
if [ ! -f "$tools/.complete" ]; then
  echo "bench-replay: fetching kafka-tools $version into $tools" >&2
  mkdir -p "$tools"
  t=$(mktemp -d)
  cat >"$t/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.github.shoal-mqtt</groupId><artifactId>shoal-kafka-tools</artifactId><version>1</version><packaging>pom</packaging>
  <dependencies><dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>$version</version></dependency></dependencies>
</project>
EOF
  mvn -q -f "$t/pom.xml" -Dmaven.repo.local="$cache/m2" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$tools" >&2
  rm -rf "$t"
  touch "$tools/.complete"
fi
go build -o bin/shoal ./cmd/shoal
go build -o bin/shoal-bench ./bench/cmd/shoal-bench
tmp=$(mktemp -d)
data=$tmp/data
bin/shoal all --data-dir "$data" --mqtt-listen 127.0.0.1:17983 --ws-listen '' --http-listen 127.0.0.1:17190 \
  --kafka-embedded-addr 127.0.0.1:17992 >"$tmp/shoal.log" 2>&1 &
spid=$!
trap 'kill $spid 2>/dev/null || true; wait $spid 2>/dev/null || true; rm -rf "$tmp"' EXIT
for _ in $(seq 150); do curl -sf http://127.0.0.1:17190/readyz >/dev/null && break; sleep 0.2; done

count() { bin/shoal replay --data-dir "$data" --quiet --type publish --format table | tail -n +2 | wc -l; }
have=0
while [ "$have" -lt "$messages" ]; do
  bin/shoal-bench -addr 127.0.0.1:17983 -scenario pairs -clients 50 -qos 0 -payload 64 -window 200 \
    -warmup 0s -duration 10s -drain 5s -prefix fill >/dev/null 2>&1 || true
  have=$(count)
  echo "bench-replay: the log holds $have publishes" >&2
done
records=$(bin/shoal replay --data-dir "$data" --quiet --format table | tail -n +2 | wc -l)
echo "bench-replay: shoal.messages holds $records records" >&2

user=$(sed -n 's/^sasl.username=//p' "$data/kafka/client.properties")
pass=$(sed -n 's/^sasl.password=//p' "$data/kafka/client.properties")
cat >"$tmp/java.properties" <<EOF
security.protocol=SASL_PLAINTEXT
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="$user" password="$pass";
EOF

timed() { # label command… : prints "label records seconds records/s"
  local label=$1; shift
  local start end n
  start=$(date +%s.%N)
  n=$("$@" | wc -l)
  end=$(date +%s.%N)
  awk -v l="$label" -v n="$n" -v r="$records" -v s="$start" -v e="$end" \
    'BEGIN { d = e - s; printf "%-34s %9d lines %7.2f s %10.0f records/s\n", l, n, d, r / d }'
}
console() {
  java -Xmx512m -cp "$kafkalib/*:$tools/*" org.apache.kafka.tools.consumer.ConsoleConsumer \
    --bootstrap-server 127.0.0.1:17992 --topic shoal.messages --from-beginning \
    --max-messages "$records" --consumer.config "$tmp/java.properties" 2>/dev/null
}
client=$(bin/shoal replay --data-dir "$data" --quiet --type publish --limit 1 | sed -n 's/.*"client_id":"\([^"]*\)".*/\1/p')
for round in $(seq "$rounds"); do
  echo "round $round ($records records in shoal.messages)"
  timed "kafka-console-consumer" console
  timed "shoal replay --format json" bin/shoal replay --data-dir "$data" --quiet
  timed "shoal replay --format table" bin/shoal replay --data-dir "$data" --quiet --format table
  timed "shoal replay --client $client" bin/shoal replay --data-dir "$data" --quiet --client "$client"
done
