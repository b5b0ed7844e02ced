package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/shoal-mqtt/shoal/compose/config"
)

// TestNewLoggerTraceIDs: the process logger, in either format, stamps a
// line logged with a span's context with its ids, and only that line.
func TestNewLoggerTraceIDs(t *testing.T) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x4b, 0xf9, 1}, SpanID: trace.SpanID{0x00, 0xf0, 2}, TraceFlags: trace.FlagsSampled,
	})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			cfg := config.Default()
			cfg.LogFormat = format
			var buf bytes.Buffer
			log := newLogger(cfg, &buf).With("role", "gateway").WithGroup("g")
			log.InfoContext(ctx, "with span", "a", 1)
			log.Info("without span", "a", 1)
			got := strings.Split(strings.TrimSpace(buf.String()), "\n")
			if len(got) != 2 {
				t.Fatalf("%d lines, want 2: %q", len(got), buf.String())
			}
			if format == "json" {
				var m map[string]any
				if err := json.Unmarshal([]byte(got[0]), &m); err != nil {
					t.Fatal(err)
				}
				if m["trace_id"] != sc.TraceID().String() || m["span_id"] != sc.SpanID().String() {
					t.Errorf("line %s: want trace_id %s and span_id %s at top level", got[0], sc.TraceID(), sc.SpanID())
				}
			} else if !strings.Contains(got[0], " trace_id="+sc.TraceID().String()+" span_id="+sc.SpanID().String()+" ") {
				t.Errorf("line %q: want trace_id=%s span_id=%s at top level", got[0], sc.TraceID(), sc.SpanID())
			}
			if strings.Contains(got[1], "trace_id") || strings.Contains(got[1], "span_id") {
				t.Errorf("line without a span has ids: %q", got[1])
			}
		})
	}
}
