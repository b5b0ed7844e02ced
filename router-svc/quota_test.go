package routersvc_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	routersvc "github.com/shoal-mqtt/shoal/router-svc"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// countingHandler counts the log records at warn level and above.
type countingHandler struct {
	mu   sync.Mutex
	n    int
	last slog.Record
}

func (h *countingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.n++
	h.last = r
	h.mu.Unlock()
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

func (h *countingHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// retainedWrites returns the retained topics out stores (with a payload)
// and deletes.
func retainedWrites(out *routersvc.Output) (stored, deleted []string) {
	for _, r := range out.Mutations.Retained {
		if r.Publish != nil {
			stored = append(stored, r.Key.Tenant+"/"+r.Key.Topic)
		} else {
			deleted = append(deleted, r.Key.Tenant+"/"+r.Key.Topic)
		}
	}
	return stored, deleted
}

// TestShardMaxRetained: a retained PUBLISH that would add a new retained
// topic to a tenant at its max_retained is delivered but not kept;
// replacing and deleting retained messages are always allowed, and a
// deletion makes room; each tenant has its own bound; refusals are
// counted, and logged at most once per tenant per interval.
func TestShardMaxRetained(t *testing.T) {
	clock := &testClock{now: t0}
	presence := routersvc.NewPresence()
	presence.Update("t", "c", &eventspb.Presence{Online: true, Route: route("c")})
	s := routersvc.NewShard(0, presence, clock.Now)
	h := &countingHandler{}
	q := routersvc.NewRetainedQuota(routersvc.RetainedLimits{Default: 2, Tenants: map[string]int64{"big": 0}}, 1, slog.New(h))
	s.SetRetainedQuota(q)
	out := routersvc.NewOutput()
	mustApply(t, s, add("t", "c", "#"), out)

	step := func(what string, rec *eventspb.Envelope, wantStored, wantDeleted string, wantDelivered bool) {
		t.Helper()
		out.Reset()
		mustApply(t, s, rec, out)
		stored, deleted := retainedWrites(out)
		if got := strings.Join(stored, " "); got != wantStored {
			t.Errorf("%s: stored %q, want %q", what, got, wantStored)
		}
		if got := strings.Join(deleted, " "); got != wantDeleted {
			t.Errorf("%s: deleted %q, want %q", what, got, wantDeleted)
		}
		if delivered := len(out.Deliveries) > 0; delivered != wantDelivered {
			t.Errorf("%s: delivered %v, want %v", what, delivered, wantDelivered)
		}
	}
	step("$SYS, not counted", pub("t", "", "$SYS/broker/uptime", retain()), "t/$SYS/broker/uptime", "", false)
	step("first", pub("t", "p", "r1", retain()), "t/r1", "", true)
	step("second", pub("t", "p", "r2", retain()), "t/r2", "", true)
	step("third, beyond the bound", pub("t", "p", "r3", retain()), "", "", true)
	if n := s.RetainedCount(); n != 3 {
		t.Fatalf("%d retained, want 3 ($SYS, r1, r2)", n)
	}
	step("$SYS at the bound", pub("t", "", "$SYS/broker/version", retain()), "t/$SYS/broker/version", "", false)
	if got := q.Refused()["t"]; got != 1 || h.count() != 1 {
		t.Fatalf("refused %d, logged %d; want 1, 1", got, h.count())
	}
	step("replacing at the bound", pub("t", "p", "r1", retain(), payload("new")), "t/r1", "", true)
	step("fourth, beyond the bound", pub("t", "p", "r4", retain()), "", "", true)
	if got := q.Refused()["t"]; got != 2 || h.count() != 1 {
		t.Fatalf("refused %d, logged %d; want 2, still 1 (within the interval)", got, h.count())
	}
	step("deleting", pub("t", "p", "r2", retain(), noPayload()), "", "t/r2", true)
	step("third again, after the deletion", pub("t", "p", "r3", retain()), "t/r3", "", true)
	clock.now = t0.Add(11 * time.Second)
	step("fifth, an interval later", pub("t", "p", "r5", retain()), "", "", true)
	if got := q.Refused()["t"]; got != 3 || h.count() != 2 {
		t.Fatalf("refused %d, logged %d; want 3, 2 (a new interval)", got, h.count())
	}
	// A new subscription gets what was kept: r1 (replaced), r3.
	out.Reset()
	mustApply(t, s, add("t", "c", "+"), out)
	var topics []string
	for _, d := range out.Deliveries {
		topics = append(topics, d.Envelope.GetDelivery().GetMessage().GetTopic()+"="+string(d.Envelope.GetDelivery().GetMessage().GetPayload()))
	}
	if got := strings.Join(topics, " "); got != "r1=new r3=m:r3" {
		t.Fatalf("retained sent to a new subscription: %q, want r1=new r3=m:r3", got)
	}

	// Another tenant, unbounded by its own entry.
	for _, topic := range []string{"a", "b", "c", "d"} {
		step("big "+topic, pub("big", "p", topic, retain()), "big/"+topic, "", false)
	}
	// A tenant of the default bound has a count of its own.
	step("other", pub("other", "p", "x", retain()), "other/x", "", false)
}

// TestRetainedShardLimit: each shard allows a tenant its share of the
// bound, rounded up; no bound is no bound.
func TestRetainedShardLimit(t *testing.T) {
	if routersvc.NewRetainedQuota(routersvc.RetainedLimits{Tenants: map[string]int64{"a": 0}}, 4, slog.Default()) != nil {
		t.Fatal("a quota without any bound is not nil")
	}
	q := routersvc.NewRetainedQuota(routersvc.RetainedLimits{Default: 10, Tenants: map[string]int64{"one": 1, "free": 0}}, 4, slog.Default())
	for tenant, want := range map[string]int64{"t": 3, "one": 1, "free": 0} {
		if got := q.ShardLimit(tenant); got != want {
			t.Errorf("ShardLimit(%q) = %d, want %d", tenant, got, want)
		}
	}
}
