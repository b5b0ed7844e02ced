#!/usr/bin/env bash
# Fetches the runtime classpath of Apache Cassandra (org.apache.cassandra:
# cassandra-all and every runtime dependency, about 100 jars) from Maven
# Central into the tool cache, for the integration tests' real CQL database
# (internal/localserver/realcql). Needs mvn and Java 17.
#
# Idempotent: a completion marker written after a successful download makes
# later runs return at once; an interrupted run leaves no marker and is
# redone. Prints the lib directory on stdout, everything else on stderr.
#
# Environment: SHOAL_CACHE (default $HOME/.cache/shoal, shared with the other
# fetch scripts; Maven's own repository goes to $SHOAL_CACHE/m2),
# CASSANDRA_VERSION (default 5.0.9).
set -euo pipefail
version=${CASSANDRA_VERSION:-5.0.9}
cache=${SHOAL_CACHE:-$HOME/.cache/shoal}
home=$cache/cassandra-$version
lib=$home/lib
marker=$home/.complete

if [ -f "$marker" ] && [ -d "$lib" ]; then
  echo "$lib"
  exit 0
fi

for cmd in mvn java; do
  command -v "$cmd" >/dev/null 2>&1 || { echo "fetch-cassandra: $cmd not found (install maven and openjdk-17)" >&2; exit 1; }
done

mkdir -p "$home"
# Several test binaries may start at once: one fetches, the others wait.
exec 9>"$home/.lock"
flock 9
if [ -f "$marker" ] && [ -d "$lib" ]; then
  echo "$lib"
  exit 0
fi

echo "fetch-cassandra: downloading cassandra-all $version and its runtime dependencies into $lib (about 70 MB, once)" >&2
work=$(mktemp -d "$home/.fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT
cat >"$work/pom.xml" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0"
         xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
         xsi:schemaLocation="http://maven.apache.org/POM/4.0.0 https://maven.apache.org/xsd/maven-4.0.0.xsd">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.shoal-mqtt</groupId>
  <artifactId>cassandra-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.cassandra</groupId>
      <artifactId>cassandra-all</artifactId>
      <version>$version</version>
    </dependency>
  </dependencies>
</project>
EOF

# Into a fresh directory first, then renamed: lib never holds a partial set.
mvn -q -B -Dstyle.color=never -f "$work/pom.xml" \
  -Dmaven.repo.local="$cache/m2" \
  dependency:copy-dependencies \
  -DincludeScope=runtime \
  -DoutputDirectory="$work/lib" >&2

n=$(find "$work/lib" -name '*.jar' | wc -l)
if [ ! -f "$work/lib/cassandra-all-$version.jar" ] || ! ls "$work/lib"/jamm-*.jar >/dev/null 2>&1; then
  echo "fetch-cassandra: download incomplete ($n jars, cassandra-all or jamm missing)" >&2
  exit 1
fi
rm -rf "$lib"
mv "$work/lib" "$lib"
echo "$version $n jars $(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$marker"
echo "fetch-cassandra: $n jars in $lib" >&2
echo "$lib"
