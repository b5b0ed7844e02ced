package bridge

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/shoal-mqtt/shoal/internal/obs"
	"github.com/shoal-mqtt/shoal/kafka"
)

// The bridge's spans (only with tracing on, Options.Telemetry.Tracing),
// one per message whose trace is sampled, from the record read to the
// records made of it produced in the poll's transaction:
//
//   - bridge.out, child of the traceparent of the shoal.messages record;
//     the traceparent header of each record it writes to a mapping's
//     topic is the span's, so the trace goes on into the consumer.
//   - bridge.in, child of the Kafka record's traceparent header; the
//     Publish it writes to shoal.messages carries the span's, which the
//     router's and the gateway's spans continue.
//
// Attributes follow the messaging conventions, as the router's.
const (
	spanOut = "bridge.out"
	spanIn  = "bridge.in"
)

// hopSpan starts the span of one message across the bridge, child of
// parent (a traceparent), and appends its own traceparent to tp. It
// returns nil (and tp as it was) when tracing is off or parent is not a
// sampled trace: its children would record nothing.
func (b *Bridge) hopSpan(ctx context.Context, name string, parent []byte, r *kafka.Record, mapping string, tp []byte) (trace.Span, []byte) {
	if !b.opts.Telemetry.Tracing {
		return nil, tp
	}
	sc := obs.SpanContext(parent)
	if !sc.IsSampled() {
		return nil, tp
	}
	_, span := b.tracer.Start(trace.ContextWithRemoteSpanContext(ctx, sc), name, trace.WithSpanKind(trace.SpanKindConsumer))
	span.SetAttributes(
		attribute.String("messaging.system", "kafka"),
		attribute.String("messaging.operation.type", "process"),
		attribute.String("messaging.destination.name", r.Topic),
		attribute.Int("messaging.destination.partition.id", int(r.Partition)),
		attribute.Int64("messaging.kafka.offset", r.Offset),
		attribute.String("shoal.bridge.mapping", mapping),
	)
	return span, obs.AppendTraceparent(tp, span.SpanContext())
}
