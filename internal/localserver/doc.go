// Package localserver groups the real servers Shoal starts as local
// processes on loopback ports: serverproc (start, wait for a port, stop a
// process group), realkafka (Apache Kafka in KRaft mode) and realcql
// (Apache Cassandra). The integration suites and the distributed
// benchmark (bench/cmd/shoal-distbench) use them, so they are not test
// helpers; jars are fetched once by scripts/fetch-kafka.sh and
// scripts/fetch-cassandra.sh into ~/.cache/shoal.
package localserver
