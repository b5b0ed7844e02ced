// Command shoal-txnbench measures the Kafka bridge's transaction loop alone
// on a real one-node Kafka (internal/localserver/realkafka, the jars fetched
// once by scripts/fetch-kafka.sh): a plain producer writes -rate records/s
// to a topic, kafka.Client.Transact copies each poll of it to a second
// topic in one transaction, as the bridge's out direction does, and a
// read_committed consumer of the second topic measures how long after its
// production each record became visible. It prints the latency quantiles
// and the average length of a poll's transaction.
//
// -kafka-prop adds a line to the broker's server.properties (for example
// add.partitions.to.txn.retry.backoff.ms=1), to measure a broker setting.
// docs/bridge.md "Latency" has its figures.
package main
