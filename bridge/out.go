package bridge

import (
	"context"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// InClientPrefix begins the client id of the messages an in mapping
// publishes: "$bridge/" and the mapping's name (no MQTT client can take
// it: a client id of a tenant has the tenant's prefix).
const InClientPrefix = "$bridge/"

// outState is the out direction's handler state.
type outState struct {
	// parts holds the kept identifiers of each partition assigned, loaded
	// at its first poll (state.go); nil until then.
	parts map[int32]partState
	// pending says that a poll's changes to parts are not known to have
	// committed: if the next poll finds it set, the poll before aborted,
	// and every partition's state is read again.
	pending bool

	// dec decodes the records of shoal.messages into structs it reuses;
	// env is the envelope of the record being handled.
	dec     kafka.PublishDecoder
	env     *eventspb.Envelope
	matches []*Out
	// names are the Kafka topic names rendered so far, each valid, by
	// their own bytes: a record's topic name is then looked up rather
	// than made (at most namesKept; emptied when full).
	names map[string]string
	buf   []byte
	tally tally
	// hdrs is reused for each record's headers (Tx.Produce copies them);
	// arena holds the bytes of the records' keys and header values, which
	// must never change (a record can outlive its transaction in the
	// local feed): only appended to (an append that moves it leaves what
	// records alias in the old array), a new chunk when short: one
	// allocation for many records.
	hdrs  []kafka.Header
	arena []byte

	// revoked are the partitions taken away since the last poll, whose
	// state the next poll drops: the group's callbacks may run while a
	// poll is handled.
	revokedMu sync.Mutex
	revoked   []int32
}

func (s *outState) init() {
	s.parts, s.tally, s.names = make(map[int32]partState), tally{}, make(map[string]string)
}

// namesKept bounds outState.names: a template of {topic} or {client_id}
// renders as many names as there are topics or clients.
const namesKept = 4096

// assigned and revoked follow the out group's partitions: a partition's
// state is read at its first poll and dropped when it goes.
func (b *Bridge) assigned(context.Context, []int32) {}

func (b *Bridge) revoked(_ context.Context, parts []int32) {
	s := &b.out
	s.revokedMu.Lock()
	s.revoked = append(s.revoked, parts...)
	s.revokedMu.Unlock()
}

// handleOut bridges one poll of shoal.messages: each Publish of a tenant and
// topic an out mapping takes becomes one record per mapping, in the poll's
// transaction.
func (b *Bridge) handleOut(ctx context.Context, bs []kafka.Batch, tx *kafka.Tx) error {
	s := &b.out
	s.revokedMu.Lock()
	for _, p := range s.revoked {
		delete(s.parts, p)
	}
	s.revoked = s.revoked[:0]
	s.revokedMu.Unlock()
	if s.pending {
		clear(s.parts) // the last poll aborted: its changes are not in the log
	}
	s.pending = true
	tx.AfterCommit(func() { s.pending = false })
	m := b.mappings.Load()
	now := b.clock()
	defer b.met.flush(ctx, "out", s.tally)
	for _, batch := range bs {
		st := s.parts[batch.Partition]
		if st == nil {
			var err error
			if st, err = b.loadState(ctx, batch.Partition); err != nil {
				// Tried again with the poll, after a backoff: a Kafka
				// that does not answer now may later.
				tx.Fail(err)
				return nil
			}
			s.parts[batch.Partition] = st
		}
		for _, r := range batch.Records {
			env, err := s.dec.Decode(r)
			if err != nil {
				b.met.failed(ctx, "", causeDecode)
				b.log.Warn("record of shoal.messages that does not decode; skipped", "partition", r.Partition, "offset", r.Offset, "err", err)
				continue
			}
			s.env = env
			switch ev := env.Event.(type) {
			case *eventspb.Envelope_Publish:
				b.bridgeOut(ctx, m, st, r, ev.Publish, tx, now)
			case *eventspb.Envelope_PublishRelease:
				b.release(st, batch.Partition, ev.PublishRelease, tx)
			case *eventspb.Envelope_SubscriptionChange:
				if ev.SubscriptionChange.GetOp() == eventspb.SubscriptionChange_OP_REMOVE_ALL {
					b.endSession(st, batch.Partition, ev.SubscriptionChange.GetRoute().GetGeneration(), tx)
				}
			}
		}
	}
	return nil
}

// bridgeOut writes the message of pub to every out mapping that takes it.
func (b *Bridge) bridgeOut(ctx context.Context, m *Mappings, st partState, r *kafka.Record, pub *eventspb.Publish, tx *kafka.Tx, now time.Time) {
	s := &b.out
	env, msg := s.env, pub.GetMessage()
	if msg == nil {
		return
	}
	s.matches = m.MatchOut(env.Tenant, msg.Topic, s.matches[:0])
	if len(s.matches) == 0 {
		return
	}
	if !b.receive(st, r.Partition, env, pub, tx) {
		for _, o := range s.matches {
			b.met.skipped(ctx, o.Name, causeRepeat)
		}
		return
	}
	origin := Origin{Tenant: env.Tenant, ClientID: env.ClientId, MessageID: env.MessageId, Traceparent: r.Header(kafka.HeaderTraceparent)}
	for _, o := range s.matches {
		s.buf = o.KafkaTopic.Append(s.buf[:0], env.Tenant, msg.Topic, env.ClientId)
		name, ok := s.names[string(s.buf)]
		if !ok {
			if err := ValidKafkaTopic(string(s.buf)); err != nil {
				b.met.skipped(ctx, o.Name, causeBadTopic)
				b.warnEvery(o.Name, "out mapping rendered no valid kafka topic; message not bridged", "mapping", o.Name,
					"mqtt_topic", msg.Topic, "kafka_topic", string(s.buf), "err", err)
				continue
			}
			if len(s.names) >= namesKept {
				clear(s.names)
			}
			name = string(s.buf)
			s.names[name] = name
		}
		// No loop: what an in mapping published never goes back to the
		// topic it came from (Validate refuses such mappings; a reload
		// that made one is caught here).
		if in, ok := strings.CutPrefix(env.ClientId, InClientPrefix); ok {
			if im := m.inByName(in); im != nil && im.KafkaTopic == name {
				b.met.skipped(ctx, o.Name, causeLoop)
				continue
			}
		}
		if err := b.ensure(ctx, name); err != nil {
			// Written in a later poll, once the topic can be made: the
			// transaction aborts and the poll is read again.
			b.met.failed(ctx, o.Name, causeCreateTopic)
			tx.Fail(err)
			return
		}
		out := kafka.Record{Topic: name, Value: msg.Payload, Timestamp: time.UnixMicro(env.TimestampUs)}
		if !o.Key.IsZero() {
			s.roomFor(len(env.Tenant) + 2*len(msg.Topic) + len(env.ClientId) + 64)
			from := len(s.arena)
			s.arena = o.Key.Append(s.arena, env.Tenant, msg.Topic, env.ClientId)
			out.Key = s.arena[from:len(s.arena):len(s.arena)]
		}
		hop := origin
		span, tp := b.hopSpan(ctx, spanOut, origin.Traceparent, r, o.Name, nil)
		if span != nil {
			hop.Traceparent = tp
		}
		s.roomFor(headersRoom(msg, env.ClientId))
		s.hdrs, s.arena = AppendHeaders(s.hdrs[:0], s.arena, msg, hop, now)
		out.Headers = s.hdrs
		tx.Produce(&out)
		s.tally.add(o.Name, len(msg.Payload))
		if span != nil {
			span.SetAttributes(attribute.String("shoal.bridge.kafka_topic", name), attribute.String("mqtt.topic", msg.Topic))
			span.End()
		}
	}
}

// receive takes in the packet identifier of a QoS 2 Publish of a
// persistent session and reports whether the message is new, rather than
// a repeat of one bridged for the same session; it keeps the identifier of
// a new one (router-svc's receive, for the bridge).
func (b *Bridge) receive(st partState, part int32, env *eventspb.Envelope, pub *eventspb.Publish, tx *kafka.Tx) bool {
	if pub.PacketId == 0 || pub.PacketId > 0xFFFF || env.ClientId == "" {
		return true
	}
	c, id, gen := clientKey{tenant: env.Tenant, client: env.ClientId}, uint16(pub.PacketId), pub.SessionGeneration
	if kept, ok := st[c][id]; ok {
		switch {
		case kept == gen:
			return false
		case kept > gen:
			return true // a late message of an earlier session: not the newer one's to keep
		}
	}
	ids := st[c]
	if ids == nil {
		c = clientKey{tenant: strings.Clone(c.tenant), client: strings.Clone(c.client)}
		ids = make(map[uint16]uint64)
		st[c] = ids
	}
	ids[id] = gen
	tx.Produce(b.stateRecord(part, c, id, gen, false))
	return true
}

// release forgets a packet identifier its client released (PUBREL), when
// it was kept for that session or an earlier one.
func (b *Bridge) release(st partState, part int32, rel *eventspb.PublishRelease, tx *kafka.Tx) {
	env := b.out.env
	c, id := clientKey{tenant: env.Tenant, client: env.ClientId}, uint16(rel.GetPacketId())
	ids := st[c]
	if kept, ok := ids[id]; ok && kept <= rel.GetSessionGeneration() {
		st.forget(c, id)
		tx.Produce(b.stateRecord(part, c, id, 0, true))
	}
}

// endSession forgets every identifier of the envelope's client kept for a
// session that began at or before gen (the session ended: REMOVE_ALL).
func (b *Bridge) endSession(st partState, part int32, gen uint64, tx *kafka.Tx) {
	env := b.out.env
	c := clientKey{tenant: env.Tenant, client: env.ClientId}
	for id, kept := range st[c] {
		if kept <= gen {
			st.forget(c, id)
			tx.Produce(b.stateRecord(part, c, id, 0, true))
		}
	}
}

// arenaChunk is the least the arena grows by.
const arenaChunk = 64 << 10

// roomFor makes room for n more bytes in the arena: a new chunk when the
// current one is short, rather than a copy of it.
func (s *outState) roomFor(n int) {
	if cap(s.arena)-len(s.arena) >= n {
		return
	}
	s.arena = make([]byte, 0, max(arenaChunk, n))
}

// headersRoom is about what AppendHeaders writes for m of clientID (the
// tenant and the fixed values fit in the 128).
func headersRoom(m *eventspb.Message, clientID string) int {
	n := len(m.Topic) + len(clientID) + len(m.ContentType) + len(m.ResponseTopic) + 128
	for _, u := range m.UserProperties {
		n += len(u.GetValue())
	}
	return n
}
