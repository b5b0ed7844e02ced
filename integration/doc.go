// Package integration holds Shoal's integration suites (build tag
// integration): they run the roles against a real Apache Kafka (KRaft, one
// node) and a real CQL database (Apache Cassandra 5, which speaks
// ScyllaDB's protocol), both started as local processes on loopback ports
// by internal/testutil/realkafka and internal/testutil/realcql from jars
// fetched once from Maven Central into ~/.cache/shoal. `make integration`
// (part of `make test`) runs them.
package integration
