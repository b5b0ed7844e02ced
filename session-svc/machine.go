package sessionsvc

import (
	"log/slog"
	"sync/atomic"
	"time"

	"context"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/internal/obs"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
	"go.opentelemetry.io/otel/trace"
)

// destination is the topic an output goes to.
type destination uint8

const (
	// toDeliveries: shoal.deliveries, partition = the gateway's slot.
	toDeliveries destination = iota + 1
	// toPresence: shoal.presence, partitioned by key (tenant/client).
	toPresence
	// toMessages: shoal.messages, to an explicit partition or by key.
	toMessages
)

// byKey as an output's partition lets the key choose it (as Kafka's default
// partitioner would).
const byKey int32 = -1

// stage orders the outputs of one event: every output of a stage is durably
// written before any output of the next stage is produced.
type stage uint8

const (
	// stageTakeover: kicks and subscription removals, durable before the
	// presence, so that a gateway's later subscription changes follow the
	// removals in every partition of shoal.messages.
	stageTakeover stage = iota
	// stagePresence: presence, durable before the answer.
	stagePresence
	// stageAnswer: connect results and wills.
	stageAnswer
	numStages
)

// output is one record the service produces.
type output struct {
	stage     stage
	dest      destination
	partition int32 // the slot for toDeliveries; a partition or byKey for the others
	key       []byte
	env       *eventspb.Envelope
	trace     []byte // the traceparent of the record that caused it, if any
	// ctx is the trace context of the record that caused it (its span,
	// or its receive span) when tracing is on, else nil.
	ctx context.Context
}

// machine turns the events of shoal.sessions into state changes and
// outputs. It holds no per-client state: apply works on the session it is
// given, so the caller decides what is committed.
type machine struct {
	// tracer records the events' spans; nil when tracing is off.
	tracer               trace.Tracer
	messagesPartitions   int32
	deliveriesPartitions int32
	// epoch and seq name the wills the service publishes (MessageID): epoch
	// is random per start, seq counts every will of the process.
	epoch uint64
	seq   *atomic.Uint64
	now   func() time.Time
	log   *slog.Logger
	// filterIDs says each partition keeps a filter of the clients it has
	// stored sessions of, so that the sessions of clients never seen are
	// not read for (partition.stored): a store whose reads are round
	// trips.
	filterIDs bool
	// endedPerPartition is how many ended (dormant) sessions a partition
	// keeps in memory besides its store (session.ended_cache); 0: none.
	endedPerPartition int
	// maxInbox bounds the messages queued for one offline session;
	// inboxDropped counts what it made the service drop.
	maxInbox     int
	inboxDropped *atomic.Int64
	// drops counts the messages dropped into shoal.messages.dropped
	// (metrics.go); nil: not counted (a Rebuild).
	drops *obs.Drops
	// gatewayTimeout is how long a slot's gateway may go without a
	// heartbeat before its connections are ended.
	gatewayTimeout time.Duration
}

// apply applies one event of client k to sess, which the caller owns and
// which is the zero Session (with Tenant and ClientID set) for an unknown
// client. It appends the outputs to outs and reports whether sess changed.
func (m *machine) apply(k clientKey, sess *Session, env *eventspb.Envelope, outs []output) ([]output, bool) {
	switch ev := env.GetEvent().(type) {
	case *eventspb.Envelope_Connect:
		return m.connect(k, sess, env, ev.Connect, outs)
	case *eventspb.Envelope_Disconnect:
		if takenOver(sess, ev.Disconnect) {
			return m.removeTakenOver(k, sess, env.GetGateway(), ev.Disconnect, outs), true
		}
		return m.disconnect(k, sess, ev.Disconnect, m.eventTime(env), outs)
	case *eventspb.Envelope_SessionSubscriptions:
		return outs, m.subscriptions(k, sess, ev.SessionSubscriptions)
	case *eventspb.Envelope_InboxAppend:
		return m.inbox(k, sess, ev.InboxAppend, env.GetMessageId(), outs)
	case *eventspb.Envelope_InboxAck:
		return outs, m.ack(k, sess, ev.InboxAck)
	case *eventspb.Envelope_DeliveryAck:
		return outs, false // for audit (shoal trace) only
	case *eventspb.Envelope_SessionCommand:
		return m.command(k, sess, ev.SessionCommand, m.eventTime(env), outs)
	default:
		m.log.Warn("unexpected event on shoal.sessions", "event", kafka.EnvelopeType(env),
			"tenant", k.tenant, "client", k.client)
		return outs, false
	}
}

