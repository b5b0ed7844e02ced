// Package realcql runs a real CQL database, Apache Cassandra 5 (one node,
// or a ring of several), as local processes for Shoal's integration tests: ScyllaDB speaks the
// same protocol but cannot be installed on the development and CI
// machines, which have no Docker engine. Only tests and the distributed
// benchmark (bench/cmd/shoal-distbench) import it.
//
// [Start] fetches Cassandra's jars once (scripts/fetch-cassandra.sh:
// org.apache.cassandra:cassandra-all 5.0.9 and its runtime dependencies
// from Maven Central into ${SHOAL_CACHE:-$HOME/.cache/shoal}; the
// environment variable SHOAL_CASSANDRA_LIB names a ready lib directory
// instead), picks free loopback ports (storage, SSL storage, native
// transport), writes cassandra.yaml and logback.xml into the node's
// directory and starts `java … org.apache.cassandra.service.CassandraDaemon`
// in the foreground. It returns once the node answers a CQL query
// (SELECT release_version FROM system.local), or fails within
// [ReadyTimeout]. A start that fails because a picked port was taken
// meanwhile is retried on new ports.
//
// The readiness probe speaks the native protocol (v4: STARTUP, then one
// QUERY) itself, in a few dozen lines, instead of using a driver: only the
// CQL store adapter imports gocql, and the harness must not depend on the
// code it is used to test.
//
// # The node
//
// cassandra.yaml is minimal: one token (num_tokens 1, initial_token 0),
// SimpleSnitch, every address on 127.0.0.1, its own data, commit log,
// hints, saved caches and CDC directories under the node's directory,
// auto_snapshot off (dropping a test keyspace does not copy its files) and
// the AllowAll authenticator and authorizer. Everything else, the batch
// size thresholds and the commit log segment size (hence the largest
// mutation) included, keeps Cassandra's defaults, so tests see what a
// production node would do. No JMX port is opened.
//
// The JVM runs with the flags of Cassandra 5.0's own conf/jvm17-server.options
// (the --add-exports / --add-opens list, the jamm agent found on the
// classpath for memtable sizing), -Xmx1g (Options.MaxHeapMiB), the C1 compiler only
// (-XX:TieredStopAtLevel=1: about twice as fast to start, enough for
// tests), the memtable's row overhead given (180 bytes, what Cassandra
// measures at each start otherwise, for 10–30 s of CPU), no wait for gossip
// to settle and a 100 ms ring delay (one node),
// and its temporary files (java.io.tmpdir, jna.tmpdir) in the node's
// directory. CQL answers about 8–20 s after launch on a busy 2-core
// machine; the node then holds about 650 MB of memory.
//
// # A ring
//
// [StartRing] starts n nodes (up to [MaxRing]) at once, node i on the
// address 127.0.0.i (every 127/8 address is the loopback interface's on
// Linux), all on the same three ports: a ring has one storage port, and a
// driver reaches the peers it discovers on the native port it was given.
// Each node has one token, the Murmur3 range cut in n equal parts, does
// not bootstrap (auto_bootstrap false: the ring starts empty) and lists
// every node as a seed, so none waits for another to come up; the ring
// delay is 1 s and the gossip settle wait skipped. A node is ready when it
// answers CQL and lists the others in system.peers. The system tables are
// fsynced as in production (no unsafesystem: a ring node killed with
// SIGKILL must come back with its schema). [Node.Restart] starts a stopped
// or killed node again on its data and ports. Measured on the 2-core
// machine at a 512 MiB heap, unloaded: a ring of three ready in 15–25 s, a
// killed node back in about 7 s (70–105 s under the fault suite's load).
//
// # Never a JVM left behind
//
// The JVM runs in a process group of its own and the kernel sends it
// SIGKILL when the thread that started it dies (Pdeathsig; Go's runtime
// does not end the threads of goroutines that are not locked to them), so
// neither a failing test, a panic nor `go test -timeout` leaves one
// running. [Node.Stop] sends SIGTERM (Cassandra drains and flushes), then
// SIGKILL after [StopTimeout], and waits; [Node.Kill] sends SIGKILL, as a
// crash would. Both are safe to call more than once.
//
// The process's output (logback, INFO and above, on stdout) goes to the
// writer given to Start and to output.log in the node's directory; errors
// of Start quote its last lines.
package realcql
