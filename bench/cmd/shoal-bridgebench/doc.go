// Command shoal-bridgebench measures Shoal's Kafka data bridge (package
// bridge, docs/bridge.md) on one machine, with stock clients on the Kafka
// side: Debian's kcat reads the bridged topic and feeds the in mapping's,
// mosquitto_sub reads what the bridge publishes. Four parts by default,
// each on fresh processes listening on loopback:
//
//   - throughput: the load generator's saturating pairs (bench/load, QoS 0
//     and QoS 1, as scripts/bench-compare.sh runs them) against Mosquitto,
//     `shoal all` without mappings and `shoal all` with one out mapping
//     that bridges every message, the three alternating within each round;
//     for the bridged runs, the records the bridge wrote in the measured
//     window and its lag (Shoal's /metrics), the time it took to catch up
//     after the load, and a read_committed count of the topic;
//   - out-latency: a paced publisher at a fixed rate (QoS 0, QoS 1) whose
//     payloads carry their scheduled send time as text, read back from the
//     bridged topic by a read_committed kcat: MQTT to Kafka latency, and
//     every message accounted for (lost, repeated, out of order);
//   - in-latency: records written by kcat -P at a fixed rate into an in
//     mapping's topic, read by mosquitto_sub: Kafka to MQTT latency;
//   - catchup: `shoal all` without mappings and a separate `shoal bridge`
//     on its embedded backbone (its TCP listener and SASL credentials),
//     under a paced QoS 1 load; the bridge is stopped for a while and
//     started again: the time it takes to read its backlog, and a
//     read_committed count of the topic against the acknowledged messages;
//   - distributed (only with -parts distributed): the out-latency run on a
//     real Kafka and Cassandra (internal/localserver, as shoal-distbench
//     starts them) with Shoal's roles as processes and a `shoal bridge`.
//
// The results (JSON, the generator's result of every throughput run, the
// processes' logs) and a README.md with the tables go to the output
// directory, default bench/results/<UTC date>-bridge; the tables are
// printed too. Every wait is bounded (-timeout bounds the whole command),
// and every process is stopped at the end, on an error and on Ctrl-C; the
// kernel kills them if the command itself dies (Pdeathsig). Linux only.
//
//	go run ./bench/cmd/shoal-bridgebench -shoal bin/shoal           # the four default parts, about 8 minutes
//	go run ./bench/cmd/shoal-bridgebench -smoke                     # short windows, about 70 seconds
//	go run ./bench/cmd/shoal-bridgebench -parts out-latency -smoke
//	go run ./bench/cmd/shoal-bridgebench -parts distributed         # about 2 minutes
//	make bench-bridge
package main
