package quota

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// pool is gateways whose Shared backends exchange their reports by hand,
// on one clock.
type pool struct {
	t        *testing.T
	interval time.Duration
	now      time.Time
	gws      map[string]*Shared
	quotas   map[string]*Quotas
}

func newPool(t *testing.T, cfg Config, names ...string) *pool {
	p := &pool{t: t, interval: time.Second, now: t0, gws: map[string]*Shared{}, quotas: map[string]*Quotas{}}
	for _, n := range names {
		s := NewShared(n)
		p.gws[n], p.quotas[n] = s, New(cfg, s)
	}
	return p
}

// tenant returns gateway gw's state of tenant.
func (p *pool) tenant(gw, tenant string) *Tenant { return p.quotas[gw].Tenant(tenant) }

// round makes every gateway write its interval's reports at the pool's
// clock and the others read them; it returns the reports.
func (p *pool) round(from ...string) []Report {
	var all []Report
	for _, n := range from {
		all = p.gws[n].Reports(all, p.now, p.interval, true)
	}
	p.deliver(all)
	return all
}

// deliver has every gateway read reps at the pool's clock.
func (p *pool) deliver(reps []Report) {
	for _, s := range p.gws {
		for _, r := range reps {
			s.Apply(r, p.now)
		}
	}
}

func (p *pool) admit(gw, tenant string) Refusal {
	return p.tenant(gw, tenant).Admit(p.now, false)
}

// TestSharedConnections: a tenant's connections are counted across the
// gateways from their reports; a gateway that reports fewer (or is gone,
// or went silent for three intervals) frees its connections for the
// others.
func TestSharedConnections(t *testing.T) {
	p := newPool(t, Config{Default: Limits{MaxConnections: 4}}, "a", "b")
	for _, gw := range []string{"a", "a", "b", "b"} {
		if r := p.admit(gw, "t"); r != Admitted {
			t.Fatalf("a connection on %s: %v", gw, r)
		}
	}
	// Before the reports, each gateway counts its own two.
	if s := p.tenant("a", "t").Stats(); s.Connections != 2 || s.TenantConnections != 2 {
		t.Fatalf("a before the reports: %+v", s)
	}
	reps := p.round("a", "b")
	if len(reps) != 2 || reps[0].Connections != 2 || reps[1].Connections != 2 || reps[0].Gone {
		t.Fatalf("reports %+v, want one of 2 connections from each", reps)
	}
	for _, gw := range []string{"a", "b"} {
		if s := p.tenant(gw, "t").Stats(); s.Connections != 2 || s.TenantConnections != 4 {
			t.Fatalf("%s after the reports: %+v, want 2 here and 4 in all", gw, s)
		}
		if r := p.admit(gw, "t"); r != RefusedConnections {
			t.Fatalf("a fifth connection on %s: %v, want refused by the count", gw, r)
		}
	}
	// A takeover on the same gateway is not refused.
	if r := p.tenant("a", "t").Admit(p.now, true); r != Admitted {
		t.Fatalf("a takeover at the limit: %v", r)
	}
	p.tenant("a", "t").Release()

	// a lets one go: b learns of it at a's next report.
	p.tenant("a", "t").Release()
	if r := p.admit("b", "t"); r != RefusedConnections {
		t.Fatalf("b before a's report: %v, want refused (a's report says 2)", r)
	}
	p.now = p.now.Add(p.interval)
	p.round("a")
	if r := p.admit("b", "t"); r != Admitted {
		t.Fatalf("b after a reported 1: %v, want admitted", r)
	}
	if r := p.admit("a", "t"); r != Admitted {
		t.Fatalf("a with 1 here and b's report of 2: %v, want admitted (b's third is not reported yet)", r)
	}
	p.tenant("a", "t").Release() // back to a 1, b 3

	// a goes silent: its report counts for three intervals from when it
	// was read, then b counts alone.
	p.round("b")
	for _, step := range []struct {
		after time.Duration
		total int64
	}{{2*time.Second + 999*time.Millisecond, 4}, {3 * time.Second, 3}} {
		p.now = t0.Add(time.Second).Add(step.after)
		p.gws["b"].Reports(nil, p.now, p.interval, true)
		if got := p.tenant("b", "t").Stats().TenantConnections; got != step.total {
			t.Fatalf("b %v after a's last report: total %d, want %d", step.after, got, step.total)
		}
	}

	// A Gone report frees at once.
	p.round("a") // a reports its 1 again
	if got := p.tenant("b", "t").Stats().TenantConnections; got != 4 {
		t.Fatalf("b after a reported again: %d, want 4", got)
	}
	p.deliver(p.gws["a"].Leave(nil, p.now))
	if got := p.tenant("b", "t").Stats().TenantConnections; got != 3 {
		t.Fatalf("b after a left: %d, want 3", got)
	}
}

