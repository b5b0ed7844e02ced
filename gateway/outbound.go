package gateway

import (
	"context"
	"time"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/internal/obs"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
	"go.opentelemetry.io/otel/trace"
)

// Packet identifiers: the session service gives the messages of a
// persistent session's inbox identifiers up to kafka.MaxInboxPacketID
// (kept across connections); the gateway picks the others above it. A
// window of at most maxWindow messages in flight leaves the gateway a free
// one.
const maxWindow = 32767

// freshLocked reports whether a delivery made for src (a record of
// shoal.messages) is new to this connection, and records it: deliveries
// of one partition arrive in (offset, index) order, so one at or below the
// newest seen is a repeat (a router replaying the records after its stored
// offset when it takes a partition over). The index tells apart the
// deliveries of one record, which are not repeats of each other (a new
// subscription's retained messages of one shard). Holds c.mu.
func (c *conn) freshLocked(src *eventspb.Source) bool {
	p := int(src.GetPartition())
	if p < 0 || p > 1<<16 {
		return true
	}
	for len(c.seen) <= p {
		c.seen = append(c.seen, seenSource{offset: -1})
	}
	s := seenSource{offset: src.GetOffset(), index: src.GetIndex()}
	if last := c.seen[p]; s.offset < last.offset || (s.offset == last.offset && s.index <= last.index) {
		return false
	}
	c.seen[p] = s
	return true
}

// seenSource is the newest delivery a connection had from one partition
// of shoal.messages: the record's offset and the delivery's index among
// the record's deliveries (eventspb.Source).
type seenSource struct {
	offset int64
	index  uint32
}

// deliver sends one message to this connection per its delivery target;
// src, when not nil, is the record the router made the delivery for (a
// repeat of an older one is dropped). QoS 1 and 2 messages take a packet
// identifier while the client's receive maximum allows, and wait in a
// bounded queue otherwise. The connection is queued for a writer.
//
// It reports whether the connection still refers to m afterwards (a QoS 1
// or 2 message in flight or queued, a delivery held until CONNACK), so that
// the caller must not reuse it; t is never kept (what is needed of it is
// copied).
func (c *conn) deliver(src *eventspb.Source, mid messageID, m *eventspb.Message, t *eventspb.Target, now time.Time) (kept bool) {
	kept, flush, sent := c.deliverCounted(src, mid, m, t, now, nil, nil)
	if sent {
		c.add(MessagesSent, 1)
	}
	if flush {
		c.g.writes.push(c)
	}
	return kept
}

// deliverCounted is deliver for a fan-out: a QoS 0 message written is not
// counted in MessagesSent but reported (sent), and the connection is not
// queued for a writer, but flush reports that the caller must queue it
// (writeQueue.push), so that a fan-out counts once and queues all its
// connections at once.
//
// pc, when not nil, is the fan-out's PUBLISH cache: a QoS 0 message is
// encoded once for all the targets it can serve.
//
// span, when not nil, is the target's mqtt.deliver span: ended here unless
// a QoS 1/2 message goes in flight, whose acknowledgement ends it.
func (c *conn) deliverCounted(src *eventspb.Source, mid messageID, m *eventspb.Message, t *eventspb.Target, now time.Time, pc *publishCache, span trace.Span) (kept, flush, sent bool) {
	return c.deliverFrom(src, mid, m, t, now, pc, span, false)
}

