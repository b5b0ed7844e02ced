package routersvc

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/shoal-mqtt/shoal/internal/obs"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// spanRoute is the router's span: one per publish whose trace is sampled,
// child of the kotel receive span of its shoal.messages record, covering
// the matching and the delivery records made of it (which become its
// children in the log). Its attributes count what matched:
// shoal.router.matches (targets: subscriptions, shared groups' chosen
// members) and shoal.router.deliveries (records to shoal.deliveries and
// to inboxes).
const spanRoute = "router.route"

// routeSpan starts the router.route span of rec, or returns nil when rec
// carries no sampled trace (tracing off, or not sampled: its children
// would record nothing) or is not a publish.
func (r *Router) routeSpan(rec *kafka.Record, env *eventspb.Envelope) (context.Context, trace.Span) {
	if rec.Context == nil || env.GetPublish() == nil || !trace.SpanContextFromContext(rec.Context).IsSampled() {
		return nil, nil
	}
	ctx, span := r.tel.Tracer.Tracer(obs.Scope).Start(rec.Context, spanRoute, trace.WithSpanKind(trace.SpanKindConsumer))
	m := env.GetPublish().GetMessage()
	span.SetAttributes(
		attribute.String("messaging.system", "kafka"),
		attribute.String("messaging.operation.type", "process"),
		attribute.String("messaging.destination.name", rec.Topic),
		attribute.Int("messaging.destination.partition.id", int(rec.Partition)),
		attribute.Int64("messaging.kafka.offset", rec.Offset),
		attribute.String("messaging.message.id", kafka.FormatMessageID(env.MessageId)),
		attribute.String("mqtt.topic", m.GetTopic()),
		attribute.Int("mqtt.qos", int(m.GetQos())),
		attribute.String("shoal.tenant", env.Tenant),
	)
	return ctx, span
}

// endRouteSpan ends span with the counts of what the publish matched: the
// deliveries ds and the records made of them, recs.
func endRouteSpan(ctx context.Context, span trace.Span, ds []Delivery, recs []*kafka.Record) {
	matches := 0
	for _, d := range ds {
		matches += len(d.Envelope.GetDelivery().GetTargets())
		if d.Inbox && d.Slot == InboxSlot {
			matches++ // an inbox-only delivery's targets went to InboxAppends
		}
	}
	for _, out := range recs {
		out.Context = ctx
	}
	span.SetAttributes(
		attribute.Int("shoal.router.matches", matches),
		attribute.Int("shoal.router.deliveries", len(recs)),
	)
	span.End()
}
