package quota

import (
	"testing"
	"time"
)

// TestQuotasTenant: a tenant without an entry has the default limits, one
// with an entry its own; a tenant without any limit gets no state; the
// same tenant is always the same state.
func TestQuotasTenant(t *testing.T) {
	if New(Config{Tenants: map[string]Limits{"a": {}}}, nil) != nil {
		t.Fatal("quotas without any limit are not nil")
	}
	q := New(Config{
		Default: Limits{MaxConnections: 10},
		Tenants: map[string]Limits{"acme": {MaxConnections: 2}, "free": {}},
	}, nil)
	if l := q.Tenant("other").Limits(); l.MaxConnections != 10 {
		t.Errorf("a tenant without an entry: %+v, want the default", l)
	}
	if l := q.Tenant("acme").Limits(); l.MaxConnections != 2 {
		t.Errorf("acme: %+v, want its own entry", l)
	}
	if q.Tenant("free") != nil {
		t.Error("a tenant whose entry limits nothing has state")
	}
	if a1, a2 := q.Tenant("acme"), q.Tenant("acme"); a1 != a2 {
		t.Error("two states for one tenant")
	}
	n := 0
	q.Each(func(*Tenant) { n++ })
	if n != 2 {
		t.Errorf("Each saw %d tenants, want 2 (other, acme)", n)
	}
	var none *Quotas
	if none.Tenant("x") != nil {
		t.Error("nil quotas return a tenant")
	}
}

// TestAdmit: max_connections counts admitted connections until their
// release, a takeover is not refused by the count, the connection rate
// refuses what it does not hold, and a connection refused by either
// leaves the count and the rate as they were.
func TestAdmit(t *testing.T) {
	q := New(Config{Default: Limits{MaxConnections: 2, ConnectionRate: 1, ConnectionBurst: 3}}, nil)
	tn := q.Tenant("t")
	for i := range 2 {
		if r := tn.Admit(t0, false); r != Admitted {
			t.Fatalf("connection %d: %v, want admitted", i+1, r)
		}
	}
	if r := tn.Admit(t0, false); r != RefusedConnections {
		t.Fatalf("third connection: %v, want refused by the count", r)
	}
	if r := tn.Admit(t0, true); r != Admitted {
		t.Fatalf("takeover at the limit: %v, want admitted", r)
	}
	if s := tn.Stats(); s.Connections != 3 || s.RefusedConnections != 1 || s.RefusedRate != 0 {
		t.Fatalf("stats %+v, want 3 counted, 1 refused by the count", s)
	}
	tn.Release() // the taken-over connection ends
	tn.Release()
	// The burst (3) is spent: the count has room, the rate has not.
	if r := tn.Admit(t0, false); r != RefusedRate {
		t.Fatalf("fourth new connection in the same instant: %v, want refused by the rate", r)
	}
	if s := tn.Stats(); s.Connections != 1 || s.RefusedRate != 1 {
		t.Fatalf("stats %+v, want 1 counted (the refused one released), 1 refused by the rate", s)
	}
	// One second later the rate has one more; the count allows it.
	if r := tn.Admit(t0.Add(time.Second), false); r != Admitted {
		t.Fatalf("a second later: %v, want admitted", r)
	}
	if r := tn.Admit(t0.Add(time.Hour), false); r != RefusedConnections {
		t.Fatalf("at the count: %v, want refused by the count", r)
	}
	// Refused by the count, it took nothing from the rate: the burst is
	// full again an hour later, and three new connections pass it.
	tn.Release()
	tn.Release()
	for i := range 2 {
		if r := tn.Admit(t0.Add(time.Hour), false); r != Admitted {
			t.Fatalf("after the rest, connection %d: %v, want admitted", i+1, r)
		}
	}
}

