package gateway

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/internal/mqtt/topic"
	"github.com/shoal-mqtt/shoal/internal/obs"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// handlePublish takes in a client's PUBLISH: it writes the message to the
// log and acknowledges QoS 1 and 2 only once the write is durable.
func (c *conn) handlePublish(h packet.FixedHeader, body []byte) error {
	g := c.g
	// Subscription changes read before this publish go to the log first
	// (order.go). A reader just woken lets the readers woken with it run
	// first while subscriptions move: they may hold a SUBSCRIBE that
	// arrived before this one.
	if c.woke && g.order.moving(g.clock().UnixNano()) {
		runtime.Gosched()
	}
	order := g.order.mark()
	p := c.decoders().publish()
	if err := p.Decode(h, body, c.version); err != nil {
		return err
	}
	c.add(MessagesReceived, 1)
	name, err := c.publishTopic(p)
	if err != nil {
		return err
	}
	if p.QoS > 0 {
		if _, dup := c.awaitingRel[p.PacketID]; dup && p.QoS == 2 {
			// A retransmission of a QoS 2 message we hold: acknowledge
			// again, do not publish again.
			c.queueAck(&pendingAck{kind: packet.PUBREC, id: p.PacketID})
			return nil
		}
		if c.inInflight.Add(1) > int32(g.cfg.ReceiveMaximum) {
			return closeWith(packet.CodeReceiveMaximumExceeded, "receive maximum exceeded")
		}
	}
	code := c.refusePublish(name, p)
	if code == 0 && c.perms != nil && !c.perms.AllowPublish(name) {
		code = packet.CodeNotAuthorized
		c.add(ACLDenied, 1)
		c.g.met.drops.Add(obs.DropACL, 1)
		if c.version != packet.V5 && g.auth.ACLDenyDisconnect {
			return closeWith(code, "publish refused by the acl")
		}
	}
	if code != 0 {
		if p.QoS == 0 {
			if code == packet.CodePayloadFormatInvalid {
				return closeWith(code, "payload is not valid UTF-8")
			}
			return nil // QoS 0 has no way to report a refusal
		}
		kind := packet.PUBACK
		if p.QoS == 2 {
			kind = packet.PUBREC
		}
		c.queueAck(&pendingAck{kind: kind, id: p.PacketID, code: code})
		return nil
	}

	rec, part, span := c.publishRecord(p, name)
	read := g.clock().UnixNano() // its PUBACK's latency counts from here (metrics.go)
	c.waitRoom(rec)
	g.order.wait(order)
	if p.QoS == 0 {
		if c.qos0Done == nil {
			c.qos0Done = c.qos0Produced
		}
		// Routed before it is produced when the router of the process
		// can (handoff.go); then it is the record of what was routed.
		expressed := false
		if g.express != nil && !p.Retain && span == nil {
			// Its subscribers' writes are this goroutine's (help).
			g.writes.willHelp()
			if expressed = g.express.Express(rec); expressed {
				rec.AddHeader(kafka.HeaderExpress, kafka.ExpressMark)
			}
			g.writes.help()
		}
		c.writing.Add(1)
		if expressed && g.background != nil {
			// Routed: its record is the log's copy, which nobody waits for.
			g.background.ProduceBackground(rec, c.qos0Done)
			return nil
		}
		g.eventLog.Produce(context.Background(), rec, c.qos0Done)
		return nil
	}
	ack := &pendingAck{kind: packet.PUBACK, id: p.PacketID, span: span, received: read}
	if p.QoS == 2 {
		ack.kind = packet.PUBREC
		if c.awaitingRel == nil {
			c.awaitingRel = make(map[uint16]int32)
		}
		c.awaitingRel[p.PacketID] = part
		if part >= 0 {
			c.routerParts.add(part) // the router keeps the identifier
		}
	}
	ack.remaining.Store(1)
	c.queueAck(ack)
	c.writing.Add(1)
	g.eventLog.Produce(context.Background(), rec, func(r *kafka.Record, err error) {
		c.ackDone(ack, err)
		g.recs.Put(r)
	})
	return nil
}

