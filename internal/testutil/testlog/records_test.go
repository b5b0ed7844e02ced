package testlog

import (
	"log/slog"
	"testing"
	"time"
)

// TestRecords: a record keeps the logger's attributes and its own, each
// under its groups, with values as the text handler writes them.
func TestRecords(t *testing.T) {
	recs, log := NewRecords()
	log.With("role", "gateway").WithGroup("g").With("a", 1).Debug("one", "d", time.Second, slog.Group("h", "b", true))
	log.Info("two")
	all := recs.All()
	if len(all) != 2 {
		t.Fatalf("%d records, want 2:\n%s", len(all), recs)
	}
	one := all[0]
	want := map[string]string{"role": "gateway", "g.a": "1", "g.d": "1s", "g.h.b": "true"}
	if one.Level != slog.LevelDebug || one.Message != "one" || len(one.Attrs) != len(want) {
		t.Fatalf("first record:\n%s", recs)
	}
	for k, v := range want {
		if !one.Has(k, v) {
			t.Errorf("first record has no %s=%s:\n%s", k, v, recs)
		}
	}
	if got := recs.Matching(func(r Record) bool { return r.Level >= slog.LevelInfo }); len(got) != 1 || got[0].Message != "two" || len(got[0].Attrs) != 0 {
		t.Errorf("info records: %+v", got)
	}
}
