package telemetry

import (
	"context"
	"log/slog"
	"slices"

	"go.opentelemetry.io/otel/trace"
)

// The keys of the active span's ids in a log record.
const (
	traceIDKey = "trace_id"
	spanIDKey  = "span_id"
)

// LogHandler wraps h so that a record logged with a context holding a
// valid span context (slog.Logger's …Context methods, LogAttrs, Log)
// carries the span's trace_id and span_id, in hex, as attributes of the
// record's top level, also under a group opened with WithGroup: that is
// where a log pipeline looks for them to link the line to its trace. A
// record without one is passed to h untouched, so a process that records
// no spans pays nothing.
func LogHandler(h slog.Handler) slog.Handler {
	if lh, ok := h.(*logHandler); ok {
		return lh
	}
	return &logHandler{h: h, base: h}
}

// logHandler is LogHandler's handler. h has every WithAttrs and WithGroup
// applied and handles the records without a span. base has only the
// attributes added before the first group, and groups the groups opened
// since, outermost first, each with the attributes added inside it: a
// record with a span is rebuilt on base with the ids first and the
// groups as attributes of its own (h would put the ids in the group).
// Without groups base is h.
type logHandler struct {
	h      slog.Handler
	base   slog.Handler
	groups []logGroup
}

type logGroup struct {
	name  string
	attrs []slog.Attr
}

func (l *logHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return l.h.Enabled(ctx, level)
}

func (l *logHandler) Handle(ctx context.Context, r slog.Record) error {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return l.h.Handle(ctx, r)
	}
	nr := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	nr.AddAttrs(slog.String(traceIDKey, sc.TraceID().String()), slog.String(spanIDKey, sc.SpanID().String()))
	if len(l.groups) == 0 {
		r.Attrs(func(a slog.Attr) bool {
			nr.AddAttrs(a)
			return true
		})
		return l.h.Handle(ctx, nr)
	}
	// The record's attributes go in the innermost group, after the
	// attributes added in it; each group is an attribute of the one
	// around it, after that one's attributes. An empty group is dropped
	// by the handler, as WithGroup's would be.
	last := l.groups[len(l.groups)-1]
	inner := make([]slog.Attr, 0, len(last.attrs)+r.NumAttrs())
	inner = append(inner, last.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		inner = append(inner, a)
		return true
	})
	group := slog.Attr{Key: last.name, Value: slog.GroupValue(inner...)}
	for i := len(l.groups) - 2; i >= 0; i-- {
		g := l.groups[i]
		group = slog.Attr{Key: g.name, Value: slog.GroupValue(append(slices.Clip(g.attrs), group)...)}
	}
	nr.AddAttrs(group)
	return l.base.Handle(ctx, nr)
}

func (l *logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return l
	}
	n := &logHandler{h: l.h.WithAttrs(attrs)}
	if len(l.groups) == 0 {
		n.base = n.h
		return n
	}
	n.base = l.base
	n.groups = slices.Clone(l.groups)
	last := &n.groups[len(n.groups)-1]
	last.attrs = append(slices.Clip(last.attrs), attrs...)
	return n
}

func (l *logHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return l
	}
	return &logHandler{
		h:      l.h.WithGroup(name),
		base:   l.base,
		groups: append(slices.Clip(l.groups), logGroup{name: name}),
	}
}
