package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
	"go.opentelemetry.io/otel/trace"
)

// The slot consumer: the records of the gateway's slot of shoal.deliveries
// (deliveries, answers to Connect, kicks, run markers), dispatched on one
// goroutine, and the messages handed back when their client is not here.

// writeMarker writes this run's marker to the gateway's slot: the marker's
// offset positions the slot consumer, since every later answer to this run
// is found after it. The marker names this run, and fences off an earlier
// run that still reads the slot (handleDeliveries).
func (g *Gateway) writeMarker(ctx context.Context) (*kafka.Record, error) {
	marker := kafka.NewRecord(g.topics.Deliveries.Name, nil, g.slot.Load(), &eventspb.Envelope{
		Gateway:     g.cfg.ID,
		TimestampUs: g.clock().UnixMicro(),
		Event: &eventspb.Envelope_GatewayHeartbeat{GatewayHeartbeat: &eventspb.GatewayHeartbeat{
			Slot: g.slot.Load(), ConnectionBase: g.connBase(),
		}},
	})
	if err := g.eventLog.ProduceSync(ctx, marker); err != nil {
		return nil, fmt.Errorf("gateway: write slot marker: %w", err)
	}
	g.markerOffset = marker.Offset
	return marker, nil
}

// consumeSlot starts the slot consumer, a goroutine of wg, reading the slot
// from marker on; the channel it returns is closed once the consumer has
// read its first batch (it is positioned). When it stops before ctx ends
// it sends why to errc: another run's marker (a SlotTakenError), or the
// consumer's failure.
func (g *Gateway) consumeSlot(ctx context.Context, marker *kafka.Record, wg *sync.WaitGroup, errc chan<- error) <-chan struct{} {
	positioned := make(chan struct{})
	var once sync.Once
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := g.eventLog.Consume(ctx, kafka.ConsumeConfig{
			Topic:      g.topics.Deliveries.Name,
			Partitions: []int32{g.slot.Load()},
			Start:      func(int32) int64 { return marker.Offset },
			Reuse:      true, // the slot decoder keeps no record, only bytes they refer to
			// In shoal all, the records the process writes to the slot
			// come through the local delivery path, without a fetch.
			Local: true,
			// The records the router handed over and the gateway
			// delivered then come without their bytes.
			SkipHandedOff: true,
		}, func(ctx context.Context, b kafka.Batch) error {
			once.Do(func() {
				g.startHandoff()
				close(positioned)
			})
			return g.handleDeliveries(ctx, b)
		})
		g.stopHandoff()
		var taken *SlotTakenError
		switch {
		case errors.As(err, &taken):
			g.log.Error("slot taken over by another gateway run; stopping", "slot", taken.Slot,
				"by", taken.Gateway, "run", fmt.Sprintf("%#x", taken.Run), "offset", taken.Offset)
			errc <- fmt.Errorf("gateway: %w", taken)
		case err != nil:
			errc <- fmt.Errorf("gateway: consume slot %d: %w", g.slot.Load(), err)
		}
	}()
	return positioned
}

// handleDeliveries dispatches the records of our slot. The marker of
// another run (a GatewayHeartbeat with another gateway id or connection
// base) means that run owns the slot now: it returns a SlotTakenError at
// once, handling nothing after the marker, and the consumer stops.
//
// Records the hand-off delivered (handoff.go) are skipped; the batch is
// handled under the hand-off's lock.
func (g *Gateway) handleDeliveries(ctx context.Context, b kafka.Batch) error {
	dec := &g.slotDec
	h := &g.handoff
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range b.Records {
		if h.handedOff(r) {
			continue
		}
		env, err := dec.decode(r)
		if err != nil {
			g.log.Error("decode delivery record", "offset", r.Offset, "err", err)
			continue
		}
		switch ev := env.Event.(type) {
		case *eventspb.Envelope_Delivery:
			g.deliverRecord(r, env, ev.Delivery)
		case *eventspb.Envelope_ConnectResult:
			g.answer(ev.ConnectResult)
		case *eventspb.Envelope_Kick:
			g.mu.RLock()
			c := g.byID[ev.Kick.Connection]
			g.mu.RUnlock()
			if c != nil && c.tenant == env.Tenant && c.clientID == env.ClientId {
				// Before its CONNACK is queued the connection only records
				// the close, at once, for its handshake (CONNACK first);
				// otherwise the close writes to the socket, which never
				// blocks the slot consumer.
				if code := ReasonCodeOf(ev.Kick.ReasonCode); !c.closeLater(code) {
					go c.kick(code)
				}
			}
		case *eventspb.Envelope_GatewayHeartbeat:
			hb := ev.GatewayHeartbeat
			if env.Gateway != g.cfg.ID || hb.ConnectionBase != g.connBase() || hb.Slot != g.slot.Load() {
				return &SlotTakenError{Slot: g.slot.Load(), Gateway: env.Gateway, Run: hb.ConnectionBase, Offset: r.Offset, Own: g.connBase()}
			}
			// our own position marker
		default:
			g.log.Warn("unexpected event on slot", "type", kafka.EventType(r), "offset", r.Offset)
		}
	}
	return nil
}