// connect accepts a connection: it takes over an online connection of the
// client, ends the old session, raises the generation, publishes the
// presence and answers the gateway.
func (m *machine) connect(k clientKey, sess *Session, env *eventspb.Envelope, c *eventspb.Connect, outs []output) ([]output, bool) {
	r := c.GetRoute()
	if r == nil || r.GetSlot() < 0 || r.GetSlot() >= m.deliveriesPartitions {
		// Without a valid slot there is nobody to answer; the gateway's
		// request times out.
		m.log.Warn("connect without a valid route", "tenant", k.tenant, "client", k.client,
			"slot", r.GetSlot(), "slots", m.deliveriesPartitions)
		return outs, false
	}
	// at, the event's time, decides what the session keeps (ConnectedAt,
	// whether it expired); now stamps the outputs.
	at, now := m.eventTime(env), m.now()
	// A persistent session resumes on a connection without Clean Start,
	// unless it has expired (MQTT 5.0 §3.1.2.4, 3.1.1 §3.1.2.4).
	resume := !c.GetCleanStart() && sess.Active && sess.Persistent() && !sess.Expired(at)
	sameConn := sess.Online && sess.Route.GetSlot() == r.GetSlot() && sess.Route.GetConnection() == r.GetConnection()
	if sameConn && sess.RequestID == c.GetRequestId() {
		// A duplicate of the request that opened the current connection
		// (a producer retry): answer it again, change nothing.
		res := m.connectResult(k, env.GetGateway(), c.GetRequestId(), sess.Route, now)
		res.env.GetConnectResult().SessionGeneration = sess.SessionGeneration
		return append(outs, res), false
	}
	tookOver := sess.Online
	// The session of a connection taken over ends, and its connection will
	// report its end: when the session began with that connection, the
	// Disconnect names every partition where it left entries, and the
	// REMOVE_ALL goes there then (Session.PendingRemoval), often nowhere,
	// instead of to every partition now. The routers route nothing to
	// those entries meanwhile (older than the new session's generation).
	// Not when its gateway reuses connection ids (sameConn: that
	// connection is gone, nothing will report it), nor when something is
	// owed to every partition already.
	deferRemoval := tookOver && !sameConn && !resume && sess.Active &&
		sess.SessionGeneration == sess.Generation && !sess.RemoveEverywhere && sess.PendingRemoval == nil
	taken := sess.Route
	if sess.Online {
		outs = m.takeOver(k, sess, sameConn, resume, now, outs)
	}
	switch {
	case sess.Active && !resume && deferRemoval:
		outs = m.endSessionIn(k, sess, now, []int32{}, outs)
		sess.PendingRemoval = taken.CloneVT()
	case sess.Active && !resume:
		// The old session ends; the connection starts a new one.
		outs = m.endSession(k, sess, now, outs)
		// A connection taken over may still write a subscription change,
		// which would outlive the REMOVE_ALL (Session.RemoveEverywhere;
		// endSession, which removed everywhere, cleared it).
		sess.RemoveEverywhere = tookOver
	}
	// A delayed will of the previous connection is cancelled by a
	// connection that resumes the session (and was published by
	// endSession otherwise).
	sess.WillDueAt = time.Time{}

	switch {
	case !resume:
		sess.SessionGeneration = sess.Generation + 1
	case sess.SessionGeneration == 0:
		// A session stored before sessions knew their first generation:
		// nothing of it was kept by that generation yet, so any earlier
		// one names it.
		sess.SessionGeneration = sess.Generation
	}
	sess.Generation++
	sess.Active = true
	sess.Online = true
	sess.Route = &eventspb.Route{Slot: r.GetSlot(), Connection: r.GetConnection(), Generation: sess.Generation}
	sess.Gateway = env.GetGateway()
	sess.RequestID = c.GetRequestId()
	sess.ExpiryS = c.GetSessionExpiryS()
	sess.ProtocolVersion = c.GetProtocolVersion()
	sess.Username = c.GetUsername()
	sess.Will = c.GetWill().CloneVT()
	sess.ConnectedAt = at
	sess.DisconnectedAt = time.Time{}

	outs = append(outs, m.presence(k, sess, now))
	res := m.connectResult(k, env.GetGateway(), c.GetRequestId(), sess.Route, now)
	res.env.GetConnectResult().SessionGeneration = sess.SessionGeneration
	if resume {
		// The session continues: the router still holds its subscriptions
		// (the gateway moves them to the new connection before CONNACK),
		// and the gateway learns them for UNSUBSCRIBE and retain handling.
		// Moved, they are the new connection's (the routers' entries get
		// its generation).
		for _, sub := range sess.Subscriptions {
			sub.Generation = sess.Generation
		}
		cr := res.env.GetConnectResult()
		cr.SessionPresent = true
		cr.InboxDropped = sess.InboxDropped
		for _, sub := range sess.Subscriptions {
			cr.Subscriptions = append(cr.Subscriptions, sub.CloneVT())
		}
	}
	outs = append(outs, res)
	if resume {
		outs = m.replayInbox(k, sess, at, now, outs)
	} else {
		sess.Inbox = nil
	}
	sess.InboxDropped = 0
	return outs, true
}