// deliverFrom is deliverCounted; held says the delivery is one that came
// before the CONNACK, delivered by queueConnack, which goes before any
// delivery that arrives meanwhile.
func (c *conn) deliverFrom(src *eventspb.Source, mid messageID, m *eventspb.Message, t *eventspb.Target, now time.Time, pc *publishCache, span trace.Span, held bool) (kept, flush, sent bool) {
	qos := byte(min(t.Qos, 2))
	if c.perms != nil && !t.Release && !c.perms.AllowReadString(m.Topic) {
		// The ACL keeps it from this client (Mosquitto checks every
		// message it sends): dropped, and let go by the inbox.
		if t.InboxSeq != 0 {
			c.inboxAck(t.InboxSeq, false, nil)
		}
		c.add(ACLDenied, 1)
		endSpan(span, "refused by the acl")
		c.g.met.drops.Add(obs.DropACL, 1)
		return false, false, false
	}
	c.mu.Lock()
	if src != nil && !c.freshLocked(src) {
		c.mu.Unlock()
		endSpan(span, "repeat")
		return false, false, false // a router's repeat after it took the partition over
	}
	if m.HasExpiry && m.ExpiresAtMs <= now.UnixMilli() && !t.Release {
		c.mu.Unlock()
		endSpan(span, "expired")
		if t.InboxSeq != 0 {
			c.inboxAck(t.InboxSeq, false, nil) // expired: the inbox lets it go
		}
		c.g.met.drops.Add(obs.DropExpired, 1)
		return false, false, false
	}
	if c.closed {
		c.mu.Unlock()
		endSpan(span, "connection closed")
		if qos > 0 && t.InboxSeq == 0 {
			c.g.returnUndelivered(c.tenant, m, t) // the connection ended meanwhile
		}
		return false, false, false
	}
	c.useFlow()
	c.receiving = true
	if !c.ready || c.earlyDraining && !held {
		c.early = append(c.early, earlyDelivery{m: m, t: t.CloneVT(), mid: mid})
		c.mu.Unlock()
		endSpan(span, "") // delivered once the CONNACK is sent
		return true, false, false
	}
	if qos == 0 {
		if c.out.len() > c.g.cfg.MaxOutBuffer {
			c.mu.Unlock()
			c.drop(obs.DropBufferFull)
			endSpan(span, "output buffer full")
			return false, false, false
		}
		if pc != nil && len(t.SubscriptionIds) == 0 && (c.version != packet.V5 || c.clientAliasMax == 0) {
			sent = c.writeCached(pc, t.Retain)
		} else {
			sent = c.writePublish(m, 0, t.Retain, t.SubscriptionIds, 0, false, now)
		}
		flush = c.startFlushLocked()
		c.mu.Unlock()
		endSpan(span, "")
		return false, flush, sent
	}
	om := newOutMsg(m, t, mid)
	om.span = span
	if om.inboxSeq != 0 {
		// The session service forwards a connection its inbox entries in
		// sequence order; one at or below the newest seen is a repeat (the
		// service re-applies records after its stored offset when it
		// restarts or takes a partition over).
		if om.inboxSeq <= c.lastInboxSeq {
			c.mu.Unlock()
			endSpan(span, "repeat")
			c.logDebug(context.Background(), "repeated inbox message dropped", "seq", om.inboxSeq)
			return false, false, false
		}
		c.lastInboxSeq = om.inboxSeq
		if prev := c.inflight[om.id]; prev != nil {
			// Its identifier is still taken by an older entry (which the
			// session let go): the older one goes on.
			c.mu.Unlock()
			endSpan(span, "identifier in flight")
			c.logWarn(context.Background(), "inbox message with an identifier in flight", "packet", om.id,
				"seq", om.inboxSeq, "in_flight_seq", prev.inboxSeq)
			return false, false, false
		}
	}
	switch {
	case len(c.inflight) < int(c.clientRecvMax) && len(c.queue) == 0:
		c.sendInflight(om, now)
	case len(c.queue) < c.g.cfg.MaxQueued:
		c.queue = append(c.queue, om)
	default:
		// A client that does not acknowledge fast enough to keep its queue
		// bounded is disconnected with Quota exceeded rather than have
		// QoS 1/2 messages dropped behind its back.
		c.closed = true
		c.mu.Unlock()
		c.drop(obs.DropQueueFull)
		endSpan(span, "client queue full")
		go c.kick(packet.CodeQuotaExceeded) // logged by its end (queue_full)
		return false, false, false
	}
	flush = c.startFlushLocked()
	c.mu.Unlock()
	return true, flush, false
}