// TestChargePublish: both rates are charged, the wait is the longer of
// the two, and a tenant without rates is not rated.
func TestChargePublish(t *testing.T) {
	q := New(Config{
		Default: Limits{MessagesRate: 10, BytesRate: 1000},
		Tenants: map[string]Limits{"conns": {MaxConnections: 1}},
	}, nil)
	if q.Tenant("conns").Rated() {
		t.Fatal("a tenant without rates is rated")
	}
	tn := q.Tenant("t")
	if !tn.Rated() {
		t.Fatal("a tenant with rates is not rated")
	}
	// Ten small messages: the message burst.
	for i := range 10 {
		if d := tn.ChargePublish(t0, 10); d != 0 {
			t.Fatalf("message %d of the burst waits %v", i+1, d)
		}
	}
	// The eleventh waits for the message rate (100 ms) ...
	if d := tn.ChargePublish(t0, 10); d != 100*time.Millisecond {
		t.Fatalf("eleventh message waits %v, want 100ms", d)
	}
	// ... a large twelfth for the byte rate, the longer wait: 110 bytes
	// were taken, 3000 more are 3.11 s of refill, 2.11 s beyond the
	// burst of 1000 (the message rate alone would wait 200 ms).
	if d := tn.ChargePublish(t0, 3000); d != 2110*time.Millisecond {
		t.Fatalf("a 3000-byte message waits %v, want 2.11s (the byte rate)", d)
	}
	tn.Throttled(2110 * time.Millisecond)
	if s := tn.Stats(); s.Throttles != 1 || s.Throttled != 2110*time.Millisecond {
		t.Fatalf("stats %+v, want one throttle of 2.11s", s)
	}
}

// TestChargePublishAllocs: the check of every PUBLISH allocates nothing.
func TestChargePublishAllocs(t *testing.T) {
	tn := New(Config{Default: Limits{MessagesRate: 1e9, BytesRate: 1e12}}, nil).Tenant("t")
	now := t0
	if n := testing.AllocsPerRun(1000, func() {
		now = now.Add(time.Microsecond)
		_ = tn.ChargePublish(now, 100)
	}); n != 0 {
		t.Fatalf("ChargePublish allocates %v times per call", n)
	}
}

// TestLogDue: at most one log line per interval.
func TestLogDue(t *testing.T) {
	tn := New(Config{Default: Limits{MaxConnections: 1}}, nil).Tenant("t")
	for _, step := range []struct {
		at   time.Duration
		want bool
	}{{0, true}, {time.Second, false}, {10 * time.Second, true}, {19 * time.Second, false}, {20 * time.Second, true}} {
		if got := tn.LogDue(at(step.at), 10*time.Second); got != step.want {
			t.Errorf("LogDue at +%v = %v, want %v", step.at, got, step.want)
		}
	}
}

// sharedBackend stands for a count shared by several gateways: the
// quotas of each gateway take their counters and rates from it.
type sharedBackend struct {
	conns map[string]Counter
}

func (s *sharedBackend) Connections(tenant string) Counter {
	if s.conns[tenant] == nil {
		s.conns[tenant] = Local{}.Connections(tenant)
	}
	return s.conns[tenant]
}

func (s *sharedBackend) Rate(tenant string, r Resource, perSecond float64, burst int64) Limiter {
	return Local{}.Rate(tenant, r, perSecond, burst)
}

// TestSharedBackend: with a Backend shared by two gateways' quotas, one
// tenant's connections are limited across both.
func TestSharedBackend(t *testing.T) {
	b := &sharedBackend{conns: map[string]Counter{}}
	cfg := Config{Default: Limits{MaxConnections: 3}}
	gw1, gw2 := New(cfg, b).Tenant("t"), New(cfg, b).Tenant("t")
	for i, tn := range []*Tenant{gw1, gw2, gw1} {
		if r := tn.Admit(t0, false); r != Admitted {
			t.Fatalf("connection %d: %v", i+1, r)
		}
	}
	if r := gw2.Admit(t0, false); r != RefusedConnections {
		t.Fatalf("fourth connection, on the other gateway: %v, want refused", r)
	}
}
