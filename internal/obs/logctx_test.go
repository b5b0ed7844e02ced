package obs

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// TestContextWithTraceparent: the context carries the traceparent's span
// context, nothing for one that is not valid, and a span context already
// in the context stays.
func TestContextWithTraceparent(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := ContextWithTraceparent(context.Background(), []byte(tp))
	if got := string(AppendTraceparent(nil, trace.SpanContextFromContext(ctx))); got != tp {
		t.Fatalf("span context %q, want the traceparent's %q", got, tp)
	}
	for _, bad := range []string{"", "garbage"} {
		if sc := trace.SpanContextFromContext(ContextWithTraceparent(context.Background(), []byte(bad))); sc.IsValid() {
			t.Errorf("traceparent %q gave a valid span context", bad)
		}
	}
	other := SpanContext([]byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"))
	ctx = trace.ContextWithSpanContext(context.Background(), other)
	if sc := trace.SpanContextFromContext(ContextWithTraceparent(ctx, []byte(tp))); !sc.Equal(other) {
		t.Errorf("span context %v replaced the context's %v", sc, other)
	}
}