// sendInflight gives om a packet identifier (an inbox message has its
// own) and writes it, or writes PUBREL for a message PUBREC'd on an earlier
// connection. Holds c.mu.
func (c *conn) sendInflight(om *outMsg, now time.Time) {
	if c.inflight == nil {
		c.inflight = make(map[uint16]*outMsg)
	}
	if om.inboxSeq == 0 {
		for {
			c.nextID++
			if c.nextID <= kafka.MaxInboxPacketID {
				c.nextID = kafka.MaxInboxPacketID + 1
			}
			if _, used := c.inflight[c.nextID]; !used {
				break
			}
		}
		om.id = c.nextID
	} else if _, used := c.inflight[om.id]; used {
		// Taken meanwhile by the same entry forwarded twice: drop this one.
		return
	}
	c.sendSeq++
	om.seq = c.sendSeq
	c.inflight[om.id] = om
	if om.pubrecd {
		rel := packet.Ack{Kind: packet.PUBREL, PacketID: om.id}
		c.out.b = rel.Append(c.out.b, c.version)
		return
	}
	if c.writePublish(om.msg, om.qos, om.retain, om.subIDs, om.id, om.dup, now) {
		c.add(MessagesSent, 1)
	}
}

// pump moves queued messages into free inflight slots. Holds c.mu.
func (c *conn) pump(now time.Time) {
	n := 0
	for n < len(c.queue) && len(c.inflight) < int(c.clientRecvMax) {
		om := c.queue[n]
		n++
		if om.msg.HasExpiry && om.msg.ExpiresAtMs <= now.UnixMilli() && !om.pubrecd {
			if om.inboxSeq != 0 {
				c.pendingInboxAcks = append(c.pendingInboxAcks, inboxAck{seq: om.inboxSeq})
			}
			c.g.met.drops.Add(obs.DropExpired, 1)
			continue
		}
		c.sendInflight(om, now)
	}
	if n > 0 {
		clear(c.queue[:n])
		c.queue = c.queue[n:]
	}
}

// setPublishProps sets the 5.0 properties a PUBLISH carries from m: payload
// format, the expiry left at now, content type, response topic,
// correlation data and user properties. The byte slices alias m's strings.
func setPublishProps(pr *packet.Properties, m *eventspb.Message, now time.Time) {
	pr.Has = 0
	pr.User = pr.User[:0]
	pr.SubscriptionIDs = pr.SubscriptionIDs[:0]
	if m.PayloadUtf8 {
		pr.PayloadFormat = 1
		pr.Set(packet.PropPayloadFormat)
	}
	if m.HasExpiry {
		left := (m.ExpiresAtMs - now.UnixMilli() + 999) / 1000
		pr.MessageExpiry = uint32(max(left, 1))
		pr.Set(packet.PropMessageExpiry)
	}
	if m.ContentType != "" {
		pr.ContentType = stringBytes(m.ContentType)
		pr.Set(packet.PropContentType)
	}
	if m.ResponseTopic != "" {
		pr.ResponseTopic = stringBytes(m.ResponseTopic)
		pr.Set(packet.PropResponseTopic)
	}
	if m.CorrelationData != nil {
		pr.CorrelationData = m.CorrelationData
		pr.Set(packet.PropCorrelationData)
	}
	for _, u := range m.UserProperties {
		pr.User = append(pr.User, packet.UserProperty{Key: stringBytes(u.Key), Value: stringBytes(u.Value)})
	}
}