// TestSharedReportsAge: a report found at start, older than its three
// intervals and the allowed skew, counts for nothing; a newer one counts
// for what is left of its time; one from a gateway whose clock runs
// behind by less than the skew counts its full three intervals.
func TestSharedReportsAge(t *testing.T) {
	s := NewShared("b")
	q := New(Config{Default: Limits{MaxConnections: 10}}, s)
	tn := q.Tenant("t")
	rep := func(gw string, age time.Duration) Report {
		return Report{Tenant: "t", Gateway: gw, At: t0.Add(-age), Interval: time.Second, Connections: 3}
	}
	s.Apply(rep("old", time.Hour), t0)
	s.Apply(rep("dead", 4*time.Second), t0) // 3 s + 2 s of skew: 1 s left
	s.Apply(rep("skewed", time.Second), t0) // within the skew: 3 s from now
	if got := tn.Stats().TenantConnections; got != 6 {
		t.Fatalf("total %d, want 6 (dead's and skewed's 3 each; old's not)", got)
	}
	s.Reports(nil, t0.Add(time.Second), time.Second, true)
	if got := tn.Stats().TenantConnections; got != 3 {
		t.Fatalf("a second later: total %d, want 3 (dead's expired)", got)
	}
	s.Reports(nil, t0.Add(2999*time.Millisecond), time.Second, true)
	if got := tn.Stats().TenantConnections; got != 3 {
		t.Fatalf("at +2.999s: total %d, want 3", got)
	}
	s.Reports(nil, t0.Add(3*time.Second), time.Second, true)
	if got := tn.Stats().TenantConnections; got != 0 {
		t.Fatalf("at +3s: total %d, want 0", got)
	}
	// A report with an interval of its own counts three of them.
	s.Apply(Report{Tenant: "t", Gateway: "slow", At: t0.Add(3 * time.Second), Interval: 10 * time.Second, Connections: 2}, t0.Add(3*time.Second))
	s.Reports(nil, t0.Add(32*time.Second), time.Second, true)
	if got := tn.Stats().TenantConnections; got != 2 {
		t.Fatalf("29 s after a report of a 10 s interval: total %d, want 2", got)
	}
	s.Reports(nil, t0.Add(33*time.Second), time.Second, true)
	if got := tn.Stats().TenantConnections; got != 0 {
		t.Fatalf("30 s after it: total %d, want 0", got)
	}
}

// TestSharedReportsWritten: a gateway reports the tenants it holds
// something of, once Gone for one it no longer holds, then nothing; its
// own reports of an earlier run (the same name) are answered with Gone;
// early reports come once the count moved by a step and name only the
// tenants that moved.
func TestSharedReportsWritten(t *testing.T) {
	s := NewShared("a")
	q := New(Config{Default: Limits{MaxConnections: 100}}, s)
	now := t0
	reports := func(all bool) []Report { return s.Reports(nil, now, time.Second, all) }

	// The earlier run's report of tenant "old" is answered with Gone.
	s.Apply(Report{Tenant: "old", Gateway: "a", At: now, Interval: time.Second, Connections: 7}, now)
	if r := reports(true); len(r) != 1 || r[0].Tenant != "old" || !r[0].Gone {
		t.Fatalf("after an earlier run's report: %+v, want one Gone for old", r)
	}
	if r := reports(true); len(r) != 0 {
		t.Fatalf("then: %+v, want nothing", r)
	}

	x, y := q.Tenant("x"), q.Tenant("y")
	x.Admit(now, false)
	y.Admit(now, false)
	r := reports(true)
	if len(r) != 2 || r[0].Connections != 1 || r[1].Connections != 1 || r[0].Interval != time.Second || !r[0].At.Equal(now) {
		t.Fatalf("two tenants of one connection each: %+v", r)
	}
	// One step is 100 / (10 × 1 gateway) = 10 connections.
	select {
	case <-s.Due():
		t.Fatal("an early report due after one connection of a step of 10")
	default:
	}
	for range 9 {
		x.Admit(now, false)
	}
	select {
	case <-s.Due():
		t.Fatal("an early report due after 9 connections more than reported, of a step of 10")
	default:
	}
	x.Admit(now, false)
	select {
	case <-s.Due():
	default:
		t.Fatal("no early report due after 10 connections more than reported, of a step of 10")
	}
	r = reports(false)
	if len(r) != 1 || r[0].Tenant != "x" || r[0].Connections != 11 {
		t.Fatalf("early reports %+v, want x's 11 alone", r)
	}
	if r := reports(false); len(r) != 0 {
		t.Fatalf("early reports again: %+v, want none", r)
	}
	// With a second gateway holding the tenant, the step halves.
	s.Apply(Report{Tenant: "x", Gateway: "b", At: now, Interval: time.Second, Connections: 1}, now)
	for range 5 {
		x.Release()
	}
	select {
	case <-s.Due():
	default:
		t.Fatal("no early report due after 5 releases of a step of 5")
	}
	if r := reports(false); len(r) != 1 || r[0].Connections != 6 {
		t.Fatalf("early reports %+v, want x's 6", r)
	}

	// y lets its connection go: one Gone, then nothing.
	y.Release()
	now = now.Add(time.Second)
	r = reports(true)
	if len(r) != 2 || r[0].Tenant == r[1].Tenant {
		t.Fatalf("reports %+v, want x's and y's", r)
	}
	for _, rep := range r {
		if rep.Tenant == "y" && !rep.Gone {
			t.Fatalf("y, which holds nothing: %+v, want Gone", rep)
		}
	}
	now = now.Add(time.Second)
	if r := reports(true); len(r) != 1 || r[0].Tenant != "x" {
		t.Fatalf("reports %+v, want x's alone", r)
	}
	// Leaving: x Gone.
	if r := s.Leave(nil, now); len(r) != 1 || r[0].Tenant != "x" || !r[0].Gone {
		t.Fatalf("Leave: %+v, want x Gone", r)
	}
}

