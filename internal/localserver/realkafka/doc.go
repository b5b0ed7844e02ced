// Package realkafka runs a real Apache Kafka broker (KRaft, one node that is
// both broker and controller) as a local process for Shoal's integration
// tests. Only tests and the distributed benchmark
// (bench/cmd/shoal-distbench) import it.
//
// Start begins with an empty cluster (it removes dir/data: the storage is
// formatted for the controller's port, which Start picks anew). It fetches
// the broker's jars once (scripts/fetch-kafka.sh: kafka_2.13
// 4.3.1 from Maven Central into ${SHOAL_CACHE:-$HOME/.cache/shoal}),
// picks two free loopback ports (PLAINTEXT listener and controller),
// writes server.properties into the cluster's directory, formats the
// storage once (StorageTool random-uuid, then format --standalone) and
// starts `java … kafka.Kafka server.properties`, which it waits for
// until an acks=all produce to a probe topic succeeds. Stop (SIGTERM, then
// SIGKILL after stopTimeout), Kill (SIGKILL) and Restart (same ports, same
// data) drive the process for restart tests.
//
// The broker runs in a process group of its own and is sent SIGKILL by the
// kernel when the test binary dies (Pdeathsig), so neither a failing test
// nor `go test -timeout` leaves a JVM behind. Its stdout and stderr (the
// slf4j-simple log, INFO and above) go to the writer given to Start; the
// last lines are quoted in the errors of Start and Restart.
//
// Broker settings that differ from Kafka's defaults, all for a one-node
// test cluster: the internal topics (consumer offsets, transaction state,
// share coordinator state) have replication factor 1 and min ISR 1 and 4
// partitions instead of 50 (less to create when the first group or
// transaction appears), group.initial.rebalance.delay.ms is 0, and the broker's
// session with the controller times out after 4 s instead of 9 s (after a
// SIGKILL, the restarted broker cannot register until the dead
// incarnation's session has expired). auto.create.topics.enable
// keeps Kafka's default (true), as on many production clusters, so a client
// that would create topics by asking for their metadata is caught by
// tests that check partition counts.
//
// StartNodes starts a cluster of several nodes instead (multi.go), each
// broker and controller of one KRaft quorum with static voters, in
// dir/node-N with ports of its own: internal and new topics are replicated
// on every node with min.insync.replicas 2. Nodes.Node(i) stops, kills,
// restarts, pauses (SIGSTOP) and resumes one node; a restarted node is
// ready once the quorum lists it among the live brokers again. The fault
// tests (integration/faults_test.go) run on it.
//
// The readiness probe uses franz-go directly rather than Shoal's kafka
// package: the harness must not depend on the code it is used to test.
package realkafka