// takeOver ends the client's online connection for a new one: the newer
// connection wins: the old one is kicked (unless it is already gone) and
// its will published when willDue says it is due.
func (m *machine) takeOver(k clientKey, sess *Session, sameConn, resume bool, now time.Time, outs []output) []output {
	// Takeover: the newer connection wins. The same slot and connection
	// with another request means the gateway reuses its connection ids
	// after a restart: the old connection is already gone, and a kick
	// would close the new one.
	if !sameConn {
		kick := m.envelope(k, sess.Gateway, now)
		kick.Event = &eventspb.Envelope_Kick{Kick: &eventspb.Kick{
			Connection: sess.Route.GetConnection(),
			ReasonCode: uint32(packet.CodeSessionTakenOver),
		}}
		outs = append(outs, output{
			stage: stageTakeover, dest: toDeliveries, partition: sess.Route.GetSlot(), key: k.recordKey(), env: kick,
		})
	}
	// The old connection is closed without a DISCONNECT: its will is
	// due (MQTT 5.0 §3.1.4, §3.1.2.5).
	if sess.Will != nil && willDue(sess.Will, !resume) {
		outs = m.publishWill(k, sess, now, outs)
	}
	sess.Will = nil
	return outs
}

// expire ends sess if its expiry interval has passed at now (a
// SessionTick): its subscriptions leave the router.
func (m *machine) expire(k clientKey, sess *Session, now time.Time, outs []output) ([]output, bool) {
	changed := false
	if delayedWillDue(sess, now) {
		// The will delay has passed without a new connection.
		if sess.Will != nil {
			outs = m.publishWill(k, sess, now, outs)
		}
		sess.Will, sess.WillDueAt, changed = nil, time.Time{}, true
	}
	if !sess.Expired(now) {
		return outs, changed
	}
	m.log.Debug("session expired", "tenant", k.tenant, "client", k.client, "expiry_s", sess.ExpiryS)
	return m.endSession(k, sess, now, outs), true
}