// publishTopic returns the topic name of a client's PUBLISH: its own, or
// in 5.0 the one its topic alias stands for (an alias sent with a name is
// set to it). A subscription identifier, or an alias above the maximum or
// never set, ends the connection.
func (c *conn) publishTopic(p *packet.Publish) ([]byte, error) {
	g := c.g
	name := p.Topic
	if c.version != packet.V5 {
		return name, nil
	}
	if p.Props.Present(packet.PropSubscriptionID) {
		return nil, closeWith(packet.CodeProtocolError, "subscription identifier in a PUBLISH from a client")
	}
	if p.Props.Present(packet.PropTopicAlias) {
		a := p.Props.TopicAlias
		if a > g.cfg.TopicAliasMaximum {
			return nil, closeWith(packet.CodeTopicAliasInvalid, "topic alias above the maximum")
		}
		if c.aliasIn == nil {
			c.aliasIn = make([]string, g.cfg.TopicAliasMaximum)
		}
		if len(name) == 0 {
			if c.aliasIn[a-1] == "" {
				return nil, closeWith(packet.CodeProtocolError, "unknown topic alias")
			}
			name = stringBytes(c.aliasIn[a-1])
		} else {
			c.aliasIn[a-1] = string(name)
		}
	}
	return name, nil
}

// publishRecord is the Publish record of p, whose topic is name. The event
// is built in pooled scratch structs and marshalled into a pooled record
// at once: nothing of it outlives this call but the record. part is the
// partition of shoal.messages the record goes to when the router keeps
// its packet identifier (a persistent session's QoS 2 message), else -1.
func (c *conn) publishRecord(p *packet.Publish, name []byte) (*kafka.Record, int32, trace.Span) {
	g := c.g
	now := g.clock()
	scratch := g.getScratch()
	m := &scratch.msg
	m.Topic = string(name)
	m.Payload = p.Payload
	m.Qos = uint32(p.QoS)
	m.Retain = p.Retain
	if c.version == packet.V5 {
		setMessageProps(m, &p.Props, now)
	}
	scratch.id.GatewayEpoch, scratch.id.Seq = g.epoch, g.seq.Add(1)
	scratch.pub.Connection = c.id
	scratch.env.Tenant, scratch.env.ClientId, scratch.env.Gateway = c.tenant, c.clientID, g.cfg.ID
	scratch.env.TimestampUs = now.UnixMicro()
	rec := g.recs.Get()
	// A persistent session's QoS 2 message carries its packet identifier:
	// the router keeps it until PUBREL and drops the message should the
	// client send it again after a reconnect (exactly once across
	// connections, router-svc/unreleased.go). So does a resumed session's,
	// whatever expiry this connection asked for: an earlier connection
	// may have left the identifier with the router, and a client that
	// resumes with a session expiry of 0 resends what it has no PUBREC for.
	kept := p.QoS == 2 && c.keepsPacketIDs()
	if kept {
		scratch.pub.PacketId, scratch.pub.SessionGeneration = uint32(p.PacketID), c.sessionGen
	}
	rec.Fill(g.topics.Messages.Name, nil, kafka.PartitionByKey, &scratch.env)
	rec.SetKey(c.tenant, m.Topic)
	part := int32(-1)
	if kept {
		part = kafka.PartitionForKey(rec.Key, g.msgParts)
	}
	// A trace per message, continuing the client's own when it sent one.
	var parent []byte
	for _, u := range m.UserProperties {
		if u.Key == kafka.HeaderTraceparent {
			parent = stringBytes(u.Value)
		}
	}
	rec.AddTraceChild(parent)
	var span trace.Span
	if g.tel.Tracing {
		rec.Context, span = c.publishSpan(p, name, parent, &scratch.id)
	}
	g.putScratch(scratch)
	return rec, part, span
}