// answer gives a waiting CONNECT the session service's answer res, and
// registers its connection when accepted. The slot consumer's goroutine,
// or the session service's hand-off (Answer), with the hand-off's lock
// held; an answer already given (the record of a handed answer), or one
// of another run, is ignored.
func (g *Gateway) answer(res *eventspb.ConnectResult) {
	g.mu.Lock()
	w, ok := g.waiting[res.RequestId]
	// Request ids start again with every run: an answer for another
	// connection is an old run's, written again by a session service
	// replaying the log. The waiter keeps waiting.
	ok = ok && res.Connection == w.c.id
	if ok {
		delete(g.waiting, res.RequestId)
	}
	if ok && res.ReasonCode == 0 {
		// Register the connection before the next record of the slot is
		// handled: deliveries that follow the answer (a resumed
		// session's queued messages) must find it. They wait in the
		// connection until its CONNACK is queued.
		w.c.generation = res.Generation
		w.c.sessionGen = res.SessionGeneration
		if w.c.sessionGen == 0 {
			// A session service that does not name sessions.
			w.c.sessionGen = res.Generation
		}
		g.clients[w.c.clientsKey] = w.c
		g.byID[w.c.id] = w.c
	}
	g.mu.Unlock()
	if ok {
		w.ch <- res
	}
}

// deliverRecord delivers the Delivery d of r, decoded by the slot decoder
// into env. The slot consumer's goroutine, or a hand-off, with the
// hand-off's lock held.
func (g *Gateway) deliverRecord(r *kafka.Record, env *eventspb.Envelope, d *eventspb.Delivery) {
	if g.cfg.ExposeMessageID && env.MessageId != nil && d.Message != nil {
		exposeMessageID(d.Message, env.MessageId)
	}
	if g.deliver(r.Context, env.Tenant, env.MessageId, d) {
		g.slotDec.keepMessage()
	}
}

// returnUndelivered hands back a QoS 1/2 message whose client is not
// connected here: to its shared subscription's group when a group chose the
// client, to the client's session otherwise.
func (g *Gateway) returnUndelivered(tenant string, m *eventspb.Message, t *eventspb.Target) {
	if t.ShareGroup != "" {
		g.redispatch(tenant, t.ClientId, m, t.ShareGroup, t.ShareFilter)
		return
	}
	g.bounce(tenant, m, t)
}

// redispatch asks the router shard of the message's topic to give it to
// another member of the shared subscription (SharedRedispatch).
func (g *Gateway) redispatch(tenant, client string, m *eventspb.Message, group, filter string) {
	rec := kafka.NewRecord(g.topics.Messages.Name, kafka.Key(tenant, m.Topic), kafka.PartitionByKey, &eventspb.Envelope{
		Tenant:      tenant,
		Gateway:     g.cfg.ID,
		TimestampUs: g.clock().UnixMicro(),
		Event: &eventspb.Envelope_SharedRedispatch{SharedRedispatch: &eventspb.SharedRedispatch{
			Message: m, ShareGroup: group, Filter: filter, ExcludeClient: client,
		}},
	})
	g.eventLog.Produce(context.Background(), rec, func(_ *kafka.Record, err error) {
		if err != nil {
			g.log.Warn("redispatch shared message", "tenant", tenant, "group", group, "err", err)
		}
	})
}

