package sessionsvc

import (
	"slices"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/kafka"
)

// The tick loop's schedule: a partition is woken (a SessionTick written to
// it) at its earliest pending deadline rather than at the next periodic
// tick. These tests drive it with the times of the log alone.

func TestTickDueUs(t *testing.T) {
	at := func(d time.Duration) time.Time { return testNow.Add(d) }
	us := func(d time.Duration) int64 { return at(d).UnixMicro() }
	offline := func(expiry uint32, willDue time.Duration) *Session {
		s := &Session{Active: true, ExpiryS: expiry, DisconnectedAt: testNow}
		if willDue != 0 {
			s.WillDueAt = at(willDue)
		}
		return s
	}
	for _, c := range []struct {
		name string
		s    *Session
		want int64
	}{
		{"unknown client", &Session{}, 0},
		{"online", &Session{Active: true, Online: true, ExpiryS: 60, WillDueAt: at(time.Second)}, 0},
		{"ended", &Session{ExpiryS: 60, DisconnectedAt: testNow}, 0},
		{"offline, expires", offline(10, 0), us(10 * time.Second)},
		{"offline, never expires", offline(kafka.SessionExpiryNever, 0), 0},
		{"will before the expiry", offline(5, 3*time.Second), us(3 * time.Second)},
		{"expiry before the will", offline(2, 4*time.Second), us(2 * time.Second)},
		{"will, never expires", offline(kafka.SessionExpiryNever, 3*time.Second), us(3 * time.Second)},
		{"will of an ended session", &Session{ExpiryS: 60, WillDueAt: at(time.Second)}, us(time.Second)},
		// A tick stamped with the whole microsecond before a deadline
		// between two would not publish the will: round up.
		{"deadline between two microseconds", offline(kafka.SessionExpiryNever, 3*time.Second+1500), us(3*time.Second) + 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := c.s.tickDueUs()
			if got != c.want {
				t.Fatalf("tickDueUs = %d, want %d (%+d µs)", got, c.want, got-c.want)
			}
			if got == 0 {
				return
			}
			// tickDueUs is exactly the first tick time that changes s.
			before, due := time.UnixMicro(got-1), time.UnixMicro(got)
			if delayedWillDue(c.s, before) || c.s.Expired(before) {
				t.Errorf("a tick at %d µs, before tickDueUs, changes the session", got-1)
			}
			if !delayedWillDue(c.s, due) && !c.s.Expired(due) {
				t.Errorf("a tick at tickDueUs changes nothing")
			}
		})
	}
}

// TestPartitionWake: the partition keeps its earliest pending deadline
// through disconnects, ticks, resumptions and a reload, and tells the tick
// loop when it moved sooner.
func TestPartitionWake(t *testing.T) {
	h := newHarness(t)
	woken := 0
	h.p.onWake = func() { woken++ }
	us := func(d time.Duration) int64 { return testNow.Add(d).UnixMicro() }
	expect := func(what string, want int64, wantWoken int) {
		t.Helper()
		if got := h.p.wakeAt(); got != want {
			t.Errorf("%s: wake at %d, want %d (%+v from now)", what, got, want, time.Duration(got-testNow.UnixMicro())*time.Microsecond)
		}
		if woken != wantWoken {
			t.Errorf("%s: the tick loop was woken %d times, want %d", what, woken, wantWoken)
		}
	}

	h.batch(connA.connect(false, 60, delayedWill(5)))
	expect("online", 0, 0)
	h.batch(connA.disconnect(1, true, nil))
	expect("disconnected with a will delay of 5 s", us(5*time.Second), 1)
	h.batch(tickAt(testNow.Add(4 * time.Second)))
	expect("after a tick before the delay", us(5*time.Second), 1)
	if got := h.batch(tickAt(testNow.Add(5 * time.Second))); len(got) != 1 {
		t.Fatalf("tick at the delay: %d outputs, want the will", len(got))
	}
	expect("the will published", us(60*time.Second), 1)

	// connB's session expires first: sooner, so the loop is woken.
	h.batch(connB.connect(false, 10, delayedWill(100)))
	h.batch(connB.disconnect(1, true, nil))
	expect("a session expiring in 10 s", us(10*time.Second), 2)

	h.restart()
	h.p.onWake = func() { woken++ }
	expect("reloaded", us(10*time.Second), 2)

	// Resumed: the deadline stays until a tick finds nothing due then
	// (early is harmless: the tick changes nothing).
	h.batch(connA2.connect(false, 60, nil))
	expect("connA resumed", us(10*time.Second), 2)
	h.batch(tickAt(testNow.Add(10 * time.Second)))
	expect("connB expired, connA online", 0, 2)
}

func TestDueTicks(t *testing.T) {
	const gap = 100_000 // µs
	now := testNow.UnixMicro()
	for _, c := range []struct {
		name     string
		plans    []tickPlan
		wantDue  []int32
		wantNext int64
	}{
		{"nothing pending", []tickPlan{{id: 0}, {id: 1, lastUs: now - 1}}, nil, 0},
		{"deadline ahead", []tickPlan{{id: 0, wakeUs: now + 3_000_000}}, nil, now + 3_000_000},
		{"deadline now", []tickPlan{{id: 0, wakeUs: now}}, []int32{0}, 0},
		{"deadline passed", []tickPlan{{id: 2, wakeUs: now - 5}, {id: 3, wakeUs: now + 7}}, []int32{2}, now + 7},
		{"the earliest of several", []tickPlan{{id: 0, wakeUs: now + 9}, {id: 1, wakeUs: now + 4}, {id: 2}}, nil, now + 4},
		// A tick went to the partition less than a gap ago: the next one
		// waits for the gap (deadlines close together share a tick; one
		// not consumed yet is not written again at once).
		{"deadline within the gap", []tickPlan{{id: 0, wakeUs: now - 5, lastUs: now - gap/2}}, nil, now + gap/2},
		{"deadline after the gap", []tickPlan{{id: 0, wakeUs: now, lastUs: now - gap}}, []int32{0}, 0},
		{"gap passed, deadline ahead", []tickPlan{{id: 0, wakeUs: now + 20, lastUs: now - 2*gap}}, nil, now + 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			due, next := dueTicks(now, gap, c.plans)
			if !slices.Equal(due, c.wantDue) || next != c.wantNext {
				t.Fatalf("dueTicks = %v, next %d; want %v, next %d (now %d)", due, next, c.wantDue, c.wantNext, now)
			}
		})
	}
}