// writePublish encodes a PUBLISH into the out buffer; payloads from
// borrowThreshold bytes are written by reference. It reports whether it
// wrote the packet; the caller counts it (MessagesSent). Holds c.mu.
func (c *conn) writePublish(m *eventspb.Message, qos byte, retain bool, subIDs []uint32, id uint16, dup bool, now time.Time) bool {
	if c.scratch == nil {
		c.scratch = new(packet.Publish)
	}
	p := c.scratch
	*p = packet.Publish{Props: p.Props}
	p.Props.Has = 0
	p.Props.User = p.Props.User[:0]
	p.Props.SubscriptionIDs = p.Props.SubscriptionIDs[:0]
	p.QoS, p.Retain, p.PacketID, p.Dup = qos, retain, id, dup
	p.Topic = stringBytes(m.Topic)
	p.Payload = m.Payload
	if c.version == packet.V5 {
		pr := &p.Props
		setPublishProps(pr, m, now)
		pr.SubscriptionIDs = append(pr.SubscriptionIDs, subIDs...)
		if c.clientAliasMax > 0 {
			c.applyAlias(p)
		}
	}
	if uint32(p.Size(c.version)) > c.clientMaxPacket {
		// [MQTT-3.1.2-25]: never send a packet above the client's maximum.
		c.drop(obs.DropPacketTooLarge)
		if id != 0 {
			delete(c.inflight, id)
		}
		return false
	}
	if len(p.Payload) >= borrowThreshold {
		c.out.b = p.AppendHeader(c.out.b, c.version)
		c.out.borrow(p.Payload)
	} else {
		c.out.b = p.Append(c.out.b, c.version)
	}
	return true
}

// publishCache is a fan-out's QoS 0 PUBLISH, encoded once per protocol
// version and retain flag: for targets without subscription identifiers
// (and, in 5.0, without topic aliases) the packet's bytes are the same for
// every subscriber. A payload from borrowThreshold bytes is not copied: the
// cache holds the packet's header, and each connection borrows the
// payload. Slot consumer goroutine only.
type publishCache struct {
	m     *eventspb.Message
	now   time.Time
	enc   [2][2][]byte // [5.0][retain]: the packet, or its header
	done  [2][2]bool
	buf   []byte
	p     packet.Publish
	props bool // p.Props hold the message's 5.0 properties
}

// reset makes pc the cache of m, delivered at now.
func (pc *publishCache) reset(m *eventspb.Message, now time.Time) {
	pc.m, pc.now = m, now
	pc.done = [2][2]bool{}
	pc.enc = [2][2][]byte{}
	pc.buf = pc.buf[:0]
	pc.props = false
}

// get returns the encoding of the cached message for version, with retain.
func (pc *publishCache) get(version packet.Version, retain bool) []byte {
	v, r := 0, 0
	if version == packet.V5 {
		v = 1
	}
	if retain {
		r = 1
	}
	if pc.done[v][r] {
		return pc.enc[v][r]
	}
	m, p := pc.m, &pc.p
	if version == packet.V5 && !pc.props {
		*p = packet.Publish{Props: p.Props}
		setPublishProps(&p.Props, m, pc.now)
		pc.props = true
	}
	p.QoS, p.Retain, p.PacketID, p.Dup = 0, retain, 0, false
	p.Topic, p.Payload = stringBytes(m.Topic), m.Payload
	start := len(pc.buf)
	if len(m.Payload) >= borrowThreshold {
		pc.buf = p.AppendHeader(pc.buf, version)
	} else {
		pc.buf = p.Append(pc.buf, version)
	}
	// Earlier encodings stay valid if pc.buf grows: they keep the array
	// they were written into.
	pc.enc[v][r], pc.done[v][r] = pc.buf[start:len(pc.buf):len(pc.buf)], true
	return pc.enc[v][r]
}

// writeCached writes the fan-out's cached PUBLISH into the out buffer, as
// writePublish would encode it. Holds c.mu.
func (c *conn) writeCached(pc *publishCache, retain bool) bool {
	b := pc.get(c.version, retain)
	payload := pc.m.Payload
	borrowed := len(payload) >= borrowThreshold
	size := len(b)
	if borrowed {
		size += len(payload)
	}
	if uint32(size) > c.clientMaxPacket {
		c.drop(obs.DropPacketTooLarge) // [MQTT-3.1.2-25]
		return false
	}
	c.out.b = append(c.out.b, b...)
	if borrowed {
		c.out.borrow(payload)
	}
	return true
}

