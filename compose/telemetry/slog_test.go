package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// spanContext is a hand-made valid span context: no SDK needed.
func spanContext(t *testing.T) (context.Context, trace.SpanContext) {
	t.Helper()
	tid, err := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	if err != nil {
		t.Fatal(err)
	}
	sid, err := trace.SpanIDFromHex("00f067aa0ba902b7")
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	return trace.ContextWithSpanContext(context.Background(), sc), sc
}

// jsonLogger is a JSON logger at info level into buf, wrapped or not.
func jsonLogger(buf *bytes.Buffer, wrap bool) *slog.Logger {
	var h slog.Handler = slog.NewJSONHandler(buf, &slog.HandlerOptions{
		Level: slog.LevelInfo,
		// No time: the plain and wrapped outputs are compared.
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	})
	if wrap {
		h = LogHandler(h)
	}
	return slog.New(h)
}

// lines decodes the JSON lines in buf.
func lines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	dec := json.NewDecoder(buf)
	for dec.More() {
		m := map[string]any{}
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("decode %q: %v", buf.String(), err)
		}
		out = append(out, m)
	}
	return out
}

// TestLogHandlerSpanIDs: a record logged with a span context carries its
// ids at top level, whatever groups and attributes the logger has; the
// rest of the line is what the unwrapped handler writes. Without a span
// context the line is the unwrapped handler's, with no ids.
func TestLogHandlerSpanIDs(t *testing.T) {
	spanCtx, sc := spanContext(t)
	for _, tc := range []struct {
		name string
		log  func(*slog.Logger, context.Context)
	}{
		{"plain", func(l *slog.Logger, ctx context.Context) {
			l.InfoContext(ctx, "m", "a", 1)
		}},
		{"with attrs", func(l *slog.Logger, ctx context.Context) {
			l.With("role", "gateway").With("x", "y").WarnContext(ctx, "m", "a", 1)
		}},
		{"group", func(l *slog.Logger, ctx context.Context) {
			l.With("role", "gateway").WithGroup("g").InfoContext(ctx, "m", "a", 1)
		}},
		{"attrs in group", func(l *slog.Logger, ctx context.Context) {
			l.WithGroup("g").With("b", 2).InfoContext(ctx, "m", "a", 1, slog.Group("sub", "c", 3))
		}},
		{"nested groups", func(l *slog.Logger, ctx context.Context) {
			l.With("top", true).WithGroup("g").With("b", 2).WithGroup("h").With("c", 3).WithGroup("i").
				InfoContext(ctx, "m", "a", 1)
		}},
		{"empty innermost group", func(l *slog.Logger, ctx context.Context) {
			l.WithGroup("g").With("b", 2).WithGroup("h").InfoContext(ctx, "m")
		}},
		{"empty groups", func(l *slog.Logger, ctx context.Context) {
			l.WithGroup("g").WithGroup("h").InfoContext(ctx, "m")
		}},
		{"log attrs", func(l *slog.Logger, ctx context.Context) {
			l.WithGroup("g").LogAttrs(ctx, slog.LevelError, "m", slog.Int("a", 1), slog.String("s", "t"))
		}},
		{"shared parent", func(l *slog.Logger, ctx context.Context) {
			// Children of one logger do not see each other's attributes.
			p := l.WithGroup("g").With("b", 2)
			_ = p.With("c", 3)
			p.With("d", 4).InfoContext(ctx, "m")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var plainBuf, spanBuf, noSpanBuf bytes.Buffer
			tc.log(jsonLogger(&plainBuf, false), spanCtx)
			tc.log(jsonLogger(&spanBuf, true), spanCtx)
			tc.log(jsonLogger(&noSpanBuf, true), context.Background())
			plain, withSpan, noSpan := lines(t, &plainBuf), lines(t, &spanBuf), lines(t, &noSpanBuf)
			if len(plain) != 1 || len(withSpan) != 1 || len(noSpan) != 1 {
				t.Fatalf("lines: %d plain, %d with a span, %d without; want 1 each", len(plain), len(withSpan), len(noSpan))
			}
			if got, want := withSpan[0][traceIDKey], sc.TraceID().String(); got != want {
				t.Errorf("trace_id = %v, want %v at top level: %v", got, want, withSpan[0])
			}
			if got, want := withSpan[0][spanIDKey], sc.SpanID().String(); got != want {
				t.Errorf("span_id = %v, want %v at top level: %v", got, want, withSpan[0])
			}
			want := maps.Clone(plain[0])
			want[traceIDKey], want[spanIDKey] = sc.TraceID().String(), sc.SpanID().String()
			if !jsonEqual(withSpan[0], want) {
				t.Errorf("with a span:\n got %v\nwant %v", withSpan[0], want)
			}
			if !jsonEqual(noSpan[0], plain[0]) {
				t.Errorf("without a span:\n got %v\nwant %v (the unwrapped handler's)", noSpan[0], plain[0])
			}
		})
	}
}

func jsonEqual(a, b map[string]any) bool {
	ja, _ := json.Marshal(a) // maps marshal with sorted keys
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// TestLogHandlerEnabled: the wrapped handler's level decides, also for
// its children.
func TestLogHandlerEnabled(t *testing.T) {
	var buf bytes.Buffer
	l := jsonLogger(&buf, true)
	ctx, _ := spanContext(t)
	for _, l := range []*slog.Logger{l, l.With("a", 1), l.WithGroup("g")} {
		if l.Enabled(ctx, slog.LevelDebug) {
			t.Error("debug enabled on an info handler")
		}
		if !l.Enabled(ctx, slog.LevelInfo) {
			t.Error("info not enabled on an info handler")
		}
		l.DebugContext(ctx, "hidden")
	}
	if buf.Len() != 0 {
		t.Errorf("debug records written: %s", buf.String())
	}
}

// TestLogHandlerWrapsOnce: wrapping a wrapped handler adds nothing.
func TestLogHandlerWrapsOnce(t *testing.T) {
	var buf bytes.Buffer
	h := LogHandler(LogHandler(slog.NewJSONHandler(&buf, nil)))
	ctx, _ := spanContext(t)
	slog.New(h).InfoContext(ctx, "m")
	if n := bytes.Count(buf.Bytes(), []byte(`"trace_id"`)); n != 1 {
		t.Fatalf("trace_id %d times: %s", n, buf.String())
	}
}
