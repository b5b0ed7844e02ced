package sessionsvc

import (
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// TestReplayKeepsSessionTimes applies one log twice, by services whose
// clocks read differently (the first time live, the second a replay: a
// restart, `shoal views rebuild`), and wants the same sessions: what a
// session keeps of its events' times, and what is decided from them,
// comes from the log, not from when it was applied.
func TestReplayKeepsSessionTimes(t *testing.T) {
	log := []*eventspb.Envelope{
		connA.connect(false, 60, delayedWill(30)), // persistent, a delayed will
		connB.connect(false, 5, nil),              // persistent, expires 5 s after it ends
		inboxAppend(connA, "a/b"),
		connA.disconnect(1, true, nil),
		connB.disconnect(1, false, nil),
		inboxAppend(connA, "a/c"),
		tickAt(testNow.Add(3 * time.Second)),
		connA2.connect(false, 60, nil),        // resumes A: the delayed will is cancelled
		tickAt(testNow.Add(10 * time.Second)), // B expired
	}
	live := newHarness(t)
	live.m.now = func() time.Time { return testNow.Add(2500 * time.Millisecond) } // applied late
	replay := newHarness(t)
	replay.m.now = func() time.Time { return testNow.Add(time.Hour) } // applied much later
	for _, env := range log {
		live.batch(env)
		replay.batch(env)
	}
	for _, c := range []conn{connA, connB} {
		l, r := live.session(c), replay.session(c)
		if !l.Equal(r) {
			t.Errorf("%s: the replay keeps another session:\nlive   %+v\nreplay %+v", c.client, l, r)
		}
	}
	if b := live.session(connB); b.Active {
		t.Errorf("%s: not expired by the tick 10 s after its disconnect", connB.client)
	}
	if a := live.session(connA); !a.Online || len(a.Inbox) != 2 {
		t.Errorf("%s: online %v with %d inbox entries, want a resumed session with 2", connA.client, a.Online, len(a.Inbox))
	}
}
