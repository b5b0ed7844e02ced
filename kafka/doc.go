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
// partition count or cleanup policy disagrees with the catalogue. With
// Config.AdoptPartitions (the embedded backbone without kafka.partitions)
// the catalogue's counts are those of new topics only: NewClient gives
// each existing topic its own count first (EmbeddedPartitions is the
// default for new ones). A topic's size bound is per partition
// (RetentionBytes) or per topic (RetentionBytesTotal, split over its
// partitions, adopted count included).
//
// # Record keys
//
// Keyed records are keyed by tenant and topic or client id, built by
// AppendKey (Key, Record.SetKey) and split by SplitKey: tenant + "/" +
// rest, with '%' and '/' escaped within the tenant only, so that the keys
// of ordinary tenants are those every release wrote (key.go).
//
// # Embedded backbone
//
// StartEmbedded runs one kfake broker with its log in a directory
// (durable, reloaded at the next start; one process at a time). It accepts
// no one but Shoal: clients of the same process reach it through
// Embedded.ClientConfig, whose Dial makes their connections in-memory pipes
// (pipe.go: a write appends and wakes the reader; read deadlines are
// honoured), the same Kafka protocol without the kernel's loopback, which
// cost a quarter of `shoal all`'s CPU. Tools of other processes attach with
// AttachEmbedded through a Unix socket in the directory (mode 0600); a
// loopback TCP listener is opened only when EmbeddedConfig.Addr asks for
// one. Every connection authenticates with SASL/SCRAM-SHA-512 and the
// credentials kept in the directory (embeddedauth.go). The broker's
// listener (inproc.go) accepts every kind.
//
// The embedded broker rolls its segments at 1 MiB (EmbeddedSegmentBytes):
// kfake rebuilds its in-memory index at start by reading segments whole,
// a segment per partition at a time, so the memory a start takes does not
// grow with the log; StartEmbedded then returns that memory to the system
// at once (after a crash kfake reads each partition whole). The broker
// applies the topics' retention.ms and retention.bytes every
// DefaultRetentionCheck and compacts every CompactEvery itself: kfake's
// own timer does not run for the topics it reloads.
//
// # Producing
//
// Client is one idempotent producer with acks=all shared by a process's
// roles. Produce is asynchronous: its callback runs on franz-go's single
// promise goroutine and must not block. ProduceSync produces records and
// waits for all of them; ProduceAll starts the same and returns a Pending
// to wait on later, for a caller that goes on meanwhile. A record is retried until Kafka
// takes it or refuses it for good; contexts bound only the wait for buffer
// room, because franz-go
// cancels a whole partition's buffered records when the first one's context
// ends. Linger is 0 by default: under load, batches form while earlier
// requests are in flight. ProduceBackground is Produce for records nobody
// waits for: with Config.BackgroundLinger they wait in the client to share
// requests, and any other produce call sends them first (background.go).
//
// While a broker is down, records wait in the buffer and are retried; once
// it is back they are written exactly once, in order (the idempotent
// producer keeps its producer id across a broker restart, even after
// SIGKILL). A ProduceSync that returns its context's error has therefore
// not necessarily failed: its records stay buffered and are written later.
// Failed requests are retried after 100ms doubling to 1s, and metadata is
// refreshed at most every 500ms (franz-go's defaults, 5s each, delayed the
// first write after a broker restart by up to 4.4s; now about 20ms). See
// docs/kafka.md for what was measured against a real Kafka.
//
// # Consuming
//
// Client.Consume runs a consumer client of its own per call, on explicit
// partitions or as a member of a consumer group, and hands a handler
// batches of one partition in offset order, one call at a time;
// Client.ConsumePolls hands the batches of a whole poll (every partition
// that had records) in one call, so that a service writes once per poll. No offsets
// are committed: services store the offsets they consumed next to their
// views and give them back through ConsumeConfig.Start, which franz-go
// applies when a partition is assigned (AdjustFetchOffsetsFn); an offset no
// longer in the log restarts at the log start (reading again is safe,
// skipping is not). What retention deleted before it was read is passed
// over, as Kafka's consumers do, and reported (Client.skipped: a warning
// per gap and shoal.kafka.consumer.skipped), except on compacted topics,
// whose gaps are compaction's. Rebalance callbacks and Start are serialised with the
// handler (BlockRebalanceOnPoll). Fetches wait at most 500ms for new
// records (Kafka's default, not franz-go's 5s): franz-go can send a first
// fetch covering only part of a new assignment, and the rest waits for it.
//
// Groups use Kafka's classic protocol with franz-go's cooperative-sticky
// balancer: a partition moves only by OnRevoked on its old owner (after
// the last batch it handed out was handled) and, in a later rebalance,
// OnAssigned and Start on the new one. A service that stores each batch's
// effects and its next offset before the handler returns, and returns that
// offset from Start, handles every record exactly once across a member
// joining, a member leaving and a broker restart (a member may lose its
// partitions in a restart and get them back: Start runs again). Records are
// handled twice only if a process dies between a batch's effects and its
// stored offset, or if a member is expelled for missing heartbeats (45s
// session timeout) or for a handler that blocks a rebalance beyond 60s
// while it still handles: nothing is committed, so Kafka fences nothing.
// A member that dies without leaving keeps its partitions until its
// session times out. A member the coordinator forgot (UNKNOWN_MEMBER_ID)
// loses its partitions and joins again; Consume goes on.
//
// EndOffsets lists each partition's high watermark, for a service to know
// when it has caught up with a topic.
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
// What is reused instead of allocated per record: franz-go decodes fetches
// into record slices from a pool (kgo.WithPools), recycled as soon as the
// consumer has copied them into Records; a consumer with
// ConsumeConfig.Reuse also reuses its Records and batches from one handler
// call to the next (the handler keeps only bytes); RecordPool recycles
// produced records and Pending.Release the states of a ProduceAll. A record
// filled from an envelope carries the envelope's timestamp, so franz-go
// does not read the clock for it.
//
// # The local delivery path
//
// In shoal all the clients of the process share a Feed
// (Embedded.ClientConfig): each record the broker acknowledges is copied
// into the inbox of the process's own consumers of its partition that ask
// for it (ConsumeConfig.Local, explicit partitions), which hand out
// exactly what a fetch would, in offset order, each record once, reading
// from the log what the feed did not carry (feed.go). The router also
// hands its delivery records to the gateway of the process before it
// produces them; HeaderHandoff marks them, in the format of handoff.go,
// and a consumer with ConsumeConfig.SkipHandedOff gets those the gateway
// delivered then without their bytes. The gateway gives the router its QoS
// 0 publishes before it produces them when the feed says the partition is
// settled (Client.TrackOrder, Client.Settled: nothing the process wrote to
// it is unapplied, feedorder.go); HeaderExpress marks those, and a consumer
// with ConsumeConfig.SkipExpressed gets them without their bytes. The
// gateway also waits before writing a PUBLISH while the partition has no
// room (Client.Room: FeedMaxBacklog of the process's records on their way
// to the router, which hands them out or, with tracing on, fetches them),
// so that a flooding client is held to the router's pace and the log's
// size bound never deletes what the router has not read.
// The embedded broker's clients buffer EmbeddedMaxBufferedRecords records.
// Arrays a burst grew are let go after two seconds of light use.
//
// # Envelopes
//
// NewRecord marshals an eventspb.Envelope with vtprotobuf and sets the
// shoal-type header to its event type; WithTraceparent and Traceparent
// carry the W3C trace context; DecodeEnvelope and EventType read them back.
// Every role decodes records through this package: DecodeEnvelope aliases
// the record, DecodeEnvelopeInto merges into structs the caller reuses
// (the router's publishes, the gateway's deliveries), DecodeEnvelopeCopy
// copies what the session service keeps.
// On hot paths Record.Fill marshals into a record's own buffer (value, type
// header, and SetKey's key and AddTraceChild's traceparent after it),
// and a RecordPool recycles records once they are acknowledged, so that
// producing allocates nothing in steady state.
//
// # Transactions and the bridge's consumers
//
// Client.Transact is a consume-produce-commit loop (KIP-447, transact.go):
// a poll's records and its offsets commit in one Kafka transaction. Each
// session first settles what an earlier transaction of its id left pending
// (settle.go), then takes its producer id, then polls. Before a
// transaction produces, it waits for the coordinator to complete the last
// one, which spares Kafka's 20 ms retry of a transaction begun too soon
// (txnend.go). With a target of another cluster the offsets are kept
// there instead, in the same transactions (across.go). Client.Relay commits a group's offsets after
// its handler made the poll durable, at least once (relay.go);
// Client.ReadCommitted reads back a partition's committed records. The Kafka
// bridge (bridge/) is their user; docs/bridge.md has the argument.
package kafka
