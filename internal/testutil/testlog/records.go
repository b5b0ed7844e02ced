package testlog

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
)

// Record is a logged record as a test looks at it: its level, message and
// attributes, those of the logger's With first, each value as its String
// and each key under its groups joined with ".", as the text handler
// writes them.
type Record struct {
	Level   slog.Level
	Message string
	Attrs   map[string]string
}

// Has reports whether r has attribute key with value.
func (r Record) Has(key, value string) bool {
	v, ok := r.Attrs[key]
	return ok && v == value
}

// Records keeps what a logger logs, for tests that assert on attributes
// rather than on text. Safe for concurrent loggers.
type Records struct {
	mu   sync.Mutex
	recs []Record
}

// NewRecords returns a Records and a logger at debug level that keeps
// every record in it.
func NewRecords() (*Records, *slog.Logger) {
	r := &Records{}
	return r, slog.New(&recordsHandler{r: r})
}

// All returns the records kept so far, in the order they were logged.
func (r *Records) All() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.recs)
}

// Matching returns the records kept so far for which match holds.
func (r *Records) Matching(match func(Record) bool) []Record {
	var out []Record
	for _, rec := range r.All() {
		if match(rec) {
			out = append(out, rec)
		}
	}
	return out
}

// recordsHandler is Records' slog.Handler: attrs are the With attributes
// already flattened, prefix the open groups.
type recordsHandler struct {
	r      *Records
	attrs  map[string]string
	prefix string
}

func (h *recordsHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *recordsHandler) Handle(_ context.Context, rec slog.Record) error {
	out := Record{Level: rec.Level, Message: rec.Message, Attrs: make(map[string]string, len(h.attrs)+rec.NumAttrs())}
	for k, v := range h.attrs {
		out.Attrs[k] = v
	}
	rec.Attrs(func(a slog.Attr) bool {
		flatten(out.Attrs, h.prefix, a)
		return true
	})
	h.r.mu.Lock()
	h.r.recs = append(h.r.recs, out)
	h.r.mu.Unlock()
	return nil
}

func (h *recordsHandler) WithAttrs(as []slog.Attr) slog.Handler {
	n := &recordsHandler{r: h.r, prefix: h.prefix, attrs: make(map[string]string, len(h.attrs)+len(as))}
	for k, v := range h.attrs {
		n.attrs[k] = v
	}
	for _, a := range as {
		flatten(n.attrs, h.prefix, a)
	}
	return n
}

func (h *recordsHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &recordsHandler{r: h.r, attrs: h.attrs, prefix: h.prefix + name + "."}
}

// flatten adds a to m under prefix, a group's attributes each under the
// group's name.
func flatten(m map[string]string, prefix string, a slog.Attr) {
	v := a.Value.Resolve()
	if v.Kind() != slog.KindGroup {
		if a.Key != "" || !a.Value.Equal(slog.Value{}) {
			m[prefix+a.Key] = v.String()
		}
		return
	}
	p := prefix
	if a.Key != "" {
		p = prefix + a.Key + "."
	}
	for _, ga := range v.Group() {
		flatten(m, p, ga)
	}
}

// String lists the records, one a line, for failure messages.
func (r *Records) String() string {
	var b strings.Builder
	for _, rec := range r.All() {
		b.WriteString(rec.Level.String() + " " + rec.Message)
		keys := make([]string, 0, len(rec.Attrs))
		for k := range rec.Attrs {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			b.WriteString(" " + k + "=" + rec.Attrs[k])
		}
		b.WriteByte('\n')
	}
	return b.String()
}
