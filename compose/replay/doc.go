// Package replay reads Shoal's event log back for people and tools: the
// events of chosen Kafka topics in a time or offset range, filtered by
// tenant, client, MQTT topic filter, event type, QoS and message
// identifier, written as JSON lines, as a table, or published again to an
// MQTT broker (Run, with a Sink), in time order: each partition read has
// a reader of its own, and a k-way merge of bounded buffers (merge.go)
// writes the earliest next event of them all. Trace follows one message
// through the log, and says when retention has deleted where it was.
// Open reaches the log: a `shoal all` data directory (through the
// running broker's socket, or its files when it is stopped) or a Kafka
// cluster.
//
// Filters are applied as early as the log allows: a client's session
// events, or one topic's publishes, are in one partition, so only that
// partition is read; the record key (tenant/client or tenant/topic) and the
// event-type header reject most records before their value is decoded;
// the rest is decided on the decoded envelope.
package replay
