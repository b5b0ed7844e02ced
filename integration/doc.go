// Package integration holds Shoal's integration suites (build tag
// integration): they run the roles against a real Kafka (KRaft, one node)
// and a real CQL database: the kafka package (kafka*_test.go), the CQL
// view store and slot leases (cql_test.go), and a distributed cluster of
// separate shoal processes (cluster*_test.go). TestFaults (faults*_test.go)
// runs the roles on a Kafka of three nodes and a Cassandra ring of three
// (cql_ring_test.go; SHOAL_FAULT_RING=0: one node) and injects faults under a
// checked load (docs/faults.md); one of its gateways runs in a network
// namespace whose link to Kafka it cuts (netns_test.go). `make integration` (part of `make test`)
// runs them.
//
// This directory is a Go module of its own
// (github.com/shoal-mqtt/shoal/integration, with a replace directive to
// the main module in ..), so that testcontainers-go and its dependencies
// stay out of the main go.mod. Its tests may import the main module's
// internal packages: the import path is under the same prefix. The shoal
// binary the cluster suite runs is built in the main module, with the
// main go.mod.
//
// The servers (package servers):
//
//   - without a Docker engine, as on the development and CI machines here,
//     Apache Kafka 4.3.1 and Apache Cassandra 5.0.9 run as local processes
//     on loopback ports (internal/localserver/realkafka, realcql), from jars
//     fetched once from Maven Central into ~/.cache/shoal; the output says
//     "no Docker engine: starting Kafka and Cassandra as local processes";
//   - with a Docker engine (testcontainers-go's own health check, 5 s at
//     most), a Kafka container (the kafka module of testcontainers-go
//     v0.40.0, image confluentinc/confluent-local, the one family it
//     supports) and a ScyllaDB container (its scylladb module); the
//     images can be changed with SHOAL_IT_KAFKA_IMAGE and
//     SHOAL_IT_SCYLLA_IMAGE. SHOAL_IT_SERVERS=processes or containers
//     forces a way.
//
// The container path is untested here: no Docker engine runs on the
// machines this was written on. What is tested is the choice and the
// fallback (servers.TestChoose, servers.TestDockerEngine, and every run of
// the suites here). In container mode the scenarios that stop and restart
// Kafka (TestKafkaBrokerRestart, TestCluster/KafkaRestartUnderLoad) are
// skipped with a message: a restarted container gets new host ports. The
// CQL limits measured on Cassandra (TestCQLStoreBatchAboveServerLimit,
// TestCQLStoreSessionCommitAboveServerLimit) may differ on ScyllaDB.
package integration
