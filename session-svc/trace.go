package sessionsvc

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/shoal-mqtt/shoal/kafka"
)

// The session service's spans: one per event of shoal.sessions whose
// trace is sampled, "session.<event>" (session.connect, session.disconnect,
// session.connection_lost, session.inbox_append, session.session_tick…),
// child of the kotel receive span of its record, over the state change and
// the records it makes (their kotel publish spans are its children). A
// takeover (the session's earlier connection kicked) and a will published
// are marked on the span: shoal.session.takeover, shoal.session.will, and
// an event each. A Connect's record starts a trace of its own (the sampler
// decides); a PUBLISH's inbox entry continues the message's trace.

// eventSpan starts the span of r, or returns nil when r carries no sampled
// trace (tracing off, or not sampled).
func (m *machine) eventSpan(r record, partition int32) (context.Context, trace.Span) {
	if m.tracer == nil || r.ctx == nil || !trace.SpanContextFromContext(r.ctx).IsSampled() {
		return r.ctx, nil
	}
	ctx, span := m.tracer.Start(r.ctx, "session."+kafka.EnvelopeType(r.env), trace.WithSpanKind(trace.SpanKindConsumer))
	span.SetAttributes(
		attribute.String("messaging.system", "kafka"),
		attribute.String("messaging.operation.type", "process"),
		attribute.Int("messaging.destination.partition.id", int(partition)),
		attribute.Int64("messaging.kafka.offset", r.offset),
		attribute.String("messaging.client.id", r.env.GetClientId()),
		attribute.String("shoal.tenant", r.env.GetTenant()),
	)
	return ctx, span
}

// endEventSpan marks what the event's outputs did and ends span.
func endEventSpan(span trace.Span, outs []output) {
	takeover, will := false, false
	for _, o := range outs {
		switch {
		case o.env.GetKick() != nil:
			takeover = true
		case o.dest == toMessages && o.env.GetPublish() != nil:
			will = true
		}
	}
	if takeover {
		span.AddEvent("takeover: earlier connection kicked")
	}
	if will {
		span.AddEvent("will published")
	}
	span.SetAttributes(
		attribute.Bool("shoal.session.takeover", takeover),
		attribute.Bool("shoal.session.will", will),
		attribute.Int("shoal.session.outputs", len(outs)),
	)
	span.End()
}
