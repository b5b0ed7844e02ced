package kafka

import (
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kotel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// kotelTracer returns franz-go's own OpenTelemetry tracer (kotel) for the
// producer (group "") or a consumer, behind sampledOnly: a "<topic>
// publish" span per record produced, from Produce to the broker's
// acknowledgement, child of the record's Context or traceparent header,
// whose context it writes into the record's traceparent header; a "<topic>
// receive" span per record fetched, child of that header, whose context
// becomes the consumed Record's Context. The record key is an attribute
// when it is valid UTF-8 (Shoal's keys are a tenant and a topic or client
// id).
func (c *Client) kotelTracer(group string) kgo.Hook {
	opts := []kotel.TracerOpt{
		kotel.TracerProvider(c.cfg.Telemetry.Tracer),
		kotel.TracerPropagator(propagation.TraceContext{}),
		kotel.ClientID(c.cfg.ClientID),
	}
	if group != "" {
		opts = append(opts, kotel.ConsumerGroup(group))
	}
	return sampledOnly{kotel.NewTracer(opts...)}
}

// sampledOnly passes kotel only the records whose trace is sampled. kotel
// starts a span for every record, which for an unsampled trace records
// nothing but costs its attributes, a span and a context, and on the
// consumer side a header parse: at a 1% sampling ratio that was most of
// the cost of tracing (bench/README.md, "The cost of tracing"). An unsampled record
// keeps the traceparent header its producer wrote (flags 00), so its trace
// id still travels; a consumed one gets no Context. A record produced
// without a trace of its own (no header) goes to kotel, whose span the
// sampler may record.
type sampledOnly struct{ t *kotel.Tracer }

var (
	_ kgo.HookProduceRecordBuffered   = sampledOnly{}
	_ kgo.HookProduceRecordUnbuffered = sampledOnly{}
	_ kgo.HookFetchRecordBuffered     = sampledOnly{}
	_ kgo.HookFetchRecordUnbuffered   = sampledOnly{}
)

// OnProduceRecordBuffered passes kotel a record of a sampled trace, and a
// record without any trace (a Connect, a heartbeat, a tick), whose trace
// kotel starts as the sampler decides.
func (s sampledOnly) OnProduceRecordBuffered(r *kgo.Record) {
	if trace.SpanContextFromContext(r.Context).IsSampled() || !hasHeader(r.Headers, HeaderTraceparent) {
		s.t.OnProduceRecordBuffered(r)
	}
}

// hasHeader reports whether hs has a header named key.
func hasHeader(hs []kgo.RecordHeader, key string) bool {
	for _, h := range hs {
		if h.Key == key {
			return true
		}
	}
	return false
}

func (s sampledOnly) OnProduceRecordUnbuffered(r *kgo.Record, err error) {
	if trace.SpanFromContext(r.Context).IsRecording() {
		s.t.OnProduceRecordUnbuffered(r, err)
	}
}

func (s sampledOnly) OnFetchRecordBuffered(r *kgo.Record) {
	if sampledHeader(r.Headers) {
		s.t.OnFetchRecordBuffered(r)
	}
}

func (s sampledOnly) OnFetchRecordUnbuffered(r *kgo.Record, polled bool) {
	if r.Context != nil && trace.SpanFromContext(r.Context).IsRecording() {
		s.t.OnFetchRecordUnbuffered(r, polled)
	}
}

// sampledHeader reports whether hs has a version 00 traceparent whose
// sampled flag is set, without parsing it.
func sampledHeader(hs []kgo.RecordHeader) bool {
	for _, h := range hs {
		if h.Key == HeaderTraceparent {
			v := h.Value
			return len(v) >= 55 && v[0] == '0' && v[1] == '0' && (v[54] == '1' || v[54] == '3' || v[54] == '5' ||
				v[54] == '7' || v[54] == '9' || v[54] == 'b' || v[54] == 'd' || v[54] == 'f')
		}
	}
	return false
}
