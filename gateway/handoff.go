package gateway

import (
	"sync"
	"sync/atomic"

	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// The hand-off: in `shoal all` the router gives this gateway the delivery
// records for its slot before it produces them (Handoff), and the gateway
// writes their messages to its clients at once; the records still go to
// the log, marked with kafka.HeaderHandoff, and the slot consumer skips
// those it delivered. docs/local-path.md, "The hand-off", has the
// argument; in short:
//
//   - Order. The router hands its records over in the order it produces
//     them, which is their order in the slot. A record the gateway cannot
//     deliver at once (a target connection not registered here yet, whose
//     answer the slot consumer has not read) is marked late and left to the
//     log, and so is every record after it until the slot consumer has
//     read all the late ones: the router's records reach the clients in
//     slot order, whichever way they come. Other producers' records (the
//     session service's answers and inbox messages) are ordered with the
//     router's only by what causes what, and causes are read before their
//     effects are produced.
//   - What a record does is the same either way: the same bytes, decoded
//     and delivered by the same code (deliverRecord), with the slot
//     consumer's lock held, so the two never interleave within a record.
//   - Guarantees. Only the router's delivery records come this way: QoS 0
//     targets and the QoS 1/2 targets of sessions that end with their
//     connection, which a crash of the process ends too. A persistent
//     session's QoS 1/2 messages go through its inbox, which keeps them
//     until they are acknowledged, as before.
type handoff struct {
	// mu serialises the slot consumer's handling of a batch and the
	// hand-offs: they share slotDec and dispatch. Lock order: mu, then
	// Gateway.mu, then a connection's.
	mu sync.Mutex
	// on is true while the slot consumer reads from this run's marker on:
	// every record marked from then on reaches it. Set under mu.
	on atomic.Bool
	// late counts the records marked late and not read by the slot
	// consumer yet: the router adds (without mu, so that a busy router
	// never waits for the slot consumer's batch), the slot consumer
	// subtracts.
	late atomic.Int64
	// marks are the values of kafka.HeaderHandoff of this run: the run's
	// connection base, then handoffEarly or handoffLate. Written before on
	// becomes true.
	early, lateMark [kafka.HandoffMarkLen]byte
	// chunk holds copies of handed records' values: the router reuses its
	// record once produced, while a connection may keep the message (a
	// QoS 1/2 message in flight, a payload written by reference). Chunks
	// are never reused: they go with the last message that refers to them.
	chunk []byte
	rec   kafka.Record // the copy decoded
	run   uint64       // the run in the marks
}

const (
	// handoffChunk is the size of the chunks values are copied into;
	// a value above a quarter of it gets memory of its own.
	handoffChunk = 64 << 10
)

// startHandoff enables hand-offs once the slot consumer is positioned
// after this run's marker. Called by the slot consumer.
func (g *Gateway) startHandoff() {
	h := &g.handoff
	h.mu.Lock()
	defer h.mu.Unlock()
	h.run = g.connBase()
	h.early = kafka.HandoffMark(h.run, kafka.HandoffEarly)
	h.lateMark = kafka.HandoffMark(g.connBase(), kafka.HandoffLate)
	h.late.Store(0)
	h.on.Store(true)
}

// stopHandoff disables hand-offs: the slot consumer has stopped.
func (g *Gateway) stopHandoff() {
	h := &g.handoff
	h.mu.Lock()
	h.on.Store(false)
	h.mu.Unlock()
}

// Handoff implements routersvc.Handoff: it delivers rec now and returns
// the early mark, or returns the late mark when rec must wait for the
// log (now false, or a late record not read yet, or a target not
// registered), or nil when this gateway does not read slot now.
func (g *Gateway) Handoff(slot int32, rec *kafka.Record, now bool) []byte {
	h := &g.handoff
	if !h.on.Load() || slot != g.slot.Load() {
		return nil
	}
	if !now {
		h.late.Add(1)
		return h.lateMark[:]
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.late.Load() > 0 {
		h.late.Add(1)
		return h.lateMark[:]
	}
	r := &h.rec
	*r = kafka.Record{Topic: rec.Topic, Partition: slot, Offset: -1, Value: h.copyValue(rec.Value)}
	env, err := g.slotDec.decode(r)
	if err != nil {
		// The slot consumer meets it again, and says so.
		h.late.Add(1)
		return h.lateMark[:]
	}
	ev, ok := env.Event.(*eventspb.Envelope_Delivery)
	if !ok || !g.allConnected(env.Tenant, ev.Delivery) {
		h.late.Add(1)
		return h.lateMark[:]
	}
	g.deliverRecord(r, env, ev.Delivery)
	return h.early[:]
}

// Answer implements sessionsvc.Answers: in `shoal all` the session
// service gives the gateway its answer to a Connect once the removals and
// the presence it writes first are durable, before it produces the answer
// (ARCHITECTURE.md, invariant 4: that is all the gateway must wait for).
// The answer is taken as the slot consumer takes it from the log, under
// the same lock; the record, read later, finds its request answered and is
// ignored. It does nothing when this gateway does not read slot now: the
// record answers, from the log.
func (g *Gateway) Answer(slot int32, res *eventspb.ConnectResult) {
	h := &g.handoff
	if !h.on.Load() || slot != g.slot.Load() {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	g.answer(res)
}

// handedOff reports whether the slot consumer skips r, which the hand-off
// delivered, and counts the late records it reads. The slot consumer,
// with h.mu held.
func (h *handoff) handedOff(r *kafka.Record) bool {
	run, kind, ok := kafka.ParseHandoffMark(r.Header(kafka.HeaderHandoff))
	if !ok || run != h.run {
		return false // no mark, or another run's
	}
	switch kind {
	case kafka.HandoffEarly:
		return true
	case kafka.HandoffLate:
		if h.late.Load() > 0 { // only the slot consumer subtracts
			h.late.Add(-1)
		}
	}
	return false
}

// allConnected reports whether every target of d has its connection
// registered here.
func (g *Gateway) allConnected(tenant string, d *eventspb.Delivery) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	for _, t := range d.Targets {
		c := g.byID[t.Connection]
		if c == nil || c.clientID != t.ClientId || c.tenant != tenant {
			return false
		}
	}
	return true
}

// copyValue copies v into the current chunk.
func (h *handoff) copyValue(v []byte) []byte {
	if len(v) > handoffChunk/4 {
		return append([]byte(nil), v...)
	}
	if len(v) > cap(h.chunk)-len(h.chunk) {
		h.chunk = make([]byte, 0, handoffChunk)
	}
	from := len(h.chunk)
	h.chunk = append(h.chunk, v...)
	return h.chunk[from:len(h.chunk):len(h.chunk)]
}

// Express is the router of the process (`shoal all`), which routes a QoS 0
// publish before it is produced when it can (routersvc.Router.Express):
// the gateway then marks the record kafka.HeaderExpress, and the router
// skips it when it reads it.
type Express interface {
	// Express is given rec, a QoS 0 publish record that is not retained,
	// filled and keyed and not produced yet; it reports whether it routed
	// it. rec is the gateway's again when it returns.
	Express(rec *kafka.Record) bool
}
