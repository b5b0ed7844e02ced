package gateway

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// A gateway stamps absolute times that other roles compare with their own
// clocks: a message's expiry (Message.expires_at_ms, its clock plus the
// interval), the timestamps of its Connect, Disconnect and heartbeats,
// from which the session service decides a session's expiry, a will's
// delay and the gateway's liveness, and it compares others' expiries with
// its clock before it delivers. One gateway whose clock is 30 s ahead
// made its messages live 30 s longer, its clients' wills come 30 s late,
// and dropped the messages of other gateways as expired.
//
// So a gateway that leases its slot in the CQL database compares its
// clock with the database's each time it takes or renews the lease
// (clockReference: the coordinator's now(), which the database's own
// nodes keep synchronized, NTP, as Cassandra and ScyllaDB require), and
// when they differ by clockSkewLimit or more it reads its clock corrected
// by the difference: every time it stamps or compares is then the
// database's, within half the query's round trip. Below clockSkewLimit it
// reads its own clock (NTP keeps a fleet's far closer). The estimate is the
// sample of the smallest round trip among the last clockSamples; the
// correction moves only when the estimate moved by clockSkewStep, so the
// clock does not jitter by the round trips. The lease itself is timed on
// the uncorrected clock (baseClock), whose steps the correction must not
// cut short (docs/gateway.md, "Clock").

// clockReference is a SlotLeaser that also tells a clock the cluster
// shares (*cqlstore.Store: the CQL coordinator's).
type clockReference interface {
	Now(ctx context.Context) (time.Time, error)
}

const (
	clockSkewLimit = time.Second
	clockSkewStep  = 100 * time.Millisecond
	clockSamples   = 8
)

// clockSkew is the gateway's estimate of how far its clock is from the
// reference.
type clockSkew struct {
	applied atomic.Int64 // nanoseconds the clock reads ahead: subtracted from it

	mu      sync.Mutex
	samples []clockSample // the newest clockSamples
}

type clockSample struct {
	offset, rtt time.Duration
}

// correctedClock returns base corrected by s.
func (s *clockSkew) correctedClock(base func() time.Time) func() time.Time {
	return func() time.Time {
		t := base()
		if d := s.applied.Load(); d != 0 {
			t = t.Add(-time.Duration(d))
		}
		return t
	}
}

// add takes a sample and returns the correction to apply, and whether it
// changed.
func (s *clockSkew) add(sm clockSample) (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples = append(s.samples, sm)
	if len(s.samples) > clockSamples {
		s.samples = s.samples[1:]
	}
	best := s.samples[0]
	for _, x := range s.samples[1:] {
		if x.rtt < best.rtt {
			best = x
		}
	}
	want := best.offset
	if want.Abs() < clockSkewLimit {
		want = 0
	}
	cur := time.Duration(s.applied.Load())
	if (want == 0) == (cur == 0) && (want-cur).Abs() < clockSkewStep {
		return cur, false
	}
	s.applied.Store(int64(want))
	return want, true
}

// measureClock compares the gateway's clock with the reference once.
func (g *Gateway) measureClock(ctx context.Context) {
	ref, ok := g.leaser.(clockReference)
	if !ok {
		return
	}
	began, local := time.Now(), g.baseClock()
	theirs, err := ref.Now(ctx)
	if err != nil {
		g.log.Debug("read the database's clock", "err", err)
		return
	}
	rtt := time.Since(began)
	offset := local.Add(rtt / 2).Sub(theirs)
	if applied, changed := g.skew.add(clockSample{offset: offset, rtt: rtt}); changed {
		if applied == 0 {
			g.log.Info("clock agrees with the database's again: no correction", "offset", offset.Round(time.Millisecond))
		} else {
			g.log.Warn("clock differs from the database's: times the gateway stamps and compares are corrected",
				"ahead_by", applied.Round(time.Millisecond), "round_trip", rtt.Round(time.Microsecond))
		}
	}
}