// delayedWillDue reports whether the delayed will of the session's ended
// connection is due at now (it may have been published or discarded
// already: then WillDueAt is zero).
func delayedWillDue(sess *Session, now time.Time) bool {
	return !sess.Online && !sess.WillDueAt.IsZero() && !now.Before(sess.WillDueAt)
}

// disconnect ends the client's current connection; a Disconnect of any
// other connection (stale: taken over, or a duplicate) is ignored.
//
// An abandoned Disconnect comes from a gateway that gave up waiting for the
// answer to the connection's Connect: the client got no CONNACK (it got
// 0x88 Server Unavailable, or nothing). It carries no generation (the
// gateway never learned it), so it matches the current connection by id
// alone, which a newer connection of the client never shares; it ends the
// connection as a normal DISCONNECT would, without the will: the client
// never had a connection whose loss the will could announce.
//
// at is when the connection ended: the Disconnect's time, or the time of
// the record that found its gateway gone (a tick, a heartbeat). The
// session's DisconnectedAt and WillDueAt count from it, so that replaying
// the log decides expiry and will delay as the first time.
func (m *machine) disconnect(k clientKey, sess *Session, d *eventspb.Disconnect, at time.Time, outs []output) ([]output, bool) {
	if d.GetAbandoned() {
		if !sess.Online || sess.Route.GetConnection() != d.GetConnection() {
			m.log.Debug("stale abandoned connect ignored", "tenant", k.tenant, "client", k.client,
				"connection", d.GetConnection(), "current", sess.Route.GetConnection())
			return outs, false
		}
		m.log.Info("connection ended: its gateway gave up on the connect", "tenant", k.tenant, "client", k.client,
			"connection", d.GetConnection(), "generation", sess.Generation)
		d = &eventspb.Disconnect{Connection: d.GetConnection(), Generation: sess.Generation, ReasonCode: d.GetReasonCode()}
	}
	if !sess.Online || sess.Route.GetConnection() != d.GetConnection() || sess.Generation != d.GetGeneration() {
		m.log.Debug("stale disconnect ignored", "tenant", k.tenant, "client", k.client,
			"connection", d.GetConnection(), "generation", d.GetGeneration(), "current", sess.Generation)
		return outs, false
	}
	now := m.now()
	if d.SessionExpiryS != nil {
		if sess.ExpiryS == 0 && d.GetSessionExpiryS() != 0 {
			// MQTT-3.14.2-2 (a protocol error the gateway answers): keep 0.
			m.log.Warn("disconnect raises a zero session expiry; ignored", "tenant", k.tenant, "client", k.client)
		} else {
			sess.ExpiryS = d.GetSessionExpiryS()
		}
	}
	sess.Online = false
	sess.DisconnectedAt = at
	presence := len(outs)
	outs = append(outs, m.presence(k, sess, now))
	switch {
	case !d.GetPublishWill() || sess.Will == nil:
		sess.Will = nil // a normal DISCONNECT discards the will
	case willDue(sess.Will, !sess.Persistent()):
		outs = m.publishWill(k, sess, now, outs)
		sess.Will = nil
	default:
		// Delayed: published at the delay or when the session ends,
		// whichever comes first, unless the session resumes before.
		delay := time.Duration(sess.Will.GetDelayIntervalS()) * time.Second
		if sess.ExpiryS != kafka.SessionExpiryNever {
			delay = min(delay, time.Duration(sess.ExpiryS)*time.Second)
		}
		sess.WillDueAt = at.Add(delay)
	}
	switch {
	case sess.Persistent():
		outs = m.redispatchShared(k, sess, now, outs)
	case d.GetRouterPartitionsKnown() && sess.SessionGeneration == sess.Generation && !sess.RemoveEverywhere && sess.PendingRemoval == nil:
		// The session began with this connection and ends with it: the
		// connection's gateway knows every partition in which it left
		// state for the routers, often none (a client that never
		// subscribed), one (a subscription without wildcards). Every
		// partition would cost a record, a router's work and a commit
		// each, at every disconnect.
		outs = m.endSessionIn(k, sess, now, m.routerPartitions(d), outs)
		// The routers are left with nothing of the client, and nothing
		// its connection wrote can reach them after this: they forget its
		// presence, so that a client gone costs them nothing (clients
		// that make up a new id at every connection would otherwise
		// grow every router's memory for good).
		outs[presence] = m.presenceGone(k)
	default:
		outs = m.endSession(k, sess, now, outs)
	}
	return outs, true
}

