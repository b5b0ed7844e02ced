#!/usr/bin/env bash
# Fetches Apache Kafka's broker jars (kafka_2.13 plus slf4j-simple for its
# logs) from Maven Central with Maven, for the integration tests' real
# Kafka (internal/localserver/realkafka), and the jar of its command-line
# tools (kafka-tools: the console producer and consumer, kafka-topics),
# which integration/kafkatools_test.go runs against the embedded Kafka.
# The jars go to
# ${SHOAL_CACHE:-$HOME/.cache/shoal}/kafka-<version>/lib and Maven's own
# repository to ${SHOAL_CACHE:-$HOME/.cache/shoal}/m2, outside the work tree,
# so that every clone on the machine shares them.
#
# Idempotent: when the lib directory holds a completion marker (written only
# after Maven succeeded) nothing is done. Prints the lib directory on stdout;
# everything else goes to stderr.
set -euo pipefail
version=4.3.1
slf4j=1.7.36
cache=${SHOAL_CACHE:-$HOME/.cache/shoal}
home=$cache/kafka-$version
lib=$home/lib
marker=$lib/.complete

# A lib of an earlier version of this script lacks the tools' jar.
complete() { [ -f "$marker" ] && [ -f "$lib/kafka-tools-$version.jar" ]; }
if complete; then
  echo "$lib"
  exit 0
fi
command -v mvn >/dev/null 2>&1 || { echo "fetch-kafka: mvn not found (Debian: apt-get install maven)" >&2; exit 1; }

mkdir -p "$home"
# One fetch at a time (test binaries of several packages may start at
# once); whoever waited finds the marker and is done.
exec 9>"$home/.fetch.lock"
flock 9
if complete; then
  echo "$lib"
  exit 0
fi
echo "fetch-kafka: fetching kafka_2.13 $version into $lib" >&2
# Download into a fresh directory beside lib and move it into place at the
# end, so that an interrupted run never leaves a partial lib behind.
tmp=$(mktemp -d "$home/fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/pom.xml" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0"
         xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
         xsi:schemaLocation="http://maven.apache.org/POM/4.0.0 https://maven.apache.org/xsd/maven-4.0.0.xsd">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.github.shoal-mqtt</groupId>
  <artifactId>shoal-kafka-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>$version</version>
    </dependency>
    <!-- The tools need nothing that kafka_2.13 does not bring; their own
         dependencies are Kafka Connect's, Jetty and Jersey (46 jars). -->
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka-tools</artifactId>
      <version>$version</version>
      <exclusions>
        <exclusion>
          <groupId>*</groupId>
          <artifactId>*</artifactId>
        </exclusion>
      </exclusions>
    </dependency>
    <dependency>
      <groupId>org.slf4j</groupId>
      <artifactId>slf4j-simple</artifactId>
      <version>$slf4j</version>
    </dependency>
  </dependencies>
</project>
EOF
# Maven's output (Debian's build prints colour codes even with -B) is kept
# and shown only when it fails.
if ! mvn -q -B -f "$tmp/pom.xml" \
  -Dmaven.repo.local="$cache/m2" \
  dependency:copy-dependencies \
  -DincludeScope=runtime \
  -DoutputDirectory="$tmp/lib" >"$tmp/mvn.log" 2>&1; then
  cat "$tmp/mvn.log" >&2
  echo "fetch-kafka: mvn dependency:copy-dependencies failed" >&2
  exit 1
fi
n=$(find "$tmp/lib" -name '*.jar' | wc -l)
for jar in kafka_2.13-$version.jar kafka-tools-$version.jar; do
  if [ ! -f "$tmp/lib/$jar" ]; then
    echo "fetch-kafka: maven finished but $jar is missing from $tmp/lib" >&2
    exit 1
  fi
done
rm -rf "$lib"
mv "$tmp/lib" "$lib"
echo "$version ($n jars)" >"$marker"
echo "fetch-kafka: $n jars in $lib" >&2
echo "$lib"
