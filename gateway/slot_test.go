package gateway

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// fakeLeaser hands out one slot and records the calls.
type fakeLeaser struct {
	mu               sync.Mutex
	slot             int32
	acquired, renews int
	released         bool
	renewErr         error
	failRenews       int // the first renewals that fail with renewErr; 0: all of them
}

func (f *fakeLeaser) AcquireSlot(_ context.Context, _ int32, _ string, _ time.Duration) (int32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acquired++
	return f.slot, nil
}

func (f *fakeLeaser) RenewSlot(context.Context, int32, string, time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.renews++
	if f.failRenews > 0 && f.renews > f.failRenews {
		return nil
	}
	return f.renewErr
}

func (f *fakeLeaser) ReleaseSlot(context.Context, int32, string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released = true
	return nil
}

func (f *fakeLeaser) counts() (int, int, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.acquired, f.renews, f.released
}

// runLeased runs a gateway with slot -1, a lease of ttl and leaser l until
// stop is called or Run returns; done receives Run's result.
func runLeased(t *testing.T, l SlotLeaser, ttl time.Duration) (g *Gateway, stop func(), done chan error) {
	return runLeasedClock(t, l, ttl, nil)
}

// runLeasedClock is runLeased with the gateway's clock. The gateway opens
// no listener and parks nothing, so that it may run in a synctest bubble.
func runLeasedClock(t *testing.T, l SlotLeaser, ttl time.Duration, clock func() time.Time) (g *Gateway, stop func(), done chan error) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.MQTTListen, cfg.WSListen, cfg.SysInterval = "127.0.0.1:0", "", 0
	cfg.Slot, cfg.SlotLease = -1, ttl
	g, err := New(cfg, newFakeLog(), slog.New(slog.NewTextHandler(io.Discard, nil)), clock, "dev")
	if err != nil {
		t.Fatal(err)
	}
	forBubble(g)
	if l != nil {
		WithSlotLeaser(l)(g)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done = make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	t.Cleanup(cancel)
	return g, cancel, done
}

// TestSlotLeasedRenewedReleased runs in a synctest bubble: the renewals,
// every third of the lease, come on the bubble's clock.
func TestSlotLeasedRenewedReleased(t *testing.T) { synctest.Test(t, testSlotLeasedRenewedReleased) }

func testSlotLeasedRenewedReleased(t *testing.T) {
	l := &fakeLeaser{slot: 3}
	g, stop, done := runLeased(t, l, 3*time.Second)
	synctest.Wait()
	if !g.Ready() {
		t.Fatal("gateway not ready")
	}
	if g.Slot() != 3 {
		t.Fatalf("slot %d, want the leased 3", g.Slot())
	}
	time.Sleep(2*time.Second + time.Millisecond) // on the bubble's clock: two renewal ticks
	synctest.Wait()
	if _, renews, _ := l.counts(); renews != 2 {
		t.Fatalf("%d renewals in 2 s of a 3 s lease, want 2", renews)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if acquired, _, released := l.counts(); acquired != 1 || !released {
		t.Fatalf("acquired %d times, released %v; want once and released", acquired, released)
	}
}

// TestSlotLeaseLostStopsGateway runs in a synctest bubble: the failed
// renewals come on the bubble's clock.
func TestSlotLeaseLostStopsGateway(t *testing.T) { synctest.Test(t, testSlotLeaseLostStopsGateway) }

func testSlotLeaseLostStopsGateway(t *testing.T) {
	l := &fakeLeaser{slot: 1, renewErr: errors.New("held by gateway-9")}
	_, _, done := runLeased(t, l, time.Second)
	start := time.Now()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "lease lost") {
			t.Fatalf("Run returned %v, want a lost lease", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a gateway that cannot renew its 1 s lease still runs after 5 s")
	}
	// The renewal at 1/3 s fails and is tried again every 1/15 s until
	// the lease's validity (0.75 s of a 1 s lease) ran out.
	valid := leaseValidity(time.Second)
	if el := time.Since(start); el < valid || el > valid+renewRetry(time.Second) {
		t.Errorf("Run returned %v after it started, want within %v of the lease's validity %v", el, renewRetry(time.Second), valid)
	}
	if _, renews, released := l.counts(); renews < 5 || released {
		t.Errorf("%d renewals, released %v; want a renewal every 1/15 s after the first failed, and no release", renews, released)
	}
}

// A database that fails renewals for half the lease (Cassandra's
// lightweight transactions stall for seconds after a replica dies) costs
// the gateway nothing: it tries again until one gets through. In a
// synctest bubble.
func TestSlotLeaseRidesOutStalledRenewals(t *testing.T) {
	synctest.Test(t, testSlotLeaseRidesOutStalledRenewals)
}

func testSlotLeaseRidesOutStalledRenewals(t *testing.T) {
	// A 3 s lease, valid 2.25 s: the renewals at 1 s, 1.2, 1.4, 1.6 and
	// 1.8 s fail; the sixth, at 2 s, gets through. The old rule (lost
	// once a failure finds the last good renewal 2/3 of the lease old)
	// stopped the gateway at 2 s.
	l := &fakeLeaser{slot: 1, renewErr: errors.New("operation timed out"), failRenews: 5}
	g, stop, done := runLeased(t, l, 3*time.Second)
	time.Sleep(6 * time.Second) // on the bubble's clock: two lease lengths
	synctest.Wait()
	select {
	case err := <-done:
		t.Fatalf("Run returned %v after renewals failed for 1 s of a 3 s lease", err)
	default:
	}
	if !g.Ready() {
		t.Fatal("gateway not ready once a renewal got through")
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, renews, released := l.counts(); renews < 8 || !released {
		t.Fatalf("%d renewals, released %v; want the 5 failed, the retries' success, renewals since, and a release", renews, released)
	}
}

func TestSlotLeaseNeedsLeaser(t *testing.T) {
	_, _, done := runLeased(t, nil, time.Second)
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "no lease store") {
			t.Fatalf("Run returned %v, want the missing lease store named", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not fail")
	}
}

func TestFreshDropsRepeatsPerPartition(t *testing.T) {
	c := &conn{}
	src := func(p int32, o int64) *eventspb.Source { return &eventspb.Source{Partition: p, Offset: o} }
	idx := func(s *eventspb.Source, i uint32) *eventspb.Source { s.Index = i; return s }
	for i, step := range []struct {
		src  *eventspb.Source
		want bool
	}{
		{src(2, 10), true}, {src(2, 10), false}, {src(2, 9), false}, {src(0, 0), true},
		{src(2, 11), true}, {src(0, 0), false}, {src(-1, 5), true},
		// Several deliveries of one record (a new subscription's retained
		// messages): new in index order, repeats when replayed.
		{idx(src(2, 12), 0), true}, {idx(src(2, 12), 1), true}, {idx(src(2, 12), 2), true},
		{idx(src(2, 12), 0), false}, {idx(src(2, 12), 2), false}, {idx(src(2, 11), 5), false},
		{src(2, 13), true},
	} {
		if got := c.freshLocked(step.src); got != step.want {
			t.Errorf("step %d: fresh(%v) = %v, want %v", i, step.src, got, step.want)
		}
	}
}