// applyAlias uses or assigns an outbound topic alias. Holds c.mu.
func (c *conn) applyAlias(p *packet.Publish) {
	if c.aliasOut == nil {
		c.aliasOut = make(map[string]uint16)
	}
	t := string(p.Topic)
	if a, ok := c.aliasOut[t]; ok {
		p.Props.TopicAlias = a
		p.Props.Set(packet.PropTopicAlias)
		p.Topic = nil
		return
	}
	if len(c.aliasOut) < int(c.clientAliasMax) {
		a := uint16(len(c.aliasOut) + 1)
		c.aliasOut[t] = a
		p.Props.TopicAlias = a
		p.Props.Set(packet.PropTopicAlias)
	}
}

// handleOutboundAck processes PUBACK, PUBREC and PUBCOMP from the client.
// Those of inbox messages are reported to the session service (InboxAck).
func (c *conn) handleOutboundAck(a *packet.Ack) {
	now := c.g.clock()
	c.mu.Lock()
	c.useFlow()
	om := c.inflight[a.PacketID]
	done := func() {
		delete(c.inflight, a.PacketID)
		if om.span != nil {
			if a.Code.IsError() {
				endSpan(om.span, "refused by the client: "+a.Code.String())
			} else {
				endSpan(om.span, "")
			}
			om.span = nil
		}
		switch {
		case om.inboxSeq != 0:
			c.pendingInboxAcks = append(c.pendingInboxAcks, inboxAck{seq: om.inboxSeq})
		case c.g.cfg.RecordAcks:
			c.pendingInboxAcks = append(c.pendingInboxAcks, inboxAck{mid: om.mid, packetID: a.PacketID, qos: om.qos, code: a.Code})
		}
	}
	switch a.Kind {
	case packet.PUBACK:
		if om != nil && om.qos == 1 {
			done()
		}
	case packet.PUBREC:
		switch {
		case om == nil || om.qos != 2:
			if c.version == packet.V5 {
				rel := packet.Ack{Kind: packet.PUBREL, PacketID: a.PacketID, Code: packet.CodePacketIdentifierNotFound}
				c.out.b = rel.Append(c.out.b, c.version)
			}
		case a.Code.IsError():
			done()
		case !om.pubrecd && om.inboxSeq != 0:
			// The PUBREL waits until the session has the PUBREC
			// (releaseWhenRecorded).
			om.pubrecd, om.relWait = true, true
			c.pendingInboxAcks = append(c.pendingInboxAcks, inboxAck{seq: om.inboxSeq, received: true, packetID: a.PacketID})
		case om.relWait: // a PUBREC again while the first is being written
		default:
			om.pubrecd = true
			rel := packet.Ack{Kind: packet.PUBREL, PacketID: a.PacketID}
			c.out.b = rel.Append(c.out.b, c.version)
		}
	case packet.PUBCOMP:
		if om != nil && om.qos == 2 && om.pubrecd {
			done()
		}
	}
	c.pump(now)
	acks := c.pendingInboxAcks
	c.pendingInboxAcks = nil
	c.mu.Unlock()
	for _, ia := range acks {
		switch {
		case ia.seq != 0 && ia.received:
			c.inboxAck(ia.seq, true, c.releaseWhenRecorded(ia.packetID, ia.seq))
		case ia.seq != 0:
			c.inboxAck(ia.seq, false, nil)
		default:
			c.deliveryAck(ia)
		}
	}
	c.kickFlush()
}

// inboxAck is an acknowledgement to report: of an inbox message (seq set),
// or for audit.record_acks of another delivery (DeliveryAck: mid,
// packetID, qos and the client's reason code).
type inboxAck struct {
	seq      uint64
	received bool
	mid      messageID
	packetID uint16
	qos      byte
	code     packet.ReasonCode
}