// TestSharedRates: a gateway's bucket holds its share of the tenant's
// rate: all of it alone, a fair half when both want all they can get, and
// when one gateway's clients use little, that and the headroom and its
// floor, the rest going to the other.
func TestSharedRates(t *testing.T) {
	p := newPool(t, Config{Default: Limits{MessagesRate: 100}}, "a", "b")
	a, b := p.tenant("a", "t"), p.tenant("b", "t")
	if got := a.Stats().Rates[Messages]; got != 100 {
		t.Fatalf("a, before any report: rate %v, want 100", got)
	}
	// Each holds a client of the tenant (counted without a limit of
	// connections), so each reports even while its clients are idle.
	for _, tn := range []*Tenant{a, b} {
		if r := tn.Admit(p.now, false); r != Admitted {
			t.Fatalf("a connection: %v", r)
		}
	}
	// a's first report says its clients used nothing; b, not measured
	// yet, wants all it can get: all but a's floor.
	p.round("a")
	if got := b.Stats().Rates[Messages]; math.Abs(got-95) > 1e-9 {
		t.Fatalf("b, not measured, after a's idle report: rate %v, want 95", got)
	}
	// Both measured idle: half each.
	p.round("a", "b")
	if ra, rb := a.Stats().Rates[Messages], b.Stats().Rates[Messages]; math.Abs(ra-50) > 1e-9 || math.Abs(rb-50) > 1e-9 {
		t.Fatalf("both idle: %v and %v, want 50 each", ra, rb)
	}

	// Over an interval, a's clients spend its share (a reader waits), b's
	// use 10 messages.
	for range 60 {
		a.ChargePublish(p.now, 10)
	}
	for range 10 {
		b.ChargePublish(p.now, 10)
	}
	p.now = p.now.Add(time.Second)
	p.round("a", "b")
	// b needs 10 × 1.25 = 12.5; floors 5 each; the pool of 90 gives b
	// 7.5, a the rest.
	if ra, rb := a.Stats().Rates[Messages], b.Stats().Rates[Messages]; math.Abs(ra-87.5) > 1e-9 || math.Abs(rb-12.5) > 1e-9 {
		t.Fatalf("a saturated, b using 10/s: %v and %v, want 87.5 and 12.5", ra, rb)
	}

	// Both idle again: each its floor and half of what no one needs.
	p.now = p.now.Add(time.Second)
	p.round("a", "b")
	if ra, rb := a.Stats().Rates[Messages], b.Stats().Rates[Messages]; math.Abs(ra-50) > 1e-9 || math.Abs(rb-50) > 1e-9 {
		t.Fatalf("both idle: %v and %v, want 50 each", ra, rb)
	}

	// The buckets follow: a at 50/s with a burst of 50 serves 50 at
	// once, and the 51st waits 20 ms.
	for i := range 50 {
		if d := a.ChargePublish(p.now, 1); d != 0 {
			t.Fatalf("message %d of a's burst waits %v", i+1, d)
		}
	}
	if d := a.ChargePublish(p.now, 1); d != 20*time.Millisecond {
		t.Fatalf("message 51 waits %v, want 20ms (a share of 50/s)", d)
	}
}

