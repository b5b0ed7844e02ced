package sessionsvc

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/shoal-mqtt/shoal/compose/telemetry"
	"github.com/shoal-mqtt/shoal/kafka"
)

// TestUndecodableRecordLoggedWithItsTrace: the line about a record that
// does not decode carries the trace_id of its traceparent header.
func TestUndecodableRecordLoggedWithItsTrace(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	var buf bytes.Buffer
	log := slog.New(telemetry.LogHandler(slog.NewJSONHandler(&buf, nil)))
	rec := &kafka.Record{Topic: "shoal.sessions", Value: []byte{0xff, 0xff, 0xff},
		Headers: []kafka.Header{{Key: kafka.HeaderTraceparent, Value: []byte(tp)}}}
	if recs := decodeBatch(kafka.Batch{Records: []*kafka.Record{rec}}, log); recs[0].env != nil {
		t.Fatal("garbage decoded")
	}
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("log %q: %v", buf.String(), err)
	}
	if line["msg"] != "undecodable record skipped" || line["trace_id"] != "4bf92f3577b34da6a3ce929d0e0e4736" || line["span_id"] != "00f067aa0ba902b7" {
		t.Fatalf("line %s: want the record's trace_id and span_id", buf.String())
	}
}