// deliveryAck writes the DeliveryAck of a (audit.record_acks), for shoal
// trace. A failed write is logged: it loses nothing but the record.
func (c *conn) deliveryAck(a inboxAck) {
	g := c.g
	env := c.envelope(c.g.clock())
	if a.mid != (messageID{}) {
		env.MessageId = &eventspb.MessageID{GatewayEpoch: a.mid.epoch, Seq: a.mid.seq}
	}
	da := &eventspb.DeliveryAck{PacketId: uint32(a.packetID), Qos: uint32(a.qos), Connection: c.id}
	if a.code.IsError() {
		da.ReasonCode = uint32(a.code)
	}
	env.Event = &eventspb.Envelope_DeliveryAck{DeliveryAck: da}
	rec := kafka.NewRecord(g.topics.Sessions.Name, c.clientRecordKey, kafka.PartitionByKey, env)
	c.writing.Add(1)
	g.producer(rec.Topic).Produce(context.Background(), rec, func(_ *kafka.Record, err error) {
		defer c.writing.Done()
		if err != nil {
			c.logWarn(context.Background(), "record delivery acknowledgement", "packet", a.packetID, "err", err)
		}
	})
}

// inboxAck reports the client's acknowledgement of inbox entry seq to the
// session service (InboxAck on shoal.sessions). The connection's end is
// reported only after these writes, so they precede it in the log. A
// failed write is logged: the session sends the message again on resume,
// which MQTT allows (with DUP, under the same packet identifier).
func (c *conn) inboxAck(seq uint64, received bool, then func(error)) {
	g := c.g
	env := c.envelope(c.g.clock())
	env.Event = &eventspb.Envelope_InboxAck{InboxAck: &eventspb.InboxAck{
		Seq: seq, Received: received, Generation: c.generation,
	}}
	rec := kafka.NewRecord(g.topics.Sessions.Name, c.clientRecordKey, kafka.PartitionByKey, env)
	c.writing.Add(1)
	g.producer(rec.Topic).Produce(context.Background(), rec, func(_ *kafka.Record, err error) {
		defer c.writing.Done()
		if err != nil {
			c.logWarn(context.Background(), "report inbox acknowledgement", "seq", seq, "err", err)
		}
		if then != nil {
			then(err)
		}
	})
}

// releaseWhenRecorded returns what follows the write of a PUBREC of inbox
// entry seq (packet identifier id): the PUBREL, once the session has the
// PUBREC. Sent before, a PUBREL could let the client complete the message
// (PUBCOMP, the identifier free again) while the session still holds it
// as unreceived: the client, gone from this connection, resumes its
// session on another gateway, whose Connect may reach the session service
// before this gateway's record, and gets the message again as a new one
// under the same identifier (MQTT-4.3.3-13; found by TestFaults/
// RollingRestart). Once the record is durable, a Connect of the client's
// written after the client read this PUBREL comes after it in the
// client's partition, and the session resends PUBREL, not PUBLISH. A
// failed write ends the connection: the client resumes and gets the
// PUBLISH again (DUP), which it acknowledges without delivering it twice.
func (c *conn) releaseWhenRecorded(id uint16, seq uint64) func(error) {
	return func(err error) {
		if err != nil {
			c.logClose(context.Background(), packet.CodeUnspecifiedError, causeLogWriteFailed, "packet", packet.PUBREC)
			go c.serverClose(packet.CodeUnspecifiedError)
			return
		}
		c.mu.Lock()
		var om *outMsg
		if c.flow != nil {
			om = c.inflight[id]
		}
		if om == nil || om.inboxSeq != seq || !om.relWait || c.closed {
			c.mu.Unlock()
			return
		}
		om.relWait = false
		c.useFlow()
		rel := packet.Ack{Kind: packet.PUBREL, PacketID: id}
		c.out.b = rel.Append(c.out.b, c.version)
		c.mu.Unlock()
		c.kickFlush()
	}
}
