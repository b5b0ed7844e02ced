package gateway

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/internal/obs"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// The gateway's spans (only with tracing on, g.tel.Tracing):
//
//   - mqtt.publish, a server span from a client's PUBLISH to its PUBACK or
//     PUBREC written (QoS 1/2), or to the record in the log (QoS 0). It
//     continues the client's own trace when its 5.0 user property
//     "traceparent" holds one; otherwise the sampler starts a trace. Its
//     context is the parent of the kotel publish span of the record.
//   - mqtt.deliver, a producer span per target of a delivery record whose
//     trace is sampled, child of the kotel receive span: from the record
//     read to the PUBLISH written (QoS 0), or to the subscriber's PUBACK or
//     PUBCOMP (QoS 1/2). A message that is not sent (the client gone, the
//     ACL, expiry, a full buffer) ends it with an error status.
//
// Attributes follow the messaging conventions: messaging.system "mqtt",
// messaging.destination.name, messaging.client.id, messaging.message.id,
// shoal.tenant, mqtt.qos.
const (
	spanPublish = "mqtt.publish"
	spanDeliver = "mqtt.deliver"
)

var attrSystem = attribute.String("messaging.system", "mqtt")

// tracer returns the gateway's tracer.
func (g *Gateway) tracer() trace.Tracer { return g.tel.Tracer.Tracer(obs.Scope) }

// publishSpan starts the mqtt.publish span of a PUBLISH to topic name,
// continuing parent (the client's traceparent, possibly nil).
func (c *conn) publishSpan(p *packet.Publish, name, parent []byte, mid *eventspb.MessageID) (context.Context, trace.Span) {
	ctx := context.Background()
	if sc := obs.SpanContext(parent); sc.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	ctx, span := c.g.tracer().Start(ctx, spanPublish, trace.WithSpanKind(trace.SpanKindServer))
	if span.IsRecording() {
		span.SetAttributes(attrSystem,
			attribute.String("messaging.operation.type", "publish"),
			attribute.String("messaging.destination.name", string(name)),
			attribute.String("messaging.client.id", c.clientID),
			attribute.String("messaging.message.id", idOf(mid).String()),
			attribute.String("shoal.tenant", c.tenant),
			attribute.Int("mqtt.qos", int(p.QoS)),
			attribute.Bool("mqtt.retain", p.Retain),
			attribute.Int("messaging.message.body.size", len(p.Payload)),
		)
	}
	return ctx, span
}

// deliverSpan starts the mqtt.deliver span of a delivery to target t of
// c, child of ctx (the delivery record's). Nil when the record's trace is
// not sampled: its unsampled children would record nothing.
func (g *Gateway) deliverSpan(ctx context.Context, c *conn, m *eventspb.Message, t *eventspb.Target, mid messageID) trace.Span {
	_, span := g.tracer().Start(ctx, spanDeliver, trace.WithSpanKind(trace.SpanKindProducer))
	span.SetAttributes(attrSystem,
		attribute.String("messaging.operation.type", "send"),
		attribute.String("messaging.destination.name", m.Topic),
		attribute.String("messaging.client.id", c.clientID),
		attribute.String("messaging.message.id", mid.String()),
		attribute.String("shoal.tenant", c.tenant),
		attribute.Int("mqtt.qos", int(min(t.Qos, 2))),
	)
	return span
}

// endSpan ends span (nil: none), with an error status saying why when why
// is not "".
func endSpan(span trace.Span, why string) {
	if span == nil {
		return
	}
	if why != "" {
		span.SetStatus(codes.Error, why)
	}
	span.End()
}
