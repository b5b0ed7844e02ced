package sessionsvc

import (
	"slices"
	"time"

	"github.com/shoal-mqtt/shoal/internal/obs"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// replayInbox sends a resumed session's inbox after the answer, dropping
// the messages that expired by at (the Connect's time); now stamps the
// outputs.
func (m *machine) replayInbox(k clientKey, sess *Session, at, now time.Time, outs []output) []output {
	// The inbox follows the answer on the same slot, oldest first:
	// messages queued while the session was offline, and those sent
	// before and not acknowledged (again, with DUP and their packet
	// identifiers; PUBREL for a QoS 2 message PUBREC'd before).
	kept := sess.Inbox[:0]
	for _, e := range sess.Inbox {
		if msg := e.GetMessage(); !e.Received && msg.GetHasExpiry() && msg.GetExpiresAtMs() <= at.UnixMilli() {
			m.drops.Add(obs.DropExpired, 1)
			continue
		}
		dup := e.Sent
		e.Sent = true
		outs = append(outs, m.forward(k, sess, e, dup, now))
		kept = append(kept, e)
	}
	clear(sess.Inbox[len(kept):])
	sess.Inbox = kept
	return outs
}

// inboxDropLogEvery is how many drops of one session's full inbox a
// warning stands for.
const inboxDropLogEvery = 1000

// inbox takes a QoS 1/2 message for the client. A persistent session keeps
// it in its inbox (up to maxInbox) until the client acknowledges it, and
// forwards it at once while the client is online; a connection without a
// persistent session gets it without tracking; without a session it is
// dropped.
func (m *machine) inbox(k clientKey, sess *Session, ia *eventspb.InboxAppend, id *eventspb.MessageID, outs []output) ([]output, bool) {
	now := m.now()
	switch {
	case !sess.Active || ia.GetMessage() == nil:
		return outs, false
	case !sess.Persistent():
		if sess.Online {
			e := &eventspb.InboxAppend{Message: ia.GetMessage(), Target: ia.GetTarget(), MessageId: id}
			return append(outs, published(m.forward(k, sess, e, ia.GetTarget().GetDup(), now), ia)), false
		}
		return outs, false
	case ia.GetSource() != nil && !sess.noteSource(ia.GetSource()):
		m.log.Debug("repeated inbox append dropped", "tenant", k.tenant, "client", k.client,
			"partition", ia.GetSource().GetPartition(), "offset", ia.GetSource().GetOffset())
		return outs, false
	case len(sess.Inbox) >= m.maxInbox:
		// Logged at the first drop and every inboxDropLogEvery-th after
		// it: under a sustained overload a line per message flooded the
		// log (715,000 lines in 10 s of a benchmark); the counter and
		// the metric have every one.
		if sess.InboxDropped%inboxDropLogEvery == 0 {
			m.log.Warn("inbox full; message dropped", "tenant", k.tenant, "client", k.client,
				"max_inbox", m.maxInbox, "topic", ia.GetMessage().GetTopic(), "dropped_since_connect", sess.InboxDropped+1)
		}
		if m.inboxDropped != nil {
			m.inboxDropped.Add(1)
		}
		m.drops.Add(obs.DropInboxFull, 1)
		sess.InboxDropped++
		return outs, true
	}
	e := &eventspb.InboxAppend{Message: ia.GetMessage().CloneVT(), Target: ia.GetTarget().CloneVT(), MessageId: id.CloneVT()}
	sess.InboxSeq++
	e.Seq = sess.InboxSeq
	e.PacketId = uint32(nextPacketID(sess))
	sess.Inbox = append(sess.Inbox, e)
	if sess.Online {
		e.Sent = true
		outs = append(outs, published(m.forward(k, sess, e, e.GetTarget().GetDup(), now), ia))
	}
	return outs, true
}

// nextPacketID picks the packet identifier of a new inbox entry: the one
// after the last given, skipping those of the entries still kept. The
// caller ensures len(sess.Inbox) < kafka.MaxInboxPacketID, so one is free.
func nextPacketID(sess *Session) uint16 {
	id := sess.LastPacketID
	for {
		id++
		if id > kafka.MaxInboxPacketID || id == 0 {
			id = 1
		}
		if !slices.ContainsFunc(sess.Inbox, func(e *eventspb.InboxAppend) bool { return e.GetPacketId() == uint32(id) }) {
			sess.LastPacketID = id
			return id
		}
	}
}

// ack applies the client's acknowledgement of an inbox entry: PUBACK and
// PUBCOMP end it, PUBREC marks a QoS 2 entry received. Entries are matched
// by sequence number, which no other entry of the client ever had, so an
// acknowledgement that arrives late (from a connection taken over, or
// after the session ended) changes nothing it should not.
func (m *machine) ack(k clientKey, sess *Session, a *eventspb.InboxAck) bool {
	i := slices.IndexFunc(sess.Inbox, func(e *eventspb.InboxAppend) bool { return e.GetSeq() == a.GetSeq() })
	if i < 0 {
		m.log.Debug("acknowledgement of no inbox entry", "tenant", k.tenant, "client", k.client, "seq", a.GetSeq())
		return false
	}
	if e := sess.Inbox[i]; a.GetReceived() {
		if e.GetTarget().GetQos() != 2 || e.Received {
			return false
		}
		e.Received = true
		return true
	}
	sess.Inbox = slices.Delete(sess.Inbox, i, i+1)
	return true
}

// forward delivers inbox entry e to the client's current connection; dup
// marks a resend. An entry kept in the inbox (Seq set) carries its packet
// identifier and sequence number, so the gateway uses that identifier and
// reports the acknowledgement.
func (m *machine) forward(k clientKey, sess *Session, e *eventspb.InboxAppend, dup bool, now time.Time) output {
	t := e.GetTarget().CloneVT()
	if t == nil {
		t = &eventspb.Target{Qos: e.GetMessage().GetQos()}
	}
	t.ClientId, t.Connection = k.client, sess.Route.GetConnection()
	t.Dup = dup
	if e.GetSeq() != 0 {
		t.PacketId, t.InboxSeq, t.Release = e.GetPacketId(), e.GetSeq(), e.GetReceived()
	}
	env := m.envelope(k, sess.Gateway, now)
	env.MessageId = e.GetMessageId()
	env.Event = &eventspb.Envelope_Delivery{Delivery: &eventspb.Delivery{Message: e.GetMessage(), Targets: []*eventspb.Target{t}}}
	return output{stage: stageAnswer, dest: toDeliveries, partition: sess.Route.GetSlot(), key: k.recordKey(), env: env}
}

// published gives the delivery o of an inbox message forwarded as it
// arrived the publish time ia carries (Delivery.published_us: the gateway
// measures publish → delivery latency from it).
func published(o output, ia *eventspb.InboxAppend) output {
	o.env.GetDelivery().PublishedUs = ia.GetPublishedUs()
	return o
}

// redispatchShared hands the inbox entries that a shared subscription
// chose for this client, and that it has not received, back to their
// group (SharedRedispatch to the shard of the message's topic, which picks
// another member): the client's connection ended.
func (m *machine) redispatchShared(k clientKey, sess *Session, now time.Time, outs []output) []output {
	kept := sess.Inbox[:0]
	for _, e := range sess.Inbox {
		t := e.GetTarget()
		if t.GetShareGroup() == "" || e.Received {
			kept = append(kept, e)
			continue
		}
		msg := e.GetMessage()
		env := m.envelope(k, sess.Gateway, now)
		env.ClientId = ""
		env.Event = &eventspb.Envelope_SharedRedispatch{SharedRedispatch: &eventspb.SharedRedispatch{
			Message: msg, ShareGroup: t.GetShareGroup(), Filter: t.GetShareFilter(), ExcludeClient: k.client,
		}}
		outs = append(outs, output{stage: stageAnswer, dest: toMessages, partition: byKey, key: kafka.Key(k.tenant, msg.GetTopic()), env: env})
	}
	clear(sess.Inbox[len(kept):])
	sess.Inbox = kept
	return outs
}