// takenOver reports whether d is the end of the connection whose session
// a takeover ended (Session.PendingRemoval), which its REMOVE_ALL awaits.
func takenOver(sess *Session, d *eventspb.Disconnect) bool {
	pr := sess.PendingRemoval
	return pr != nil && !d.GetAbandoned() && d.GetConnection() == pr.GetConnection() && d.GetGeneration() == pr.GetGeneration()
}

// removeTakenOver writes the REMOVE_ALL of the session a takeover ended,
// now that the end of its connection (d, from gateway) tells where that
// connection left entries: to those partitions alone, or, when it could
// not tell, to every partition, and then the client's next session end
// removes everywhere too (a subscription change of that connection may
// still follow: Session.RemoveEverywhere). Everything else of the
// connection's end was done at the takeover.
func (m *machine) removeTakenOver(k clientKey, sess *Session, gateway string, d *eventspb.Disconnect, outs []output) []output {
	pr := sess.PendingRemoval
	sess.PendingRemoval = nil
	parts := m.routerPartitions(d)
	if !d.GetRouterPartitionsKnown() {
		parts = nil
		sess.RemoveEverywhere = true
	}
	env := m.envelope(k, gateway, m.now())
	env.Event = &eventspb.Envelope_SubscriptionChange{SubscriptionChange: &eventspb.SubscriptionChange{
		Op:    eventspb.SubscriptionChange_OP_REMOVE_ALL,
		Route: pr,
	}}
	m.log.Debug("session taken over leaves the routers", "tenant", k.tenant, "client", k.client,
		"connection", pr.GetConnection(), "generation", pr.GetGeneration(), "partitions", len(parts), "everywhere", parts == nil)
	return m.removeAll(k, env, parts, outs)
}

// takenOverGone writes the REMOVE_ALL that the session a takeover ended
// still awaits (Session.PendingRemoval) to every partition: the gateway of
// its connection is gone, and the connection's end will not come to name
// them. Should that gateway be alive after all (cut off from the log), a
// subscription change of the connection may still follow
// (Session.RemoveEverywhere, as for gatewayGone).
func (m *machine) takenOverGone(k clientKey, sess *Session, outs []output) []output {
	pr := sess.PendingRemoval
	m.log.Info("gateway of a connection taken over gone; its session leaves every partition", "tenant", k.tenant, "client", k.client,
		"slot", pr.GetSlot(), "connection", pr.GetConnection())
	// The removal names no gateway: the one gone is not kept.
	return m.removeTakenOver(k, sess, "", &eventspb.Disconnect{Connection: pr.GetConnection(), Generation: pr.GetGeneration()}, outs)
}

// routerPartitions returns the partitions a Disconnect lists
// (router_partitions), not nil even when there are none; nil (every
// partition) when one is out of range: the gateway counts the partitions
// of shoal.messages differently, and its list cannot be trusted.
func (m *machine) routerPartitions(d *eventspb.Disconnect) []int32 {
	parts := d.GetRouterPartitions()
	for _, p := range parts {
		if p < 0 || p >= m.messagesPartitions {
			return nil
		}
	}
	if parts == nil {
		parts = []int32{}
	}
	return parts
}

