package routersvc

import (
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/shoal-mqtt/shoal/kafka"
)

// TestRecordContext: a line about a record is logged in its trace; a
// record without a traceparent has none.
func TestRecordContext(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	rec := &kafka.Record{Headers: []kafka.Header{{Key: kafka.HeaderTraceparent, Value: []byte(tp)}}}
	sc := trace.SpanContextFromContext(recordContext(rec))
	if sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || sc.SpanID().String() != "00f067aa0ba902b7" {
		t.Fatalf("span context %v, want the traceparent's", sc)
	}
	if sc := trace.SpanContextFromContext(recordContext(&kafka.Record{})); sc.IsValid() {
		t.Fatalf("span context %v for a record without a traceparent", sc)
	}
}
