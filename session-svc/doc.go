// Package sessionsvc (folder session-svc) is Shoal's session service: it
// owns client sessions (who is connected where, takeover, resumption,
// expiry), wills, and the inbox of persistent sessions (every QoS 1/2
// message until the client acknowledges it), answering each CONNECT
// request that gateways send over the log.
//
// It meets the gateway and router services only through the log (it reads
// shoal.sessions; it writes shoal.deliveries, shoal.presence and
// shoal.messages) and declares the narrow view-store interface it needs,
// [Store], in its own package. Its adapters are compose/store/pebblestore
// and compose/store/cqlstore; both pass the conformance suite in
// session-svc/storetest.
//
// # What it does
//
// Per partition of shoal.sessions, per client, in log order:
//
//   - Connect: the connection gets the client's next generation. A client
//     online elsewhere is kicked (Kick, reason 0x8E, to the old slot). A
//     persistent session (expiry > 0) that has not expired resumes when
//     the Connect has no clean start: ConnectResult says session_present
//     and carries its subscriptions, which the router still holds (their
//     entries keep the older generation; the newer presence routes
//     deliveries to the new connection). Any other existing session ends:
//     SubscriptionChange REMOVE_ALL with its generation to every partition
//     of shoal.messages. Then Presence (online) on shoal.presence, then
//     ConnectResult (reason 0, with the session generation: the generation
//     of the connection that began the session, kept with the session, so
//     that routers tell its QoS 2 packet identifiers from those of an
//     earlier session) to the requester's slot, followed on the same
//     slot by every message of the session's inbox, oldest first (DUP and
//     the original packet identifier for one sent before; PUBREL for a QoS
//     2 one PUBREC'd before).
//   - InboxAppend (from the router, for each QoS 1/2 target of a persistent
//     session; from a gateway, for a message it could not deliver): kept in
//     the session's inbox with a sequence number and a packet identifier
//     (up to session.max_inbox), and forwarded at once while the client is
//     online; forwarded without keeping it to a connection whose session is
//     not persistent; dropped when no session exists.
//   - InboxAck (from the gateway: the client's PUBACK, PUBREC or PUBCOMP of
//     an inbox message, matched by sequence number): PUBACK and PUBCOMP
//     end the entry, PUBREC marks it received.
//   - Disconnect of the client's current connection (same connection and
//     generation; any other is stale and ignored): Presence (offline); a
//     session that is not persistent (expiry 0, or set to 0 by the
//     DISCONNECT) ends (REMOVE_ALL to every partition, or, when the
//     session began with this connection and no session of the client
//     ended before while its connection could still write
//     (Session.RemoveEverywhere), only to the partitions the Disconnect
//     says the connection wrote state to: router_partitions, often none);
//     a due will is
//     published as a Publish on shoal.messages (key tenant/topic); the
//     inbox entries a shared subscription gave the client, not yet
//     received, go back to their group (SharedRedispatch).
//   - Disconnect marked abandoned (a gateway gave up waiting for the
//     answer to the connection's Connect; the client got no CONNACK):
//     matched by connection id alone, since the gateway never learned the
//     generation, and handled as a normal DISCONNECT without the will.
//     Connection ids are unique per gateway run, so a newer connection of
//     the client is never ended by it.
//   - SessionSubscriptions of any connection of the current session are
//     kept with the session, for resumption, each filter with the
//     generation of the change that set it: a change of an earlier
//     connection (a SUBSCRIBE that raced a resumption elsewhere) wins over
//     an entry only when it is as new, as it does in a router, and a
//     resumption gives every entry its connection's generation (the
//     gateway binds them again). Those of an ended session are ignored.
//   - SessionTick (written by the service itself to each partition it owns,
//     every session.expiry_check, and to one partition when the earliest
//     deadline of its sessions passes): sessions offline for longer than
//     their expiry interval, judged by the tick's timestamp so that a
//     replay decides the same, end (REMOVE_ALL to every partition), and
//     delayed wills due are published. A reconnect also finds an expired
//     session ended, whether or not a tick came.
//
// # Ordering and durability
//
// The outputs of an event are written in three stages, each durably
// (acks=all) before the next: kicks and removals; presence; answers and
// wills. So the removals of an ended session precede, in every partition of
// shoal.messages, the subscription changes a gateway writes after it got
// the ConnectResult. In `shoal all` the answers go to the gateway of the
// process (WithAnswers) when their stage is written, before they
// are produced: the gateway need wait for nothing more. A batch of records
// is processed in rounds of events of distinct clients, stage by stage, so
// that batching never reorders one client's outputs. Only then are the
// changed sessions and the batch's last offset committed to the store,
// atomically: outputs are at least once, a state change is never
// half-applied, and at start each partition is consumed from its stored
// offset + 1.
//
// # Decisions the architecture leaves open
//
//   - Generations outlive sessions: a client keeps its record (Active
//     false) after its session ended, so its generation never goes back.
//     An ended session keeps its record (generation, no subscriptions) in
//     the store; memory holds the sessions that are not dormant, and the
//     session.ended_cache most recently ended ones (none with the embedded
//     store). A batch first reads those of its clients it does not hold
//     (Store.LoadClients), skipping, with a store whose reads are round
//     trips, the clients a filter says were never stored (idfilter.go):
//     memory follows the clients with a session, not every client ever
//     seen.
//   - A session that ends with the connection it began with, when that
//     connection's gateway names its partitions and nothing of an earlier
//     connection may still reach a router, writes the tombstone of the
//     client's presence instead of an offline presence: the routers forget
//     the client.
//   - REMOVE_ALL is written only when a session exists (not again for a
//     client whose non-persistent session already ended at its disconnect).
//   - A removal meant for partition p of shoal.messages carries the key
//     tenant/client and the explicit partition p (the kafka package lets a
//     record name its partition on a keyed topic, for broadcasts).
//   - A Connect with the slot, connection and request id of the current
//     connection is a duplicate: it is answered again, nothing changes. The
//     same slot and connection with another request id is a gateway that
//     reuses connection ids after a restart: no kick (it would close the
//     new connection), but the old session ends as in a takeover.
//   - A takeover of a session that began with the connection taken over
//     writes no REMOVE_ALL: that connection's Disconnect, which names the
//     partitions where it left entries, brings it later
//     (Session.PendingRemoval); the routers route nothing to those entries
//     meanwhile. A Disconnect that names none means every partition, and
//     so does none coming: the connection's gateway found gone, or the
//     client's next session end or takeover, whichever comes first.
//   - A taken-over connection's will is due at the takeover (MQTT 5.0
//     §3.1.4: the old connection closes without DISCONNECT): at once without
//     a delay or when the session ends; a delayed will is cancelled when the
//     new connection resumes the session.
//   - Will delay (MQTT 5.0 §3.1.3.2.2): a due will with a delay, of a
//     persistent session, is kept with Session.WillDueAt = the end of the
//     connection + min(delay, session expiry); the first SessionTick at or
//     after it publishes it; a connection that resumes the session first
//     cancels it; a session that ends first (expiry, clean start) publishes
//     it then. A normal DISCONNECT discards the will.
//   - Deadlines wake the service, not a finer periodic tick: each partition
//     keeps the earliest time a tick would change one of its sessions
//     (Session.tickDueUs: a delayed will due, an expiry; rounded up to the
//     microsecond of a tick's timestamp), recomputed from the sessions a
//     tick scans anyway and from those a batch changed, so it may be early
//     (a session resumed since) but never late. The tick loop writes a
//     SessionTick stamped with its clock to that partition alone once the
//     time has come, at most every wakeGap (100 ms) per partition, so that
//     deadlines close together share a tick (each tick scans the
//     partition's sessions) and a tick not yet consumed is not repeated at
//     once. A will is then published within a produce-consume round trip
//     of its time (about 10–30 ms on `shoal all`), not up to
//     session.expiry_check late. A wake-up is an ordinary SessionTick on
//     the log: a replay takes the same decisions. A periodic tick of a few
//     milliseconds instead would scan every partition's sessions and write
//     a record per partition hundreds of times a second, idle or not.
//   - Times come from the log: what a session keeps of an event's time
//     (ConnectedAt, DisconnectedAt, WillDueAt: the expiry and the will
//     delay count from them) and what is decided from it (a resumed
//     session that expired, an inbox message that expired) take the
//     event's own timestamp (the gateway's when it wrote the Connect or
//     Disconnect; the tick's or heartbeat's for a connection found gone;
//     the SessionCommand's for a connection an operator's deletion ends),
//     never the service's clock when it applies the record. So a restart
//     that applies records again, or `shoal views rebuild` reading the
//     log days later, decides exactly as the first time; and a service
//     that catches up after an outage counts a session's expiry from when
//     its client really left. The service's clock stamps only its
//     outputs (and an event without a timestamp). Tested:
//     TestReplayKeepsSessionTimes.
//   - A DISCONNECT that raises a session expiry of 0 (a protocol error the
//     gateway answers) leaves it at 0.
//   - SessionSubscriptions apply removals, then additions; a subscription
//     replaces the one with the same filter; they produce nothing.
//   - The envelope's gateway field names the gateway of the connection an
//     output concerns: the requester's for ConnectResult and online
//     Presence, the old connection's for Kick, removals, offline Presence
//     and wills. Removals carry the old connection's route.
//   - A will is published as the gateway sent it, with Publish.connection = the ended connection, and
//     message id {epoch, seq}: epoch random per start of the service, seq
//     counting the wills of the process. A batch replayed after a failure
//     gives its wills new message ids. A will's Message Expiry Interval
//     starts when it is published (Will.expiry_interval_s).
//   - Records that cannot be decoded, without a client id, or with events
//     that do not belong on shoal.sessions are logged and skipped (their
//     offsets count as applied). A Connect without a valid slot cannot be
//     answered and is skipped; its gateway times out.
//   - On a failed batch (produce or store error) Run logs, backs off
//     (session.retry_backoff, doubling up to 32 times it), reloads every
//     partition from the store and consumes again. Replays are
//     deterministic: the same generations and outputs again (only
//     timestamps and will message ids differ).
//   - The sessions of the consumed partitions that are not dormant are
//     kept in memory, loaded at start; dormant ones are read from the
//     store when a record names them (above). Records are decoded with
//     copies, so sessions never pin fetch buffers.
//   - [Service.Ready] is true once the state is loaded and the consumer
//     assigned (not when it caught up with the log).
//   - Group mode (session.group, what a distributed deployment runs):
//     partitions are loaded and processed independently, each loaded when
//     the group assigns it and dropped when it is revoked.
package sessionsvc
