// Package pebblestore is the embedded view store of Shoal: one Pebble
// database (an LSM key-value store) in the data directory, used by
// `shoal all` in place of ScyllaDB. [DB] implements the router's store
// interface (routersvc.Store, router.go) and the session service's
// (sessionsvc.Store, session.go), each under its own key namespace.
//
// # Key layout
//
// Every key starts with a one-byte namespace ('r' for the router, 's' for
// the session service: its tables are listed in session.go) and a
// one-byte table. Variable-length components are length-prefixed (an
// unsigned varint, then the bytes), except the last component of a key,
// which runs to its end; so no tenant, client, group, filter or topic,
// whatever bytes it holds, can make two keys collide or make one key a
// prefix of another's component. Partitions are 4-byte big-endian, so one
// partition's rows are one contiguous key range.
//
// The router's tables:
//
//	'r' 'o' partition                                → offset of the last record applied (8-byte big-endian int64)
//	'r' 's' partition tenant client group filter     → subscription: Envelope{tenant, client_id, subscription_change{op: ADD, filter, share_group, options, route}}
//	'r' 't' partition tenant topic                   → retained message: the Envelope of the Publish that set it
//	'r' 'q' partition tenant client packet-id        → a QoS 2 packet identifier not released yet (2-byte big-endian id): Envelope{tenant, client_id, publish{packet_id, session_generation}}
//
// (tenant, client, group: length-prefixed; filter, topic: the rest of the
// key.) The router's values are protobuf (eventspb, vtprotobuf's
// MarshalVT), so a value is readable without its key and replay tools can
// decode it.
//
// # Durability and atomicity
//
// [DB.ApplyShard] writes every mutation of a batch of records and the new
// offset in one pebble.Batch ([DB.ApplyShards]: the batches of several
// shards in one): after a crash the shard is either wholly before or wholly
// after the batch. Commits wait for an fdatasync of the write-ahead log
// unless the DB was opened with [Options.NoSync] (as `shoal all` does when
// its embedded log does not sync either): a background flusher then
// writes and syncs the write-ahead log within 100 ms of a commit, and after
// a crash a view may be that far behind the log, which the services replay
// from the view's stored offset. Mutations are
// validated before anything is written. [DB.LoadShard] reads through one
// Pebble snapshot, so the offset and the rows it returns are consistent.
package pebblestore
