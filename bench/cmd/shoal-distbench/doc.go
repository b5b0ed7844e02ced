// Command shoal-distbench measures Shoal's distributed mode on a real
// Kafka and a real CQL database on one machine: it starts a one-node
// Apache Kafka (KRaft) and a one-node Apache Cassandra as local processes
// (internal/localserver/realkafka and realcql: the jars are fetched once by
// scripts/fetch-kafka.sh and scripts/fetch-cassandra.sh), then Shoal's
// roles as separate processes of the real binary (shoal session, shoal
// router, shoal gateway), and runs the load generator's latency scenario
// (package bench/load) against them, at QoS 0 and QoS 1, for a few rounds.
//
// Two topologies are measured: one gateway (publishers and subscribers on
// it), and two gateways, publishers on the first and subscribers on the
// second, where every message crosses the log from one gateway process to
// another.
//
// Each run's result is written as JSON (the generator's result, with the
// CPU and RSS of every Shoal process, of Kafka and of Cassandra over the
// measured window, and the machine's load average) into the output
// directory (default bench/results/<UTC date>-distributed), with a
// README.md holding the tables; the tables are printed too. With -profile
// the Shoal processes serve /debug/pprof/ and a CPU profile of each is
// taken over each run's measured window.
//
// With -connects N, each round ends with two waves of N clients that
// connect (64 at a time) and disconnect, with client ids new to the broker
// and then the same ids again, whose ended sessions the session service
// reads back from the database: connects/s and the CONNECT-to-CONNACK
// latency are printed and written as JSON, beside the tables.
//
// Everything listens on loopback; every wait is bounded (-timeout bounds
// the whole command); every process is stopped at the end, on an error and
// on Ctrl-C (SIGINT, SIGTERM), and the kernel kills them if the command
// itself dies (Pdeathsig). It runs on Linux only (/proc, Pdeathsig).
//
//	go run ./bench/cmd/shoal-distbench                 # 3 rounds, 10 s windows
//	go run ./bench/cmd/shoal-distbench -smoke          # 1 round, 2 s windows
//	make bench-distributed
package main
