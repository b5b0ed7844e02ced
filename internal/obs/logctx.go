package obs

import (
	"context"

	"go.opentelemetry.io/otel/trace"
)

// ContextWithTraceparent returns ctx carrying the remote span context of
// tp, a record's traceparent header, so that a line logged with it about
// the record carries the record's trace_id and span_id
// (telemetry.LogHandler), tracing on or off: Shoal's records carry their
// trace context either way. ctx is returned as it is when it carries a
// valid span context already (the span handling the record says more) or
// when tp is not a valid traceparent.
func ContextWithTraceparent(ctx context.Context, tp []byte) context.Context {
	if len(tp) == 0 || trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	sc := SpanContext(tp)
	if !sc.IsValid() {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}