// publishScratch is the Publish event built for a PUBLISH, pooled by the
// gateway (Gateway.getScratch) and reused from message to message.
type publishScratch struct {
	env eventspb.Envelope
	ev  eventspb.Envelope_Publish
	pub eventspb.Publish
	msg eventspb.Message
	id  eventspb.MessageID
}

// reset empties the scratch event and links its parts again.
func (s *publishScratch) reset() {
	s.msg.Reset()
	s.pub = eventspb.Publish{Message: &s.msg}
	s.ev.Publish = &s.pub
	s.id = eventspb.MessageID{}
	s.env = eventspb.Envelope{MessageId: &s.id, Event: &s.ev}
}

// getScratch returns an empty publishScratch.
func (g *Gateway) getScratch() *publishScratch {
	if scratch, ok := g.scratch.Get().(*publishScratch); ok {
		return scratch
	}
	scratch := new(publishScratch)
	scratch.reset()
	return scratch
}

// putScratch empties scratch, dropping its references to the read buffer
// and to strings, and gives it back.
func (g *Gateway) putScratch(scratch *publishScratch) {
	scratch.reset()
	g.scratch.Put(scratch)
}

// qos0Produced is the done callback of a QoS 0 publish's record (bound
// once per connection as c.qos0Done, so a publish allocates no closure).
func (c *conn) qos0Produced(r *kafka.Record, err error) {
	defer c.writing.Done()
	if err != nil {
		c.logError(context.Background(), "publish QoS 0", "err", err)
	}
	if r.Context != nil {
		span := trace.SpanFromContext(r.Context)
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
	c.g.recs.Put(r)
}

// refusePublish returns the reason a PUBLISH is refused, or 0.
func (c *conn) refusePublish(name []byte, p *packet.Publish) packet.ReasonCode {
	return c.refuseMessage(name, &p.Props, p.Payload)
}

// refuseMessage returns the reason a message to topic name is refused, or
// 0: a PUBLISH's, and a will's, which goes through exactly the same checks
// (so no client forges $SYS by its will).
func (c *conn) refuseMessage(name []byte, props *packet.Properties, payload []byte) packet.ReasonCode {
	if err := topic.ValidateName(string(name)); err != nil {
		return packet.CodeTopicNameInvalid
	}
	if len(name) > 0 && name[0] == '$' {
		s := string(name)
		if strings.HasPrefix(s, "$SYS") || strings.HasPrefix(s, "$share") {
			return packet.CodeNotAuthorized // reserved for the broker
		}
	}
	if c.version == packet.V5 && props.Present(packet.PropPayloadFormat) && props.PayloadFormat == 1 &&
		!validPayloadUTF8(payload) {
		return packet.CodePayloadFormatInvalid
	}
	return 0
}

// handlePubrel completes an incoming QoS 2 flow. When the routers keep
// the session's identifiers (keepsPacketIDs), PUBCOMP waits until the
// release is durable, so the client never reuses an identifier the router still
// holds. An identifier this connection does not know may have been
// received by an earlier connection of a resumed session, on another
// gateway: it is released in every partition. A connection may do that
// for at most receive_maximum identifiers (the most a client can have left
// unreleased on one earlier connection); beyond that an unknown identifier
// is answered 0x92 without a write, so PUBRELs of made-up identifiers
// cannot make a client's connection write a record to every partition
// each.
func (c *conn) handlePubrel(id uint16) error {
	ack := &pendingAck{kind: packet.PUBCOMP, id: id}
	part, ok := c.awaitingRel[id]
	switch {
	case ok:
		delete(c.awaitingRel, id)
		if part >= 0 {
			c.produceThenAck(ack, []*kafka.Record{c.releaseRecord(id, part)})
			return nil
		}
	case c.resumed && c.relBroadcasts < c.g.cfg.ReceiveMaximum:
		c.relBroadcasts++
		ack.uncounted = true
		recs := make([]*kafka.Record, 0, c.g.msgParts)
		for p := range c.g.msgParts {
			recs = append(recs, c.releaseRecord(id, p))
		}
		c.produceThenAck(ack, recs)
		return nil
	default:
		ack.code = packet.CodePacketIdentifierNotFound
	}
	c.queueAck(ack)
	return nil
}

// keepsPacketIDs reports whether the routers keep the packet identifiers
// of the session's QoS 2 messages until PUBREL: those of a persistent
// session, and of any resumed one, whose earlier connections may have
// left identifiers with them. The session's end forgets them.
func (c *conn) keepsPacketIDs() bool { return c.sessionExpiry != 0 || c.resumed }

// releaseRecord is the PublishRelease of packet identifier id for
// partition part of shoal.messages.
func (c *conn) releaseRecord(id uint16, part int32) *kafka.Record {
	env := c.envelope(c.g.clock())
	env.Event = &eventspb.Envelope_PublishRelease{PublishRelease: &eventspb.PublishRelease{
		PacketId: uint32(id), SessionGeneration: c.sessionGen,
	}}
	return kafka.NewRecord(c.g.topics.Messages.Name, c.clientRecordKey, part, env)
}

// handleSubscribe writes each subscription to the router's partitions and
// the session, and answers SUBACK once all are durable.
func (c *conn) handleSubscribe(h packet.FixedHeader, body []byte) error {
	g := c.g
	s := c.decoders().subscribe()
	if err := s.Decode(h, body, c.version); err != nil {
		return err
	}
	v5 := c.version == packet.V5
	var subID uint32
	if v5 && len(s.Props.SubscriptionIDs) > 0 {
		subID = s.Props.SubscriptionIDs[0]
	}
	ack := &pendingAck{kind: packet.SUBACK, id: s.PacketID, codes: make([]packet.ReasonCode, len(s.Filters))}
	var recs []*kafka.Record
	var added []*eventspb.SessionSubscription
	now := g.clock()
	for i, f := range s.Filters {
		filter := string(f.Filter)
		// ParseShared validates the filter, shared or not (an ordinary
		// one comes back unchanged as inner).
		group, inner, shared, err := topic.ParseShared(filter)
		if err != nil {
			ack.codes[i] = packet.CodeTopicFilterInvalid
			if !v5 {
				ack.codes[i] = packet.CodeUnspecifiedError
			}
			continue
		}
		if shared && f.NoLocal && v5 {
			return closeWith(packet.CodeProtocolError, "no local on a shared subscription")
		}
		if c.perms != nil && !c.perms.AllowSubscribeString(inner) {
			ack.codes[i] = packet.CodeNotAuthorized
			if !v5 {
				ack.codes[i] = packet.CodeUnspecifiedError // 0x80, 3.1.1's failure
			}
			c.add(ACLDenied, 1)
			continue
		}
		if c.subscriptionRefused(filter) { // the tenant's quota (quota.go)
			ack.codes[i] = packet.CodeQuotaExceeded
			continue
		}
		qos := min(f.QoS, 2)
		ack.codes[i] = packet.ReasonCode(qos)
		opts := &eventspb.SubscriptionOptions{
			Qos:               uint32(qos),
			NoLocal:           f.NoLocal,
			RetainAsPublished: f.RetainAsPublished,
			RetainHandling:    uint32(f.RetainHandling),
			SubscriptionId:    subID,
		}
		c.mu.Lock()
		if c.subs == nil {
			c.subs = make(map[string]*eventspb.SubscriptionOptions)
		}
		c.subs[filter] = opts
		c.mu.Unlock()
		added = append(added, &eventspb.SessionSubscription{Filter: filter, Options: opts})
		recs = c.appendChange(recs, now, &eventspb.SubscriptionChange{
			Op:         eventspb.SubscriptionChange_OP_ADD,
			Filter:     inner,
			ShareGroup: group,
			Options:    opts,
			Route:      &eventspb.Route{Slot: g.slot.Load(), Connection: c.id, Generation: c.generation},
		})
	}
	if len(added) > 0 {
		recs = append(recs, c.sessionRecord(now, &eventspb.SessionSubscriptions{Added: added, Generation: c.generation}))
	}
	c.produceThenAck(ack, recs)
	return nil
}

// handleUnsubscribe removes subscriptions and answers UNSUBACK once the
// removals are durable.
func (c *conn) handleUnsubscribe(h packet.FixedHeader, body []byte) error {
	g := c.g
	u := c.decoders().unsubscribe()
	if err := u.Decode(h, body, c.version); err != nil {
		return err
	}
	ack := &pendingAck{kind: packet.UNSUBACK, id: u.PacketID, codes: make([]packet.ReasonCode, len(u.Filters))}
	var recs []*kafka.Record
	var removed []string
	now := g.clock()
	for i, f := range u.Filters {
		filter := string(f)
		c.mu.Lock()
		_, had := c.subs[filter]
		delete(c.subs, filter)
		c.mu.Unlock()
		group, inner, _, err := topic.ParseShared(filter)
		switch {
		case err != nil:
			ack.codes[i] = packet.CodeTopicFilterInvalid
			continue
		case !had:
			ack.codes[i] = packet.CodeNoSubscriptionExisted
		}
		removed = append(removed, filter)
		recs = c.appendChange(recs, now, &eventspb.SubscriptionChange{
			Op:         eventspb.SubscriptionChange_OP_REMOVE,
			Filter:     inner,
			ShareGroup: group,
			Route:      &eventspb.Route{Slot: g.slot.Load(), Connection: c.id, Generation: c.generation},
		})
	}
	if len(removed) > 0 {
		recs = append(recs, c.sessionRecord(now, &eventspb.SessionSubscriptions{Removed: removed, Generation: c.generation}))
	}
	c.produceThenAck(ack, recs)
	return nil
}

// rebind writes a resume ADD for each subscription of a resumed session,
// with this connection's route, and waits until they are durable.
func (c *conn) rebind(ctx context.Context, subs []*eventspb.SessionSubscription) error {
	g := c.g
	now := g.clock()
	var recs []*kafka.Record
	for _, s := range subs {
		group, inner, _, err := topic.ParseShared(s.Filter)
		if err != nil {
			continue // never accepted, so never stored
		}
		recs = c.appendChange(recs, now, &eventspb.SubscriptionChange{
			Op:         eventspb.SubscriptionChange_OP_ADD,
			Filter:     inner,
			ShareGroup: group,
			Options:    s.Options,
			Route:      &eventspb.Route{Slot: g.slot.Load(), Connection: c.id, Generation: c.generation},
			Resume:     true,
		})
	}
	tctx, cancel := context.WithTimeout(ctx, g.cfg.SessionTimeout)
	defer cancel()
	return g.produceSync(tctx, recs...)
}

// appendChange appends the records of one subscription change: to the
// partition of its topic for a filter without wildcards, to every
// partition for a filter with wildcards (docs/router.md, "One shard per
// partition").
func (c *conn) appendChange(recs []*kafka.Record, now interface{ UnixMicro() int64 }, ch *eventspb.SubscriptionChange) []*kafka.Record {
	g := c.g
	if ch.Op == eventspb.SubscriptionChange_OP_ADD {
		// The router learns from it where the session's QoS 1/2 messages
		// go before the session's presence reaches it.
		ch.PersistentSession = c.sessionExpiry > 0
		// An entry older than the session is an ended session's, whose
		// removal may still be to come (after a takeover): the router
		// takes this ADD for a new subscription.
		ch.SessionGeneration = c.sessionGen
	}
	env := c.envelope(now)
	env.Event = &eventspb.Envelope_SubscriptionChange{SubscriptionChange: ch}
	key := kafka.Key(c.tenant, ch.Filter)
	if !strings.ContainsAny(ch.Filter, "+#") {
		part := kafka.PartitionForKey(key, g.msgParts)
		c.routerParts.add(part)
		return append(recs, kafka.NewRecord(g.topics.Messages.Name, key, part, env))
	}
	c.routerParts.addAll(g.msgParts)
	for p := int32(0); p < g.msgParts; p++ {
		recs = append(recs, kafka.NewRecord(g.topics.Messages.Name, key, p, env))
	}
	return recs
}

func (c *conn) sessionRecord(now interface{ UnixMicro() int64 }, s *eventspb.SessionSubscriptions) *kafka.Record {
	env := c.envelope(now)
	env.Event = &eventspb.Envelope_SessionSubscriptions{SessionSubscriptions: s}
	return kafka.NewRecord(c.g.topics.Sessions.Name, c.clientRecordKey, kafka.PartitionByKey, env)
}

// produceThenAck queues ack and produces recs; ack is sent once all are
// durable.
func (c *conn) produceThenAck(ack *pendingAck, recs []*kafka.Record) {
	ack.remaining.Store(int32(len(recs)))
	c.queueAck(ack)
	c.writing.Add(len(recs))
	for _, r := range recs {
		c.g.producer(r.Topic).Produce(context.Background(), r, func(_ *kafka.Record, err error) { c.ackDone(ack, err) })
	}
}

// queueAck appends ack to the ordered acknowledgements; one that waits for
// nothing is ready at once.
func (c *conn) queueAck(ack *pendingAck) {
	c.mu.Lock()
	c.useFlow()
	if ack.remaining.Load() == 0 {
		ack.ready = true
	}
	c.acks = append(c.acks, ack)
	c.sendReadyAcks()
	c.mu.Unlock()
	c.kickFlush()
}

// ackDone records that one record ack waits for was written (or failed).
func (c *conn) ackDone(ack *pendingAck, err error) {
	defer c.writing.Done()
	if err != nil {
		c.mu.Lock()
		ack.failed = true
		ack.tooLarge = ack.tooLarge || kafka.IsTooLarge(err)
		c.mu.Unlock()
	}
	if ack.remaining.Add(-1) > 0 {
		return
	}
	c.mu.Lock()
	ack.ready = true
	c.sendReadyAcks()
	c.mu.Unlock()
	c.kickFlush()
}

// sendReadyAcks encodes the ready acknowledgements at the head of the
// queue, in order. A failed write closes the connection without its
// acknowledgement, so the client sends the message again; a 5.0 client is
// told why by a DISCONNECT: 0x95 (packet too large) when the log refused a
// record as larger than it accepts, else 0x80. Holds c.mu.
func (c *conn) sendReadyAcks() {
	if c.flow == nil {
		return
	}
	n := 0
	for _, ack := range c.acks {
		if !ack.ready {
			break
		}
		n++
		if ack.failed {
			endSpan(ack.span, "log write failed")
			code := packet.CodeUnspecifiedError
			if ack.tooLarge {
				code = packet.CodePacketTooLarge
			}
			c.logClose(context.Background(), code, causeLogWriteFailed, "packet", ack.kind)
			go c.serverClose(code)
			continue
		}
		endSpan(ack.span, "")
		switch ack.kind {
		case packet.PUBACK, packet.PUBREC, packet.PUBCOMP:
			a := packet.Ack{Kind: ack.kind, PacketID: ack.id, Code: ack.code}
			c.out.b = a.Append(c.out.b, c.version)
			c.g.met.acked(ack, c.g.clock)
			// The client's flow ends with PUBACK, with a refusing PUBREC,
			// or with PUBCOMP for an identifier we held.
			if ack.kind == packet.PUBACK || (ack.kind == packet.PUBREC && ack.code.IsError()) ||
				(ack.kind == packet.PUBCOMP && !ack.code.IsError() && !ack.uncounted) {
				c.inInflight.Add(-1)
			}
		case packet.SUBACK:
			s := packet.Suback{PacketID: ack.id, Codes: ack.codes}
			c.out.b = s.Append(c.out.b, c.version)
		case packet.UNSUBACK:
			u := packet.Unsuback{PacketID: ack.id, Codes: ack.codes}
			c.out.b = u.Append(c.out.b, c.version)
		}
	}
	if n > 0 {
		clear(c.acks[:n])
		c.acks = c.acks[n:]
	}
}

// setMessageProps copies the pass-through properties of a PUBLISH or will.
func setMessageProps(m *eventspb.Message, p *packet.Properties, now time.Time) {
	m.PayloadUtf8 = p.Present(packet.PropPayloadFormat) && p.PayloadFormat == 1
	if p.Present(packet.PropMessageExpiry) {
		m.HasExpiry = true
		m.ExpiresAtMs = now.UnixMilli() + int64(p.MessageExpiry)*1000
	}
	if p.Present(packet.PropContentType) {
		m.ContentType = string(p.ContentType)
	}
	if p.Present(packet.PropResponseTopic) {
		m.ResponseTopic = string(p.ResponseTopic)
	}
	if p.Present(packet.PropCorrelationData) {
		m.CorrelationData = append([]byte(nil), p.CorrelationData...)
	}
	if len(p.User) > 0 {
		m.UserProperties = make([]*eventspb.UserProperty, len(p.User))
		for i, u := range p.User {
			m.UserProperties[i] = &eventspb.UserProperty{Key: string(u.Key), Value: string(u.Value)}
		}
	}
}

// roomPoll is how often the reader at the head of a partition's queue
// (waitRoom) looks again for room, and roomWaitMax the longest a reader
// is held for one PUBLISH: a router that has not moved for that long is
// stuck, and holding the client longer would only hide it.
const (
	roomPoll    = 200 * time.Microsecond
	roomWaitMax = 10 * time.Second
)

// roomGate queues the readers held for room on one partition of
// shoal.messages (waitRoom).
type roomGate struct {
	mu      sync.Mutex   // held by the queue's head while it waits for room
	waiting atomic.Int32 // readers queued or at the head
}

// waitRoom holds the reader, before it writes rec, a PUBLISH's record,
// while the router of the process (shoal all) is more than
// kafka.FeedMaxBacklog of this process's records behind on rec's
// partition of shoal.messages. The client is then not read, so TCP slows
// it to the pace at which the router routes. Without it a client
// publishing QoS 0 as fast as its socket takes bytes was read at half a
// million messages a second, the router's backlog outgrew the embedded
// log's size bound within seconds, and retention deleted records the
// router had not read: other clients' acknowledged QoS 1 messages and
// subscription changes among them.
//
// Held readers queue, one queue per partition, and go one PUBLISH each in
// turn (the gate's mutex, which hands itself over in order once its
// waiters have waited a millisecond): a reader that just went and has
// another PUBLISH queues behind the others, so a flooding client slows
// the other publishers of its partitions to the router's pace shared out
// by connection, not to what it leaves them. While anyone is queued a
// newcomer queues too. The wait ends early when the connection is being
// closed by the server. Distributed gateways never wait here: their log
// is Kafka, whose retention is time-based by default, and its consumer
// lag is reported.
func (c *conn) waitRoom(rec *kafka.Record) {
	g := c.g
	if g.room == nil {
		return
	}
	part := kafka.PartitionForKey(rec.Key, g.msgParts)
	gate := &g.roomGates[part]
	if gate.waiting.Load() == 0 && g.room.Room(g.topics.Messages.Name, part) {
		return
	}
	began := time.Now()
	gate.waiting.Add(1)
	gate.mu.Lock()
	var t *time.Timer
	for !g.room.Room(g.topics.Messages.Name, part) && !c.closing.Load() && time.Since(began) < roomWaitMax {
		if t == nil {
			t = time.NewTimer(roomPoll)
		} else {
			t.Reset(roomPoll)
		}
		<-t.C
	}
	gate.mu.Unlock()
	gate.waiting.Add(-1)
	g.met.held.Add(context.Background(), time.Since(began).Seconds())
}
