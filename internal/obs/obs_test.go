package obs

import (
	"fmt"
	"sync"
	"testing"

	"github.com/shoal-mqtt/shoal/internal/tracectx"
)

func TestTraceparentRoundTrip(t *testing.T) {
	for _, tp := range []string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
		string(tracectx.AppendNew(nil)),
	} {
		sc := SpanContext([]byte(tp))
		if !sc.IsValid() || !sc.IsRemote() {
			t.Fatalf("SpanContext(%q) = %v, want a valid remote one", tp, sc)
		}
		if got := string(AppendTraceparent(nil, sc)); got != tp {
			t.Errorf("AppendTraceparent(SpanContext(%q)) = %q", tp, got)
		}
	}
	for _, bad := range []string{"", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "garbage"} {
		if sc := SpanContext([]byte(bad)); sc.IsValid() {
			t.Errorf("SpanContext(%q) is valid", bad)
		}
		if got := AppendTraceparent(nil, SpanContext([]byte(bad))); len(got) != 0 {
			t.Errorf("AppendTraceparent of invalid = %q", got)
		}
	}
	// The sampled flag is the only one kept (others are not defined yet).
	if SpanContext([]byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03")).TraceFlags() != 1 {
		t.Error("flags 03: want sampled only")
	}
}

func TestTraceparentAllocations(t *testing.T) {
	tp := []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	buf := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() {
		buf = AppendTraceparent(buf[:0], SpanContext(tp))
	}); n != 0 {
		t.Errorf("%v allocations per round trip, want 0", n)
	}
}

func TestTenantsCap(t *testing.T) {
	ts := NewTenants(2)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() { ts.Set(fmt.Sprintf("t%d", i%4)) })
	}
	wg.Wait()
	own := 0
	for i := range 4 {
		s := ts.Set(fmt.Sprintf("t%d", i))
		v, _ := s.Value("tenant")
		if v.AsString() != OtherTenant {
			own++
		}
	}
	if own != 2 {
		t.Errorf("%d tenants have a label of their own, want 2", own)
	}
	s := NewTenants(0).Set("a")
	if v, _ := s.Value("tenant"); v.AsString() != OtherTenant {
		t.Errorf("cap 0: tenant = %q, want %q", v.AsString(), OtherTenant)
	}
}
