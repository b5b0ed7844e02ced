// Package routersvc (folder router-svc) is Shoal's router service: it
// consumes message and subscription events, keeps the subscription and
// retained-message indexes (an in-memory trie per shard, rebuilt from the
// view store at start), matches each published message and plans its
// delivery as one record per target gateway.
//
// It meets the gateway and session services only through the log and
// declares the narrow view-store interface it needs in its own package
// ([Store]; adapters: compose/store/pebblestore, and the CQL adapter;
// conformance suite: router-svc/storetest).
//
// # Pieces
//
//   - [Shard]: the deterministic state machine of one partition of
//     shoal.messages (docs/router.md, "One shard per partition"). Apply does no I/O: it appends to an [Output] the
//     [Delivery] records to produce and the [Mutations] to store. Per
//     tenant it keeps a topic.Trie keyed by (client, share group) whose
//     values hold the options, the generation and the route of each
//     subscription, an index client → subscriptions (for REMOVE and
//     REMOVE_ALL), the shared subscriptions' members, and a level tree of
//     retained messages (a new subscription walks only the branches its
//     filter selects). Retained messages that expire are also in a heap.
//   - [Presence]: the newest presence per client, by generation, read
//     from shoal.presence; one per process, shared by every shard, safe
//     for concurrent use. Keys are (tenant, client id) pairs, not joined
//     strings. A shard caches each client's presence entry (a stable
//     pointer), so routing a target costs no hashing.
//   - [Router]: the role. It loads its shards from the [Store], reads
//     shoal.presence from the beginning, consumes shoal.messages from each
//     shard's stored offset + 1 (in shoal all through the process's local
//     delivery path, kafka.ConsumeConfig.Local: the same records, without
//     a fetch), applies each poll, starts producing its
//     deliveries (in shoal all, each handed to the gateway of the process
//     first: handoff.go) and goes on with the next poll (in shoal all a
//     QoS 0 publish may have been routed before it was produced, on the
//     publisher's goroutine: express.go; such a record is skipped); a
//     committer goroutine
//     waits, poll by poll, until Kafka has a poll's deliveries, then stores
//     its mutations with the new offset in one atomic write per shard
//     (router.max_polls_in_flight bounds how far the handler runs ahead;
//     a shard whose offset alone moved is stored within
//     router.offset_interval).
//
// # Decisions where docs/router.md is silent
//
//   - max_retained (quota.go): a retained message on a new topic beyond
//     the tenant's bound is delivered but not kept, and the publisher
//     cannot be told. Each shard allows a tenant its share of the bound,
//     ceil(max_retained / partitions), counting only what it holds, so
//     that applying a partition stays deterministic.
//   - Generations. An ADD older than the entry it would replace (a late
//     record of an earlier connection) is ignored, and sends no retained
//     messages; so is a REMOVE older than its entry. REMOVE_ALL with
//     generation g removes the entries of generation ≤ g, as specified.
//     An ADD that replaces an entry older than the generation its session
//     began with (SubscriptionChange.session_generation: the entry is an
//     ended session's, after a takeover whose removal comes later) is a
//     new subscription for retain handling 1.
//   - Where a client is: the newest, by generation, of the routes the
//     shard learned from the client's subscription changes (kept while the
//     client has subscriptions in the shard, recomputed from the stored
//     entries after a restart) and its presence; a presence of the same
//     generation wins because it may say the connection ended. A client
//     known only from its subscriptions is online, and its session
//     persistent if the newest of them said so
//     (SubscriptionChange.persistent_session), so that a QoS 1/2 message
//     to a persistent session goes through its inbox even before the
//     session's presence (another topic) reaches the router. The QoS 1/2 targets of
//     a persistent session, online or not, go to its inbox (InboxAppend on
//     shoal.sessions); other offline targets are dropped, and so are
//     offline members of a shared subscription group (the next online
//     member is chosen).
//   - One target per client per delivery. All matching subscriptions of a
//     client, including a shared subscription that picked it, fold into one
//     target: QoS = min(published, highest granted), every distinct
//     subscription identifier in ascending order, retain = the published
//     flag if any matching subscription has retain-as-published. No-local compares client ids
//     within the tenant; it does not apply to retained messages sent for a
//     new subscription.
//   - Shared subscriptions: a group is (tenant, share name, filter); its
//     members are kept in client id order and each message goes to the
//     next online member after the last one chosen (round robin, skipping
//     offline members); none online → dropped. The round-robin position is
//     not stored (a restart starts again at the first member). A QoS 1/2
//     message a member left unacknowledged when it went offline goes to
//     the next one (SharedRedispatch, from the session service).
//   - Exactly once for QoS 2 across reconnects (unreleased.go): a shard
//     keeps the packet identifiers of the QoS 2 messages of persistent
//     sessions it routed, per (tenant, client), each with the generation
//     that began the session, until a PublishRelease of the same or a
//     later session, or a REMOVE_ALL of a generation at or above it. A
//     Publish whose identifier it keeps for the same session is a repeat:
//     nothing is routed or retained. One of an earlier session (a late
//     record of an ended connection) is routed but takes nothing from the
//     newer session; one of a newer session replaces an older entry.
//     Stored with the shard's state and offset.
//   - Retained messages: a message is expired when expires_at_ms <
//     now (the injected clock); expired messages are never sent. A retained
//     publish that is already expired deletes the topic's retained message
//     (it replaced it, then expired) and is not delivered. Expired messages
//     are removed when a new subscription finds them and by
//     [Shard.ExpireRetained], which the router calls at the start of each
//     batch of the partition. Messages sent for a new subscription go in
//     topic order, one delivery each, with retain set, QoS = min(message,
//     granted), the subscription's identifier, the message id of the
//     publish that set them, and only when the subscriber is online. The
//     stored form of a retained message is the whole Publish envelope.
//   - Delivery envelopes: tenant, timestamp_us = the router's clock,
//     message_id of the publish; gateway and client_id empty. A publish
//     with more than Config.MaxTargetsPerDelivery targets on one gateway
//     becomes several records for that slot. A delivery to a slot outside
//     shoal.deliveries is dropped with a warning.
//   - Records the shard cannot use (no handled event, missing fields, an
//     invalid topic or filter, undecodable bytes) are skipped with a
//     warning; their offsets count as applied. Records at or below a
//     shard's offset are ignored, so a replay is harmless.
//   - Failures: a failed store write is retried with exponential backoff
//     (router.retry_backoff up to router.max_retry_backoff) until it
//     succeeds or the router stops; polls keep being applied meanwhile up
//     to router.max_polls_in_flight, then the router waits. A produce of
//     deliveries that fails stops the router with the error: franz-go
//     retries retriable errors without limit, so the record was refused for
//     good, and later polls may be produced already (docs/router.md,
//     "Polls in flight"). A crash between the produce and the store write
//     replays the batch, and a crash while offsets wait for
//     router.offset_interval replays those publishes: deliveries are at
//     least once.
//   - Readiness: shards loaded (in group mode: no assignment being loaded)
//     and shoal.presence read: every partition up to the end offset it
//     had at start (listed with retries), or after
//     router.presence_timeout (default 30 s) at the latest, with a
//     warning. shoal.messages is consumed only after that, so the first
//     deliveries already know where clients are. A
//     presence tombstone (empty value) forgets the client of its key
//     (kafka.SplitKey); a key that names no client is logged and
//     skipped.
//   - Group mode (router.group): OnAssigned loads the assigned shards,
//     shardLoaders at a time (retrying the store; explicit partitions
//     load the same way at start), Start resumes each after its stored offset,
//     OnRevoked waits until the committer has stored every poll applied
//     before and the shards' waiting offsets, then drops them, so nothing
//     is lost or replayed on a rebalance and the next owner's writes come
//     after this one's. The same happens at a stop (explicit mode too),
//     bounded by 5 s.
//   - Memory: the shard copies every string it keeps (records are decoded
//     without copying, kafka.DecodeEnvelope), a tenant without
//     subscriptions or retained messages is forgotten, and an [Output]
//     recycles its envelopes and targets, so matching allocates nothing in
//     steady state (BenchmarkShardPublish, TestShardPublishAllocations).
//
// # Concurrency and lock order
//
// A Shard is used by the messages consumer, which calls its handler one
// batch at a time, under Shard.mu; the express path (express.go) routes a
// publish under the same lock, between two batches. The committer goroutine touches no shard:
// it gets each poll's mutations (in an [Output] the handler no longer
// uses until the committer gives it back) and its offsets as values. A shard reads [Presence] under its read
// lock while it plans one publish, after the trie match has returned; no
// other lock is held then. Router.mu guards only the map of owned shards
// and is never held while a shard or the presence runs.
package routersvc