// gatewayGone ends the client's current connection as its gateway died or
// restarted: as an unclean disconnect at at, the time of the record that
// told (the will is due, a non-persistent session ends, a persistent one
// starts its expiry).
func (m *machine) gatewayGone(k clientKey, sess *Session, at time.Time, outs []output) ([]output, bool) {
	m.log.Info("connection ended with its gateway", "tenant", k.tenant, "client", k.client,
		"slot", sess.Route.GetSlot(), "connection", sess.Route.GetConnection())
	// Should the gateway be alive after all (cut off from the log for a
	// while), it closes the connection, so that the client reconnects and
	// resumes instead of waiting on a connection its session left.
	kick := m.envelope(k, sess.Gateway, m.now())
	kick.Event = &eventspb.Envelope_Kick{Kick: &eventspb.Kick{
		Connection: sess.Route.GetConnection(),
		ReasonCode: uint32(packet.CodeUnspecifiedError),
	}}
	outs = append(outs, output{stage: stageTakeover, dest: toDeliveries, partition: sess.Route.GetSlot(), key: k.recordKey(), env: kick})
	outs, changed := m.disconnect(k, sess, &eventspb.Disconnect{
		Connection:  sess.Route.GetConnection(),
		Generation:  sess.Generation,
		ReasonCode:  uint32(packet.CodeUnspecifiedError),
		PublishWill: true,
	}, at, outs)
	// A gateway cut off from the log may still write the connection's
	// subscription changes (Session.RemoveEverywhere).
	sess.RemoveEverywhere = true
	return outs, changed
}

// command applies an operator's SessionCommand (command.go writes them):
// a kick closes the client's current connection with 0x98 Administrative
// Action, whose end the gateway then reports as any server-initiated
// close; a deletion also ends the session at once, as expiry does (its
// subscriptions leave the routers, its inbox is discarded, a pending will
// is published), so that the gateway's late Disconnect is stale. Either
// changes nothing for a client without a connection (a kick) or a session
// (a deletion).
//
// at is the command's time (its record's): the connection a deletion
// ends ends then.
func (m *machine) command(k clientKey, sess *Session, c *eventspb.SessionCommand, at time.Time, outs []output) ([]output, bool) {
	switch c.GetOp() {
	case eventspb.SessionCommand_OP_KICK:
		if !sess.Online {
			m.log.Info("kick of a client not connected ignored", "tenant", k.tenant, "client", k.client)
			return outs, false
		}
		m.log.Info("client kicked by an operator", "tenant", k.tenant, "client", k.client,
			"connection", sess.Route.GetConnection(), "reason", c.GetReason())
		return append(outs, m.kick(k, sess, packet.CodeAdministrativeAction)), false
	case eventspb.SessionCommand_OP_DELETE_SESSION:
		if !sess.Active {
			m.log.Info("deletion of no session ignored", "tenant", k.tenant, "client", k.client)
			return outs, false
		}
		m.log.Info("session deleted by an operator", "tenant", k.tenant, "client", k.client,
			"online", sess.Online, "inbox", len(sess.Inbox), "reason", c.GetReason())
		if sess.Online {
			outs = append(outs, m.kick(k, sess, packet.CodeAdministrativeAction))
			outs, _ = m.disconnect(k, sess, &eventspb.Disconnect{
				Connection:  sess.Route.GetConnection(),
				Generation:  sess.Generation,
				ReasonCode:  uint32(packet.CodeAdministrativeAction),
				PublishWill: true,
			}, at, outs)
		}
		if sess.Active { // a non-persistent session ended with its connection
			outs = m.endSession(k, sess, m.now(), outs)
		}
		return outs, true
	default:
		m.log.Warn("session command of unknown op ignored", "tenant", k.tenant, "client", k.client, "op", c.GetOp())
		return outs, false
	}
}