// bounce returns a message for a client that is not connected here to its
// session service as an InboxAppend.
func (g *Gateway) bounce(tenant string, m *eventspb.Message, t *eventspb.Target) {
	rec := kafka.NewRecord(g.topics.Sessions.Name, kafka.Key(tenant, t.ClientId), kafka.PartitionByKey, &eventspb.Envelope{
		Tenant:      tenant,
		ClientId:    t.ClientId,
		Gateway:     g.cfg.ID,
		TimestampUs: g.clock().UnixMicro(),
		Event: &eventspb.Envelope_InboxAppend{InboxAppend: &eventspb.InboxAppend{
			Message: m,
			Target:  &eventspb.Target{Qos: t.Qos, Retain: t.Retain, SubscriptionIds: t.SubscriptionIds, Dup: t.Dup},
		}},
	})
	client := t.ClientId // t is reused once this returns
	g.producer(rec.Topic).Produce(context.Background(), rec, func(_ *kafka.Record, err error) {
		if err != nil {
			g.log.Warn("return undeliverable message to its session", "tenant", tenant, "client_id", client, "err", err)
		}
	})
}

// deliver hands a delivery's message to each target connected here. The
// targets' connections are looked up under one read lock, the message is
// written into each one's out buffer, and the connections that need a
// writer are queued together. It reports whether a connection kept d's
// Message (see conn.deliver). Slot consumer goroutine only.
//
// ctx is the record's trace context (nil without tracing): when its trace
// is sampled, each target gets an mqtt.deliver span, and the publish →
// delivery latency is recorded with it (an exemplar).
func (g *Gateway) deliver(ctx context.Context, tenant string, mid *eventspb.MessageID, d *eventspb.Delivery) (kept bool) {
	now := g.clock()
	conns := g.dispatch.conns[:0]
	g.mu.RLock()
	for _, t := range d.Targets {
		c := g.byID[t.Connection]
		if c != nil && (c.clientID != t.ClientId || c.tenant != tenant) {
			c = nil
		}
		conns = append(conns, c)
	}
	g.mu.RUnlock()
	flush := g.dispatch.flush[:0]
	pc := &g.dispatch.cache
	pc.reset(d.Message, now)
	id := idOf(mid)
	traced := ctx != nil && trace.SpanContextFromContext(ctx).IsSampled()
	if ctx == nil {
		ctx = context.Background() // the latency's Record needs one
	}
	var sent int64
	var counted *conn
	for i, t := range d.Targets {
		c := conns[i]
		if c == nil {
			// Gone, or another connection of the client. A QoS 1/2 message
			// goes back to the client's session, which queues it (offline
			// persistent session), forwards it (a newer connection) or
			// drops it (no session): the router may not have read the
			// client's newest presence yet.
			g.log.Debug("delivery target not connected here", "tenant", tenant, "client_id", t.ClientId,
				"connection", t.Connection)
			if t.Qos > 0 && t.InboxSeq == 0 {
				// (An inbox message stays with its session, which sends
				// it to the client's newest connection.)
				g.returnUndelivered(tenant, d.Message, t)
			}
			continue
		}
		var span trace.Span
		if traced {
			span = g.deliverSpan(ctx, c, d.Message, t, id)
		}
		k, f, s := c.deliverCounted(d.Source, id, d.Message, t, now, pc, span)
		kept = kept || k
		if k || s { // written, or queued in the connection (metrics.go)
			g.met.delivered(ctx, now, d.PublishedUs)
		}
		if f {
			flush = append(flush, c)
		}
		if s {
			sent++
			counted = c
		}
	}
	if counted != nil {
		counted.add(MessagesSent, sent) // the targets are all of one tenant
	}
	g.writes.push(flush...)
	clear(conns)
	clear(flush)
	g.dispatch.conns, g.dispatch.flush = conns[:0], flush[:0]
	pc.reset(nil, time.Time{}) // drop the reference to the message
	return kept
}

// MessageIDProperty is the user property that Config.ExposeMessageID adds
// to delivered messages: the message's identifier as `shoal replay` prints
// it and `shoal trace` takes it.
const MessageIDProperty = "shoal-message-id"

// exposeMessageID adds MessageIDProperty to m, once (a message a client
// sent with that property keeps it too: the operator's is last).
func exposeMessageID(m *eventspb.Message, id *eventspb.MessageID) {
	m.UserProperties = append(m.UserProperties, &eventspb.UserProperty{Key: MessageIDProperty, Value: kafka.FormatMessageID(id)})
}
