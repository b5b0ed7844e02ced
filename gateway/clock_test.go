package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
)

// refLeaser is a fakeLeaser whose database clock is the real one.
type refLeaser struct{ fakeLeaser }

func (*refLeaser) Now(context.Context) (time.Time, error) { return time.Now(), nil }

// TestClockCorrectedByTheDatabase: a gateway whose clock is 30 s ahead
// reads the database's time once it leased its slot, before any client;
// one half a second ahead keeps its own.
func TestClockCorrectedByTheDatabase(t *testing.T) {
	for _, tc := range []struct {
		ahead, want time.Duration // the gateway's clock, what it reads after the lease
	}{{30 * time.Second, 0}, {-30 * time.Second, 0}, {500 * time.Millisecond, 500 * time.Millisecond}} {
		ahead := tc.ahead
		g, stop, _ := runLeasedClock(t, &refLeaser{fakeLeaser{slot: 1}}, 3*time.Second, func() time.Time { return time.Now().Add(ahead) })
		eventually.True(t, gatewayWait, "the gateway to be ready", g.Ready)
		if off := time.Until(g.clock()); (off - tc.want).Abs() > 50*time.Millisecond {
			t.Errorf("clock %s ahead: reads %s ahead once leased, want %s", ahead, off.Round(time.Millisecond), tc.want)
		}
		if off := time.Until(g.baseClock()); (off - ahead).Abs() > 50*time.Millisecond {
			t.Errorf("clock %s ahead: the lease's clock reads %s ahead, want it uncorrected", ahead, off.Round(time.Millisecond))
		}
		stop()
	}
}

// TestClockSkewSteps: the estimate is the sample of the shortest round
// trip; the correction moves only by clockSkewStep or more, and not below
// clockSkewLimit.
func TestClockSkewSteps(t *testing.T) {
	var s clockSkew
	for _, step := range []struct {
		offset, rtt time.Duration
		want        time.Duration
		changed     bool
	}{
		{30 * time.Second, 10 * time.Millisecond, 30 * time.Second, true},
		{30*time.Second + 50*time.Millisecond, 5 * time.Millisecond, 30 * time.Second, false}, // moved less than a step
		{31 * time.Second, time.Millisecond, 31 * time.Second, true},
		{40 * time.Second, 100 * time.Millisecond, 31 * time.Second, false}, // a longer round trip than the best
	} {
		got, changed := s.add(clockSample{offset: step.offset, rtt: step.rtt})
		if got != step.want || changed != step.changed {
			t.Errorf("sample %s (rtt %s): correction %s changed %v, want %s %v", step.offset, step.rtt, got, changed, step.want, step.changed)
		}
	}
	var small clockSkew
	if got, changed := small.add(clockSample{offset: 900 * time.Millisecond, rtt: time.Millisecond}); got != 0 || changed {
		t.Errorf("900 ms off: correction %s changed %v, want none", got, changed)
	}
}
