// Package cqlstore is Shoal's view store on ScyllaDB or Apache Cassandra,
// and the only package that imports a CQL driver (gocql, as ScyllaDB's
// fork: go.mod replaces github.com/gocql/gocql with
// github.com/scylladb/gocql v1.19.0, native protocol v4). A [Store]
// implements routersvc.Store (router.go), sessionsvc.Store (session.go)
// and the gateway slot leases (lease.go). docs/cql.md describes the tables
// for operators; the CQL itself is in schemas/cql.
//
// # Schema and migrations
//
// [Open] creates the keyspace when it is missing (SimpleStrategy with
// cql.replication_factor, refused when the factor exceeds the nodes of the
// cluster's ring: such a keyspace could never serve a QUORUM request, and
// an existing keyspace is never altered), then creates the bootstrap tables
// and applies the numbered migrations of schemas/cql that schema_migrations
// does not list, holding a migration lock (a lightweight transaction with a
// TTL) so that only one process changes the schema at a time; every
// statement is also idempotent (IF NOT EXISTS), so processes that start
// together, or one that dies halfway, are harmless (see migrate). Every
// process sends its schema changes to the same node, the live one with the
// lowest host id: Cassandra 5.0 does not order schema changes made on
// different nodes, and two processes creating one table on two nodes at
// once would create two tables of one name (found by the fault suite's ring
// of three). It then waits for the nodes to agree on the schema before it
// reads a table. The statements name the keyspace through the placeholder
// ${keyspace}, which the store replaces with cql.keyspace: no statement
// depends on a session's current keyspace. An applied migration whose
// statements changed since is refused (its checksum is recorded).
//
// The lightweight transactions (slot leases, migration lock) need a
// keyspace without ScyllaDB's tablets, which do not support them (up to
// ScyllaDB 2025.3 at least): a SimpleStrategy keyspace never uses tablets.
// Operators who create the keyspace themselves with NetworkTopologyStrategy
// on ScyllaDB add tablets = {'enabled': false}.
//
// # Atomicity: one view partition per log partition
//
// Each service's state of one log partition (a router shard: a partition
// of shoal.messages; the sessions of a partition of shoal.sessions) is
// ONE CQL partition, with the offset of the last record applied as a
// static column. Cassandra and ScyllaDB apply a batch whose statements all
// go to one partition as a single mutation: atomically (all of it or
// nothing, without the batch log) and in isolation (a reader sees it whole
// or not at all). So ApplyShard and CommitSessions write with UNLOGGED
// batches to one partition, no logged batch is needed, and the offset
// moves together with the rows it covers.
//
// Limits, checked against Cassandra 5.0.9 with its default settings:
// batch_size_warn_threshold (5 KiB) and batch_size_fail_threshold (50 KiB)
// do not apply to single-partition batches (Cassandra and ScyllaDB skip
// the check when a batch is one mutation; a 15 MiB single-partition
// batch is accepted, a 100 kB batch over ten partitions is refused with
// "Batch too large"). What does limit one batch is the size of a request
// (native_transport_max_frame_size, 16 MiB: "Request is too big") and of
// a mutation (half of commitlog_segment_size, 32 MiB, on both databases).
// Nothing is raised in the server's configuration for Shoal.
//
// # Big router batches are split
//
// ApplyShard writes a batch whose rows add up to more than
// cql.max_batch_bytes (default 4 MiB, at most 15 MiB; estimated from the
// encoded rows) as several batches, in order, all with the same write
// timestamp, the offset's update in the last. Each batch is atomic and
// isolated; the whole is atomic only in the sense that the offset is
// written after every row: a failure or crash between two batches leaves
// some of the new rows with the old offset, never a new offset without its
// rows. That is safe because of how the router uses the store:
//
//   - After a failure the router retries ApplyShard with the same
//     mutations, or, after a crash, loads the shard and replays the
//     records after the stored (old) offset. Mutations hold the final
//     state of each key the records touched, and the router's state
//     changes per key are absolute or guarded by the entry's generation:
//     a retained message is set or deleted; a subscription ADD of an older
//     generation than the stored entry is ignored, a newer or equal one
//     replaces it; REMOVE and REMOVE_ALL delete only entries of a
//     generation up to theirs. Replaying the records over a key that
//     already holds its final value therefore ends with the same value,
//     and keys not in the batch are untouched. The retry or replay then
//     writes the whole batch again, with a newer timestamp, and the
//     offset.
//   - The deliveries of those records were durable before ApplyShard
//     (invariant 3 of ARCHITECTURE.md): the replay repeats them at most
//     (at least once, as for any crash), or sends fewer (retain handling
//     1 sees an entry that already exists).
//   - Only the shard's owner reads or writes its partition, never both at
//     once, so no reader sees the intermediate state except the owner's
//     own LoadShard after a crash, which the replay then corrects.
//
// The integration suite runs the conformance suite with
// cql.max_batch_bytes at 64 KiB, so its LargeBatch test (5000
// subscriptions) takes this path, and writes a 20 MiB batch of retained
// messages with the default configuration.
//
// CommitSessions is never split. The session service's state machine is
// not idempotent over a state that is ahead of its offset: a replayed
// Connect against a session that already reflects a later Connect of the
// same client would take the session over again. So a commit is one batch
// and one mutation, and a commit bigger than the server accepts (16 MiB by
// default) fails whole, changing nothing; the service retries and the
// partition stops until an operator raises the server's limits. Sessions
// carry their offline inbox in their row (session-svc/row.go), so the
// limit is reached by about 16 MiB of queued messages in one commit.
//
// # Write timestamps
//
// Cassandra and ScyllaDB order writes of a cell by timestamp, not by
// arrival. Every batch carries an explicit timestamp that is strictly
// greater than every write the store made or read in that view partition:
// the clock in microseconds, or the previous timestamp + 1 when the clock
// is behind it (stamps in store.go). A load records the newest writetime
// of the rows and of the offset; the first write to a partition this
// store did not load reads the offset's writetime first. So a write
// always replaces the one before it, even after the owner moved to a
// process whose clock is behind the previous owner's, and a deleted key
// stays deleted: a deletion is a row tombstone with that timestamp.
//
// # Gateway slot leases
//
// [Store.AcquireSlot], [Store.RenewSlot] and [Store.ReleaseSlot] keep the
// leases of docs/design.md ("Event flow") in the table gateway_slots with lightweight
// transactions (Paxos, at SERIAL or LOCAL_SERIAL), so two owners never
// both succeed in claiming one slot (gateway/slot.go uses them through its
// SlotLeaser interface). A claim is a conditional batch: IF owner = null,
// set owner with the lease's TTL and, without TTL, last_owner and
// claimed_at; a renewal sets owner with a new TTL IF owner = <itself>,
// and claims the slot when it is free (a gateway with a fixed slot takes
// it this way); a release deletes owner IF owner = <itself>. The lease
// ends when the owner cell expires. AcquireSlot reads the slots (a plain
// read, a hint only) and tries, in order: a slot the owner holds, a free
// slot it claimed last, a never-claimed slot, a free slot another owner
// claimed last (ErrNoFreeSlot when none is free). A claim that times out
// is settled by a serial read.
//
// Clock assumptions. The expiry is decided by the database: TTLs count in
// whole seconds from the second in which the coordinator applied the
// write, against the replicas' clocks, which must be synchronized (NTP)
// as Cassandra and ScyllaDB require anyway. A holder needs no clock in
// common with other gateways, only a monotonic one: it may act as the
// slot's owner until start + ttl − 1 s, where start is its monotonic time
// just before it sent the successful AcquireSlot or RenewSlot (the write
// happens after start; the whole-second count can end the lease up to 1 s
// early), minus what it allows for its clock's drift. It renews well
// before that (every ttl/3, say) and stops using the slot when a renewal
// fails with ErrSlotLost or has not succeeded by then. The TTL is
// rounded up to whole seconds, at least 1 s. Store.Now reads the coordinator's
// clock, which a gateway compares its own with at each lease and renewal
// and corrects by when they differ by a second or more
// (gateway/clock.go).
//
// # Consistency
//
// Reads and writes use cql.consistency (QUORUM by default). A service
// reads its partition only at start, after the previous owner's writes:
// with QUORUM (or LOCAL_QUORUM in one data center) it sees them. LoadShard
// and LoadSessions read their partition in pages of 500 rows.
//
// # Known limits
//
//   - A view partition grows with its log partition's state: every
//     subscription and retained message of a shard (wildcard filters in
//     every shard), every client id ever seen in a partition of
//     shoal.sessions. Keep them well below Cassandra's large-partition
//     warning (100 MB) by giving the topics enough partitions.
//   - Deleted subscriptions and retained messages are row tombstones in
//     their shard's partition until gc_grace_seconds (10 days by default)
//     and a compaction purge them, and LoadShard reads past them.
//     Cassandra fails a read that meets more than 100,000 tombstones
//     (tombstone_failure_threshold); ScyllaDB ends the page early
//     instead. A shard with heavy subscription churn needs a lower
//     gc_grace_seconds on router_shard (above the repair interval).
package cqlstore