// TestWaterfill: the shares add up to the limit, none is below its floor,
// a gateway needing less than an equal part gets its need (and its part
// of what no one needs), and equal needs get equal shares.
func TestWaterfill(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		demands []float64
		want    float64 // the first's share of 100
	}{
		{[]float64{inf}, 100},
		{[]float64{0}, 100},
		{[]float64{inf, inf}, 50},
		{[]float64{inf, inf, inf, inf}, 25},
		{[]float64{0, inf}, 5},               // the floor, 10 / 2
		{[]float64{inf, 0}, 95},              // all but the other's floor
		{[]float64{20, inf}, 20},             // its need
		{[]float64{20, 20}, 50},              // needs met, the rest shared
		{[]float64{inf, 20, 10}, 70},         // 100 − 20 − 10
		{[]float64{60, inf, inf}, 100.0 / 3}, // no one gets more than an equal part of the pool when others want all
	} {
		if got := waterfill(100, tc.demands); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("waterfill(100, %v) = %v, want %v", tc.demands, got, tc.want)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		n := 1 + rng.IntN(8)
		limit := 1 + rng.Float64()*1000
		demands := make([]float64, n)
		for i := range demands {
			switch rng.IntN(3) {
			case 0:
				demands[i] = inf
			case 1:
				demands[i] = rng.Float64() * limit / float64(n)
			default:
				demands[i] = rng.Float64() * limit
			}
		}
		var sum float64
		for i := range demands {
			rot := append(append([]float64{}, demands[i:]...), demands[:i]...)
			share := waterfill(limit, rot)
			if share < floorShare*limit/float64(n)-1e-9 {
				t.Fatalf("waterfill(%v, %v): %v, below the floor", limit, rot, share)
			}
			sum += share
		}
		if math.Abs(sum-limit) > 1e-6*limit {
			t.Fatalf("waterfill(%v, %v): shares add up to %v", limit, demands, sum)
		}
	}
}

// TestSharedAllocs: charging a shared rate allocates nothing, like the
// local one.
func TestSharedAllocs(t *testing.T) {
	tn := New(Config{Default: Limits{MessagesRate: 1e9, BytesRate: 1e12}}, NewShared("a")).Tenant("t")
	now := t0
	if n := testing.AllocsPerRun(1000, func() {
		now = now.Add(time.Microsecond)
		_ = tn.ChargePublish(now, 100)
	}); n != 0 {
		t.Fatalf("ChargePublish allocates %v times per call", n)
	}
}

// TestSharedConnectionRate: max_connection_rate is shared like the
// other rates: a gateway whose new connections were refused by its share
// reports it saturated and gets what the other does not need.
func TestSharedConnectionRate(t *testing.T) {
	p := newPool(t, Config{Default: Limits{ConnectionRate: 10}}, "a", "b")
	a, b := p.tenant("a", "t"), p.tenant("b", "t")
	p.round("a", "b") // both hold nothing yet: no reports
	refused := 0
	for range 20 {
		if a.Admit(p.now, false) == RefusedRate {
			refused++
		}
	}
	if refused != 10 {
		t.Fatalf("a, alone with a burst of 10: %d of 20 refused, want 10", refused)
	}
	if r := b.Admit(p.now, false); r != Admitted {
		t.Fatalf("b's one connection: %v", r)
	}
	p.now = p.now.Add(time.Second)
	reps := p.round("a", "b")
	if len(reps) != 2 || !reps[0].Rates[ConnectionRate].Saturated || reps[0].Rates[ConnectionRate].PerSecond != 10 ||
		reps[1].Rates[ConnectionRate].Saturated || reps[1].Rates[ConnectionRate].PerSecond != 1 {
		t.Fatalf("reports %+v, want a saturated at 10/s, b at 1/s", reps)
	}
	// b needs 1.25: its floor 0.5 and 0.75 of the pool; a the rest.
	if ra, rb := a.Stats().Rates[ConnectionRate], b.Stats().Rates[ConnectionRate]; math.Abs(ra-8.75) > 1e-9 || math.Abs(rb-1.25) > 1e-9 {
		t.Fatalf("shares %v and %v, want 8.75 and 1.25", ra, rb)
	}
}
