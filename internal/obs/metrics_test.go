package obs_test

import (
	"testing"

	"github.com/shoal-mqtt/shoal/internal/obs"
	"github.com/shoal-mqtt/shoal/internal/testutil/testmetrics"
)

// TestDrops: each cause counts into its own series, and counting
// allocates nothing.
func TestDrops(t *testing.T) {
	p, r := testmetrics.New(t, 10)
	d, err := obs.NewDrops(p.Meter.Meter(obs.Scope))
	if err != nil {
		t.Fatal(err)
	}
	d.Add(obs.DropQueueFull, 2)
	d.Add(obs.DropInboxFull, 1)
	var none *obs.Drops
	none.Add(obs.DropACL, 1) // a nil Drops counts nothing
	if n := testing.AllocsPerRun(100, func() { d.Add(obs.DropExpired, 1) }); n != 0 {
		t.Errorf("Add: %v allocations, want 0", n)
	}
	for cause, want := range map[string]float64{"queue_full": 2, "inbox_full": 1, "expired": 101} {
		if got := r.Value("shoal.messages.dropped", "cause", cause); got != want {
			t.Errorf("dropped{cause=%s} = %v, want %v", cause, got, want)
		}
	}
	if v, ok := r.Find("shoal.messages.dropped", "cause", "acl"); !ok || v.Value != 0 {
		t.Errorf("a cause never counted: %+v, %v; want a series at 0", v, ok)
	}
}

func TestTenantsLabel(t *testing.T) {
	ts := obs.NewTenants(1)
	if got := ts.Label("acme"); got != "acme" {
		t.Errorf("first tenant's label %q", got)
	}
	if got := ts.Label("globex"); got != obs.OtherTenant {
		t.Errorf("second tenant's label %q, want %q", got, obs.OtherTenant)
	}
	if got := ts.Label("acme"); got != "acme" {
		t.Errorf("first tenant's label later %q", got)
	}
}
