// Package servers starts the real Kafka and CQL database the integration
// suites run against, in one of two ways:
//
//   - as local processes: Apache Kafka (KRaft, one node) and Apache
//     Cassandra 5 from jars fetched once from Maven Central
//     (internal/localserver/realkafka, internal/localserver/realcql); this is the
//     path of the development and CI machines, which have no Docker engine;
//   - as containers through testcontainers-go v0.40.0 when a Docker engine
//     answers: its kafka module (a KRaft broker in the Confluent
//     confluent-local image, the only image family that module supports in
//     v0.40.0; apache/kafka images came to it later) and its scylladb
//     module (ScyllaDB, the CQL database Shoal is built for).
//
// Choose picks the way from the environment variable SHOAL_IT_SERVERS
// ("processes", "containers", or unset/"auto": containers when
// DockerEngine answers) and says why in one line for the test output.
// The container path is not exercised on the machines where this was
// written (no Docker engine): its code is kept to the modules' documented
// calls. The servers' addresses are loopback host ports, so the shoal
// processes the cluster suite starts reach them too.
package servers