// kick is the Kick that closes sess's current connection with code.
func (m *machine) kick(k clientKey, sess *Session, code packet.ReasonCode) output {
	env := m.envelope(k, sess.Gateway, m.now())
	env.Event = &eventspb.Envelope_Kick{Kick: &eventspb.Kick{Connection: sess.Route.GetConnection(), ReasonCode: uint32(code)}}
	return output{stage: stageTakeover, dest: toDeliveries, partition: sess.Route.GetSlot(), key: k.recordKey(), env: env}
}

// subscriptions records a SUBSCRIBE or UNSUBSCRIBE of the client's current
// session (removals first, then additions). One of an earlier connection of
// the same session (a SUBSCRIBE that raced a resumption elsewhere) counts
// as the routers count it: per filter, the newer generation wins, so that
// the session's list and the routers' entries agree; one of a session
// that ended is ignored.
func (m *machine) subscriptions(k clientKey, sess *Session, ss *eventspb.SessionSubscriptions) bool {
	gen := ss.GetGeneration()
	began := sess.SessionGeneration
	if began == 0 {
		// A session stored before sessions knew their first generation:
		// only its current connection is known to be its own.
		began = sess.Generation
	}
	if !sess.Active || gen > sess.Generation || gen < began {
		m.log.Debug("stale session subscriptions ignored", "tenant", k.tenant, "client", k.client,
			"generation", gen, "current", sess.Generation)
		return false
	}
	for _, f := range ss.GetRemoved() {
		sess.removeSubscription(f, gen)
	}
	for _, sub := range ss.GetAdded() {
		if sub != nil {
			sub = sub.CloneVT()
			sub.Generation = gen
			sess.setSubscription(sub)
		}
	}
	return true
}

// endSession ends sess's session: its subscriptions leave every router
// shard (SubscriptionChange REMOVE_ALL of its generation to every partition
// of shoal.messages) and from the session.
func (m *machine) endSession(k clientKey, sess *Session, now time.Time, outs []output) []output {
	return m.endSessionIn(k, sess, now, nil, outs)
}

// endSessionIn is endSession for a session whose state with the routers
// is in the partitions of shoal.messages that parts lists alone (nil: in
// any of them). The REMOVE_ALL goes to those partitions only.
func (m *machine) endSessionIn(k clientKey, sess *Session, now time.Time, parts []int32, outs []output) []output {
	if !sess.WillDueAt.IsZero() && sess.Will != nil {
		// A delayed will is published when the session ends first.
		outs = m.publishWill(k, sess, now, outs)
	}
	sess.WillDueAt = time.Time{}
	outs = m.redispatchShared(k, sess, now, outs)
	env := m.envelope(k, sess.Gateway, now)
	env.Event = &eventspb.Envelope_SubscriptionChange{SubscriptionChange: &eventspb.SubscriptionChange{
		Op: eventspb.SubscriptionChange_OP_REMOVE_ALL,
		Route: &eventspb.Route{
			Slot: sess.Route.GetSlot(), Connection: sess.Route.GetConnection(), Generation: sess.Generation,
		},
	}}
	if parts == nil {
		// Every entry of the client leaves, those of a session taken over
		// too (their generations are older).
		sess.RemoveEverywhere = false
		sess.PendingRemoval = nil
	}
	outs = m.removeAll(k, env, parts, outs)
	sess.Active = false
	sess.Subscriptions = nil
	sess.Will = nil
	sess.Inbox = nil
	return outs
}

// removeAll appends the REMOVE_ALL env to the partitions parts of
// shoal.messages (nil: every partition).
func (m *machine) removeAll(k clientKey, env *eventspb.Envelope, parts []int32, outs []output) []output {
	key := k.recordKey()
	if parts == nil {
		for p := range m.messagesPartitions {
			// One envelope for every partition: outputs are never modified.
			outs = append(outs, output{stage: stageTakeover, dest: toMessages, partition: p, key: key, env: env})
		}
	}
	for _, p := range parts {
		outs = append(outs, output{stage: stageTakeover, dest: toMessages, partition: p, key: key, env: env})
	}
	return outs
}

