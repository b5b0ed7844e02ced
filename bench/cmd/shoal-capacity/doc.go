// Command shoal-capacity is the capacity model: from the unit costs and
// ceilings measured on one machine (bench/units.json, connect-storm.json,
// partition-costs.json and fleet-hold.json), it counts the gateway, router, session-service, Kafka
// and Cassandra nodes of a stated size that the fleets of
// docs/capacity.md take, and prints the tables, each unit cost beside the
// file it came from. Node size, how full a node may run, the replication
// factor, a Kafka node's write rate and the log's retention are flags:
// choices, not measurements.
//
// make capacity writes the tables into docs/capacity.md between its
// markers; a test fails when the committed measurements give other
// tables than the doc holds.
package main
