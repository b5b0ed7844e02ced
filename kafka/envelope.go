package kafka

import (
	"fmt"
	"sync"
	"time"

	"github.com/shoal-mqtt/shoal/internal/tracectx"

	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// Record headers Shoal sets.
const (
	// HeaderType holds the envelope's event type (EventPublish, …) so
	// that tools can filter records without decoding them.
	HeaderType = "shoal-type"
	// HeaderTraceparent holds the W3C trace context of the event.
	HeaderTraceparent = "traceparent"
	// HeaderHandoff marks a delivery record that the router of `shoal
	// all` handed to its own process's gateway before producing it (the
	// hand-off, docs/local-path.md "The hand-off"): its value is
	// the gateway's mark, which says whether the gateway delivered the
	// record then (and skips it when it reads it from its slot) or left
	// it to the log.
	HeaderHandoff = "shoal-handoff"
	// HeaderExpress marks a publish record of shoal.messages that the
	// router of `shoal all` routed before it was produced (the express
	// path, docs/local-path.md "The express path"): the router skips
	// it when it reads it, from this run or any other. Its value is
	// ExpressMark.
	HeaderExpress = "shoal-express"
)

// ExpressMark is the value of HeaderExpress.
var ExpressMark = []byte{1}

// Expressed reports whether r carries HeaderExpress.
func (r *Record) Expressed() bool { return r.Header(HeaderExpress) != nil }

// Event types: the names of the Envelope's event oneof cases, as carried in
// HeaderType, for the code that names one (events.go has them all, from
// the .proto; TestEventTypesCoverTheOneof keeps these right).
const (
	EventPublish              = "publish"
	EventSubscriptionChange   = "subscription_change"
	EventConnect              = "connect"
	EventConnectResult        = "connect_result"
	EventPresence             = "presence"
	EventDisconnect           = "disconnect"
	EventKick                 = "kick"
	EventDelivery             = "delivery"
	EventSessionSubscriptions = "session_subscriptions"
	EventGatewayHeartbeat     = "gateway_heartbeat"
	EventSessionTick          = "session_tick"
	EventInboxAppend          = "inbox_append"
	EventSharedRedispatch     = "shared_redispatch"
	EventInboxAck             = "inbox_ack"
	EventPublishRelease       = "publish_release"
	EventQuotaReport          = "quota_report"
	EventSessionCommand       = "session_command"
	EventDeliveryAck          = "delivery_ack"
)

// newRecord is a Record allocated together with its produce state, so
// that NewRecord costs two allocations: this and the buffer.
type newRecord struct {
	r  Record
	st produceState
	fs fillState
}

// recordSlack is the room a record's buffer keeps after the value and the
// type header, for a key, a traceparent and a hand-off mark (SetKey,
// AddTraceChild, AddHeader) written into the same buffer.
const recordSlack = 64 + tracectx.Len + 16

// maxPooledBuffer is the largest record buffer a RecordPool keeps: a record
// that carried a large payload gives its buffer back to the collector.
const maxPooledBuffer = 16 << 10

// NewRecord returns a record for topic carrying env: the value is env
// marshalled with vtprotobuf and the HeaderType header names its event.
// partition is Record.Partition: on keyed topics PartitionByKey (the key
// decides) or an explicit partition (to broadcast one event to every
// partition); on the others the partition. The record refers to key without
// copying it.
func NewRecord(topic string, key []byte, partition int32, env *eventspb.Envelope) *Record {
	nr := &newRecord{}
	r := &nr.r
	r.st, r.fs = &nr.st, &nr.fs
	r.Fill(topic, key, partition, env)
	return r
}

// Fill makes r a record for topic carrying env, as NewRecord makes a new
// one, reusing r's buffer and produce state when it has them (a record from
// a RecordPool, or one whose done callback has run): in steady state it
// allocates nothing. The record's timestamp is the envelope's (the event
// time; now when it has none). Every other field of r is cleared. r must
// not be in flight.
func (r *Record) Fill(topic string, key []byte, partition int32, env *eventspb.Envelope) {
	if r.fs == nil {
		r.fs = new(fillState)
	}
	st := r.fs
	*r = Record{Topic: topic, Key: key, Partition: partition, st: r.st, fs: st}
	if us := env.GetTimestampUs(); us > 0 {
		// franz-go would read the clock for a zero timestamp, once per
		// record: the event has just done so.
		r.Timestamp = time.UnixMicro(us)
	}
	// One buffer holds the value, the type header's value, and room for a
	// key and a traceparent.
	t := EnvelopeType(env)
	size := env.SizeVT()
	buf := st.buf
	if need := size + len(t) + recordSlack; cap(buf) < need {
		buf = make([]byte, 0, need)
	}
	buf = buf[:size]
	n, err := env.MarshalToSizedBufferVT(buf)
	if err != nil || n != size {
		// vtprotobuf's marshalling of a sized buffer fails only on a
		// bug in the generated code: nothing a caller can handle.
		panic(fmt.Sprintf("kafka: marshal envelope: wrote %d of %d bytes: %v", n, size, err))
	}
	r.Value = buf[:size:size]
	r.Headers = st.hdrs[:0]
	if t != "" {
		buf = append(buf, t...)
		r.Headers = append(r.Headers, Header{Key: HeaderType, Value: buf[size:len(buf):len(buf)]})
	}
	st.buf = buf
}

// SetKey sets r's key to the record key of tenant's rest (AppendKey: a
// topic on shoal.messages, a client id on shoal.sessions), written into
// r's own buffer. Call it after Fill.
func (r *Record) SetKey(tenant, rest string) {
	st := r.fs
	from := len(st.buf)
	st.buf = AppendKey(st.buf, tenant, rest)
	r.Key = st.buf[from:len(st.buf):len(st.buf)]
}

// AddTraceChild adds a traceparent header to r: a child of parent (a W3C
// traceparent), or a new trace when parent is not a valid one, written into
// r's own buffer. Call it after Fill.
func (r *Record) AddTraceChild(parent []byte) {
	st := r.fs
	from := len(st.buf)
	st.buf = tracectx.AppendChild(st.buf, parent)
	r.Headers = append(r.Headers, Header{Key: HeaderTraceparent, Value: st.buf[from:len(st.buf):len(st.buf)]})
}

// AddHeader adds a header to r, its value copied into r's own buffer.
// Call it after Fill.
func (r *Record) AddHeader(key string, value []byte) {
	st := r.fs
	from := len(st.buf)
	st.buf = append(st.buf, value...)
	r.Headers = append(r.Headers, Header{Key: key, Value: st.buf[from:len(st.buf):len(st.buf)]})
}

// RecordPool recycles records filled with Fill. It is safe for concurrent
// use. A record may be put back only when nothing refers to it or to its
// bytes any more: after its done callback has run (Produce), or after
// ProduceSync returned nil.
type RecordPool struct {
	p sync.Pool
}

// Get returns a record to Fill.
func (p *RecordPool) Get() *Record {
	if r, ok := p.p.Get().(*Record); ok {
		return r
	}
	nr := &newRecord{}
	nr.r.st, nr.r.fs = &nr.st, &nr.fs
	return &nr.r
}

// Put gives r back. Its buffer is kept unless it grew large.
func (p *RecordPool) Put(r *Record) {
	fs := r.fs
	if fs == nil || r.st == nil {
		return // not made by NewRecord or Get
	}
	if cap(fs.buf) > maxPooledBuffer {
		fs.buf = nil
	}
	clear(fs.hdrs[:])
	*r = Record{st: r.st, fs: fs}
	p.p.Put(r)
}

// WithTraceparent sets r's traceparent header to tp (W3C trace context),
// replacing one already there.
func WithTraceparent(r *Record, tp string) {
	for i := range r.Headers {
		if r.Headers[i].Key == HeaderTraceparent {
			r.Headers[i].Value = []byte(tp)
			return
		}
	}
	r.Headers = append(r.Headers, Header{Key: HeaderTraceparent, Value: []byte(tp)})
}

// Traceparent returns r's traceparent header, "" when it has none. A hot
// path that only passes it on reads r.Header(HeaderTraceparent) instead,
// without allocating.
func Traceparent(r *Record) string {
	return string(r.Header(HeaderTraceparent))
}

// Header returns the value of r's first header named key, nil when it has
// none. The value aliases r's (a consumed record's fetch response): copy
// it to keep it.
func (r *Record) Header(key string) []byte {
	for _, h := range r.Headers {
		if h.Key == key {
			return h.Value
		}
	}
	return nil
}

// DecodeEnvelope resets env and decodes r's value into it with vtprotobuf's
// UnmarshalVTUnsafe: env's bytes fields and strings alias r.Value, without
// copies. env is therefore valid only as long as r.Value is unchanged, and
// keeps r.Value's memory alive; copy what must outlive the record (or
// decode a clone of the value).
func DecodeEnvelope(r *Record, env *eventspb.Envelope) error {
	env.Reset()
	return DecodeEnvelopeInto(r, env)
}

// DecodeEnvelopeInto is DecodeEnvelope without the reset: r's fields are
// merged into env (protobuf's merge: a message field present in env is
// decoded into, not replaced, when the record has it too). A caller that
// reuses structs from record to record empties them itself, and may link
// env to structs of its own beforehand (env.Event to a reused
// Envelope_Delivery, its Delivery's Targets to reused elements) for the
// record to be decoded into them without allocating.
func DecodeEnvelopeInto(r *Record, env *eventspb.Envelope) error {
	return decodeEnvelope(r, env, false)
}

// DecodeEnvelopeCopy resets env and decodes r's value into it with copies
// (vtprotobuf's UnmarshalVT): nothing in env refers to r.Value, for an
// envelope whose strings are kept long after the record (a small slice of
// a record keeps its whole fetch response in memory).
func DecodeEnvelopeCopy(r *Record, env *eventspb.Envelope) error {
	env.Reset()
	return decodeEnvelope(r, env, true)
}

// decodeEnvelope is the one decoder of records' envelopes: r's value merged
// into env, aliasing it unless copied.
func decodeEnvelope(r *Record, env *eventspb.Envelope, copied bool) error {
	var err error
	if copied {
		err = env.UnmarshalVT(r.Value)
	} else {
		err = env.UnmarshalVTUnsafe(r.Value)
	}
	if err != nil {
		return fmt.Errorf("decode envelope of %s/%d at offset %d: %w", r.Topic, r.Partition, r.Offset, err)
	}
	return nil
}
