package routersvc_test

import (
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/internal/testutil/testmetrics"
	routersvc "github.com/shoal-mqtt/shoal/router-svc"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// TestRouterMetrics: a routed publish records the subscriptions it
// matched and the records made for it (0 when nothing matched); an
// expired one counts as dropped; other records record nothing.
func TestRouterMetrics(t *testing.T) {
	p, r := testmetrics.New(t, 10)
	m, err := routersvc.NewMetrics(p)
	if err != nil {
		t.Fatal(err)
	}
	presence := routersvc.NewPresence()
	s := routersvc.NewShard(0, presence, func() time.Time { return t0 })
	s.SetMetrics(m)
	out := routersvc.NewOutput()
	apply := func(rec *eventspb.Envelope) {
		t.Helper()
		out.Reset()
		mustApply(t, s, rec, out)
		m.Routed(s, len(out.Deliveries))
	}
	for _, c := range []string{"c1", "c2"} {
		presence.Update("t", c, &eventspb.Presence{Online: true, Route: route(c)})
	}
	apply(add("t", "c1", "a/#"))
	apply(add("t", "c2", "a/b"))
	apply(pub("t", "p", "a/b"))                                            // 2 matches, 1 delivery (one slot)
	apply(pub("t", "p", "z"))                                              // none
	apply(pub("u", "p", "a/b"))                                            // a tenant without subscriptions
	apply(pub("t", "p", "a/b", expires(t0.Add(-time.Second).UnixMilli()))) // expired
	for name, want := range map[string]testmetrics.Point{
		"shoal.router.matches": {Count: 3, Value: 2},
		"shoal.router.fanout":  {Count: 3, Value: 1},
	} {
		if got, _ := r.Find(name); got.Count != want.Count || got.Value != want.Value {
			t.Errorf("%s: %d samples summing to %v, want %d summing to %v", name, got.Count, got.Value, want.Count, want.Value)
		}
	}
	if got := r.Value("shoal.messages.dropped", "cause", "expired"); got != 1 {
		t.Errorf("dropped{cause=expired} = %v, want 1", got)
	}
}

// TestRouterRetainedGauge: the retained messages held are counted per
// tenant as they are stored and deleted, those of a shard loaded from the
// store when the router takes it, and uncounted when it drops it; tenants
// beyond the label cap share tenant="_other".
func TestRouterRetainedGauge(t *testing.T) {
	p, r := testmetrics.New(t, 1)
	p.Tenants.Label("t") // the first tenant seen keeps its label
	m, err := routersvc.NewMetrics(p)
	if err != nil {
		t.Fatal(err)
	}
	s := routersvc.NewShard(0, routersvc.NewPresence(), func() time.Time { return t0 })
	out := routersvc.NewOutput()
	mustApply(t, s, pub("t", "p", "r/0", retain()), out) // before the router took the shard
	s.SetMetrics(m)
	for _, rec := range []*eventspb.Envelope{
		pub("t", "p", "r/1", retain()),
		pub("t", "p", "r/1", retain()), // replaces
		pub("t", "p", "r/2", retain()),
		pub("u", "p", "r/1", retain()),
		pub("v", "p", "r/1", retain()),
		pub("t", "p", "r/2", retain(), noPayload()), // deletes
	} {
		out.Reset()
		mustApply(t, s, rec, out)
	}
	gauge := func(tenant string) float64 { return r.Value("shoal.router.retained", "tenant", tenant) }
	if gauge("t") != 2 || gauge("_other") != 2 || len(r.Points("shoal.router.retained")) != 2 {
		t.Errorf("retained %+v, want t 2 and _other 2", r.Points("shoal.router.retained"))
	}
	m.DropShard(s)
	if ps := r.Points("shoal.router.retained"); len(ps) != 0 {
		t.Errorf("retained after the shard was dropped: %+v", ps)
	}
}

// TestShardPublishAllocationsMeasured: matching with the router's metrics
// recording still allocates nothing.
func TestShardPublishAllocationsMeasured(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation budget: skipped with -short")
	}
	p, r := testmetrics.New(t, 10)
	m, err := routersvc.NewMetrics(p)
	if err != nil {
		t.Fatal(err)
	}
	s, out := benchShard(t, 100, true)
	s.SetMetrics(m)
	rec := pub("t", "p", "a/b/c")
	off := s.Offset()
	allocs := testing.AllocsPerRun(50, func() {
		out.Reset()
		off++
		if err := s.Apply(rec, off, out); err != nil {
			t.Fatal(err)
		}
		m.Routed(s, len(out.Deliveries))
	})
	if allocs != 0 {
		t.Errorf("a measured publish to 100 subscribers: %.1f allocations, want 0", allocs)
	}
	if n := r.Count("shoal.router.matches"); n != 51 {
		t.Errorf("%d matches samples, want 51", n)
	}
}