// willDue reports whether a will whose connection just ended is published
// now: when it has no delay, or when its session ends with the connection
// (MQTT 5.0 §3.1.3.2.2: the will waits for the delay or the session's end,
// whichever comes first). Otherwise it is scheduled (Session.WillDueAt).
func willDue(w *eventspb.Will, sessionEnds bool) bool {
	return sessionEnds || w.GetDelayIntervalS() == 0
}

// publishWill publishes sess's will as a Publish on shoal.messages (key
// tenant/topic), on behalf of the connection that ended.
func (m *machine) publishWill(k clientKey, sess *Session, now time.Time, outs []output) []output {
	msg := sess.Will.GetMessage()
	if msg == nil {
		return outs
	}
	env := m.envelope(k, sess.Gateway, now)
	pub := msg.CloneVT()
	if sess.Will.ExpiryIntervalS != nil {
		// The will's expiry interval starts now (MQTT 5.0 §3.1.3.2.4).
		pub.HasExpiry = true
		pub.ExpiresAtMs = now.UnixMilli() + int64(sess.Will.GetExpiryIntervalS())*1000
	}
	env.Event = &eventspb.Envelope_Publish{Publish: &eventspb.Publish{
		Message:    pub,
		Connection: sess.Route.GetConnection(),
	}}
	env.MessageId = &eventspb.MessageID{GatewayEpoch: m.epoch, Seq: m.seq.Add(1)}
	return append(outs, output{stage: stageAnswer, dest: toMessages, partition: byKey, key: kafka.Key(k.tenant, msg.GetTopic()), env: env})
}

// presence is the client's Presence record for sess as it is now.
func (m *machine) presence(k clientKey, sess *Session, now time.Time) output {
	env := m.envelope(k, sess.Gateway, now)
	env.Event = &eventspb.Envelope_Presence{Presence: &eventspb.Presence{
		Online:            sess.Online,
		Route:             sess.Route.CloneVT(),
		Persistent:        sess.Persistent(),
		SessionGeneration: sess.SessionGeneration,
	}}
	return output{stage: stagePresence, dest: toPresence, partition: byKey, key: k.recordKey(), env: env}
}

// presenceGone is the tombstone of the client's Presence record: the
// routers forget the client, and compaction drops its presence.
func (m *machine) presenceGone(k clientKey) output {
	return output{stage: stagePresence, dest: toPresence, partition: byKey, key: k.recordKey()}
}

// connectResult accepts the connection on route.
func (m *machine) connectResult(k clientKey, gateway string, requestID uint64, route *eventspb.Route, now time.Time) output {
	env := m.envelope(k, gateway, now)
	env.Event = &eventspb.Envelope_ConnectResult{ConnectResult: &eventspb.ConnectResult{
		RequestId:  requestID,
		Connection: route.GetConnection(),
		Generation: route.GetGeneration(),
	}}
	return output{stage: stageAnswer, dest: toDeliveries, partition: route.GetSlot(), key: k.recordKey(), env: env}
}

// eventTime is the time of the event in env: its timestamp (the time of
// the record, on the log), so that what the session keeps of it
// (ConnectedAt, DisconnectedAt, WillDueAt) and what is decided from it
// (expired or not) are the same when the log is applied again, by a
// restart or by `shoal views rebuild`. The service's own clock is used
// only for an envelope without a timestamp.
func (m *machine) eventTime(env *eventspb.Envelope) time.Time {
	if us := env.GetTimestampUs(); us > 0 {
		return time.UnixMicro(us)
	}
	return m.now()
}

// envelope is an envelope about client k, without its event.
func (m *machine) envelope(k clientKey, gateway string, now time.Time) *eventspb.Envelope {
	return &eventspb.Envelope{
		Tenant:      k.tenant,
		ClientId:    k.client,
		Gateway:     gateway,
		TimestampUs: now.UnixMicro(),
	}
}
