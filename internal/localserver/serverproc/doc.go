// Package serverproc runs the real servers of the integration tests and
// benchmarks (Kafka, Cassandra) as child processes: each in a process
// group of its own, signalled as a group, killed with the test binary on
// Linux (Pdeathsig), on loopback ports picked free (FreePorts never hands
// out one port twice in a process), with java and the
// project's fetch scripts found the same way for every server. realkafka
// and realcql build on it.
package serverproc
