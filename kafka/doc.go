// Package kafka is the only package of Shoal that imports franz-go: the
// topic catalogue (names, keys, partitions, cleanup policy, retention), the
// embedded backbone, the producer and consumers the roles share, and reading
// and writing event envelopes. The embedded backbone runs the same code
// against an in-process kfake cluster.
//
// # Topic catalogue
//
// Catalogue (DefaultCatalogue) names Shoal's topics and how each is
// partitioned: keyed topics by murmur2 of the key, exactly as Kafka's
// default partitioner (PartitionForKey computes it without producing),
// unless a record names its partition (Record.Partition ≥ 0 instead of
// PartitionByKey: a broadcast to every partition); shoal.deliveries by the
// partition the producer sets, the gateway slot.
// Client.EnsureTopics creates missing topics and refuses existing ones whose
// partition count or cleanup policy disagrees with the catalogue.
//
// # Embedded backbone
//
// StartEmbedded runs one kfake broker on a loopback address with its log in
// a directory (durable, reloaded at the next start; one process at a time).
// Clients connect to Embedded.Addrs as to any Kafka cluster.
//
// # Producing
//
// Client is one idempotent producer with acks=all shared by a process's
// roles. Produce is asynchronous: its callback runs on franz-go's single
// promise goroutine and must not block. A record is retried until Kafka
// takes it or refuses it for good; contexts bound only the wait for buffer
// room, because franz-go
// cancels a whole partition's buffered records when the first one's context
// ends. Linger is 0 by default: under load, batches form while earlier
// requests are in flight.
//
// # Consuming
//
// Client.Consume runs a consumer client of its own per call, on explicit
// partitions or as a member of a consumer group, and hands a handler
// batches of one partition in offset order, one call at a time. No offsets
// are committed: services store the offsets they consumed next to their
// views and give them back through ConsumeConfig.Start, which franz-go
// applies when a partition is assigned (AdjustFetchOffsetsFn); an offset no
// longer in the log restarts at the log start (reading again is safe,
// skipping is not). Rebalance callbacks and Start are serialised with the
// handler (BlockRebalanceOnPoll). Fetches wait at most 500ms for new
// records (Kafka's default, not franz-go's 5s): franz-go can send a first
// fetch covering only part of a new assignment, and the rest waits for it.
//
// # Buffers
//
// Consumed records alias the fetch response they arrived in; franz-go
// allocates a new one per response and never reuses it, so a record's Key,
// Value and headers stay valid after the handler returns, and
// DecodeEnvelope decodes without copying (strings and bytes alias the
// value). Holding a small slice pins its whole fetch response, so what is
// kept long is copied. A produced record's bytes belong to the client until
// its callback runs.
//
// # Envelopes
//
// NewRecord marshals an eventspb.Envelope with vtprotobuf and sets the
// shoal-type header to its event type; WithTraceparent and Traceparent
// carry the W3C trace context; DecodeEnvelope and EventType read them back.
package kafka
