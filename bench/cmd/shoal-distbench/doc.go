// Command shoal-distbench measures Shoal's distributed mode on a real
// Kafka and a real CQL database on one machine: it starts Apache Kafka
// (KRaft) and Apache Cassandra as local processes
// (internal/localserver/realkafka and realcql: the jars are fetched once by
// scripts/fetch-kafka.sh and scripts/fetch-cassandra.sh), then Shoal's
// roles as separate processes of the real binary (shoal session, shoal
// router, shoal gateway), and runs one of the load generator's scenarios
// (package bench/load) against them, at QoS 0 and QoS 1, for a few rounds:
// latency (-scenario latency, the default: a fixed rate, judged against
// the latency target) or pairs (-scenario pairs: as fast as flow control
// allows, QoS 0 bounded by an end-to-end window of -window messages per
// publisher, QoS 1 by -inflight: throughput). A third, -scenario units
// (make bench-units), runs phases one after another on one topology and
// writes what a message and a connect cost each kind of process, the log
// and the database into bench/units.json (docs/capacity.md): units.go
// holds its phases, unitmeter.go the samples taken around them,
// unitcosts.go the costs computed from the samples and unitreport.go the
// JSON and the tables. With -unit-index it measures the router's index
// at many filters instead (index.go), with -unit-storm connect storms of
// many clients at once, a gateway killed under them (storm.go).
//
// Three topologies can be measured:
//
//   - one-gateway: a one-node Kafka and Cassandra, a session service, a
//     router and one gateway, publishers and subscribers on it;
//   - two-gateways: the same with two gateways, publishers on the first
//     and subscribers on the second, where every message crosses the log
//     from one gateway process to another;
//   - cluster: shaped like production, 3 Kafka brokers (topics of 3
//     replicas, min.insync.replicas 2) and a Cassandra ring of 3 (a
//     keyspace of 3 replicas at QUORUM), 2 session services, 2 routers
//     and 3 gateways; pair i's publisher is on gateway i mod 3 and its
//     subscriber on the next one, so every message crosses the log and
//     every gateway both receives and delivers.
//
// The cluster has a backbone of its own (six JVMs), started only once the
// one-node backbone of the other topologies is stopped, since a small
// machine holds one of them at a time: it must therefore come last in
// -topologies (the command refuses it elsewhere). Each backbone's start
// time is printed and written to the README.
//
// Each run's result is written as JSON, <topology>-<scenario>-qos<N>-r<round>.json
// (the generator's result, with the CPU and RSS of every Shoal process and
// of every Kafka and Cassandra JVM over the measured window, and the
// machine's load average), into the output directory (default
// bench/results/<UTC date>-distributed), with a README.md holding the
// tables; the tables are printed too. With the pairs scenario they give
// the delivered msg/s per topology and QoS, the ratio to the first
// topology's, the CPU and memory per kind of process and the deliveries
// per CPU-second of Shoal's processes. With -profile the Shoal processes
// serve /debug/pprof/ and a CPU profile of each is taken over each run's
// measured window.
//
// With -connects N, each round ends with two waves of N clients that
// connect (64 at a time) to the first gateway and disconnect, with client
// ids new to the broker and then the same ids again, whose ended sessions
// the session service reads back from the database: connects/s and the
// CONNECT-to-CONNACK latency are printed and written as JSON, beside the
// tables.
//
// Everything listens on loopback; every wait is bounded (-timeout bounds
// the whole command); every process is stopped at the end, on an error and
// on Ctrl-C (SIGINT, SIGTERM), and the kernel kills them if the command
// itself dies (Pdeathsig). It runs on Linux only (/proc, Pdeathsig).
//
//	go run ./bench/cmd/shoal-distbench                 # 3 rounds, 10 s windows
//	go run ./bench/cmd/shoal-distbench -smoke          # 1 round, 2 s windows
//	go run ./bench/cmd/shoal-distbench -scenario pairs -topologies two-gateways,cluster
//	make bench-distributed
package main
