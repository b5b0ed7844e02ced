package sessionsvc

import (
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// heartbeat is slot's gateway heartbeat of the run with connection base
// base, at.
func heartbeat(slot int32, base uint64, at time.Time) *eventspb.Envelope {
	return &eventspb.Envelope{Gateway: "gw", TimestampUs: at.UnixMicro(), Event: &eventspb.Envelope_GatewayHeartbeat{
		GatewayHeartbeat: &eventspb.GatewayHeartbeat{Slot: slot, IntervalMs: 1000, ConnectionBase: base},
	}}
}

var (
	run5 = conn{tenant: "acme", client: "acme-dev1", gateway: "gw-1", slot: 1, connection: 5<<24 | 1, request: 100}
	run6 = conn{tenant: "acme", client: "acme-dev2", gateway: "gw-1", slot: 1, connection: 6<<24 | 1, request: 101}
)

func TestGatewayRestartEndsOlderConnections(t *testing.T) {
	h := newHarness(t)
	h.batch(heartbeat(1, 5<<24, testNow), run5.connect(false, 60, testWill()))
	// The same run again: nothing happens.
	if got := h.batch(heartbeat(1, 5<<24, testNow.Add(time.Second))); len(got) != 0 {
		t.Fatalf("heartbeat of the same run: %d outputs", len(got))
	}
	// Run 6 on slot 1: run 5's connections are gone, uncleanly.
	got := h.batch(heartbeat(1, 6<<24, testNow.Add(2*time.Second)), run6.connect(true, 0, nil))
	// (One round, stage by stage: presences, then the will and the answer.)
	checkOutputs(t, got, outputs(wantGoneKick(run5), wantPresence(run5, false, true, 1), wantPresence(run6, true, false, 1),
		wantWill(run5, testWill(), 1), wantResult(run6, 1)))
	if s := h.session(run5); s.Online || !s.Active {
		t.Fatalf("after its gateway restarted: online %v active %v, want an offline persistent session", s.Online, s.Active)
	}
	if s := h.session(run6); !s.Online {
		t.Fatal("the new run's client is offline")
	}
}

// wantGoneKick is the kick of c's connection when its gateway is judged
// gone (in case it is alive after all).
func wantGoneKick(c conn) output {
	o := wantKick(c)
	o.env.GetKick().ReasonCode = 0x80
	return o
}

// ticks processes one SessionTick per second from testNow+from to
// testNow+to (seconds) and returns the second at which outputs came, with
// them (-1 and nil when none came).
func (h *harness) ticks(from, to int) (int, []output) {
	h.t.Helper()
	for sec := from; sec <= to; sec++ {
		if got := h.batch(tickAt(testNow.Add(time.Duration(sec) * time.Second))); len(got) > 0 {
			return sec, got
		}
	}
	return -1, nil
}

func TestSilentGatewayEndsConnections(t *testing.T) {
	h := newHarness(t)
	h.batch(heartbeat(1, 5<<24, testNow), run5.connect(false, 60, testWill()))
	// The first tick starts the clock (grace from it); silent for more
	// than the 10 s timeout after it, the gateway's connections end.
	at, got := h.ticks(1, 20)
	if at != 12 {
		t.Fatalf("connections ended at +%ds, want +12s (10 s after the first tick at +1s)", at)
	}
	checkOutputs(t, got, outputs(wantGoneKick(run5), wantPresence(run5, false, true, 1), wantWill(run5, testWill(), 1)))
	// A heartbeat keeps a gateway alive.
	h.batch(run5.connect(false, 60, nil))
	for sec := 21; sec <= 40; sec++ {
		h.batch(heartbeat(1, 5<<24, testNow.Add(time.Duration(sec)*time.Second)))
		if got := h.batch(tickAt(testNow.Add(time.Duration(sec) * time.Second))); len(got) != 0 {
			t.Fatalf("a live gateway's clients at +%ds: %d outputs", sec, len(got))
		}
	}
}

func TestSilentLogGivesGrace(t *testing.T) {
	h := newHarness(t)
	h.batch(heartbeat(1, 5<<24, testNow), run5.connect(false, 3600, nil), tickAt(testNow.Add(time.Second)))
	// Kafka was down for a minute: no heartbeats, and no ticks either. The
	// gap between ticks gives every gateway a new grace period.
	if at, _ := h.ticks(61, 70); at != -1 {
		t.Fatalf("connections ended at +%ds, right after the log came back", at)
	}
	// The gateway stays silent: its connections end 10 s after the grace began.
	at, got := h.ticks(71, 80)
	if at != 72 {
		t.Fatalf("connections ended at +%ds, want +72s", at)
	}
	checkOutputs(t, got, outputs(wantGoneKick(run5), wantPresence(run5, false, true, 1)))
}

func TestSilentGatewayAfterRestartGetsGrace(t *testing.T) {
	h := newHarness(t)
	h.batch(heartbeat(1, 5<<24, testNow), run5.connect(false, 3600, nil))
	h.restart() // liveness is not stored
	at, got := h.ticks(60, 80)
	if at != 71 {
		t.Fatalf("connections ended at +%ds, want +71s (grace from the first tick after the restart)", at)
	}
	checkOutputs(t, got, outputs(wantGoneKick(run5), wantPresence(run5, false, true, 1)))
}

func (c conn) abandon() *eventspb.Envelope {
	return c.env(&eventspb.Envelope{Event: &eventspb.Envelope_Disconnect{Disconnect: &eventspb.Disconnect{
		Connection: c.connection, ReasonCode: 0x88, Abandoned: true,
	}}})
}

// A gateway that gave up waiting for a Connect's answer writes an abandoned
// Disconnect right after it: the connection ends without its will, as if
// the client had sent DISCONNECT, and only while it is the client's current
// connection.
func TestAbandonedConnect(t *testing.T) {
	t.Run("non-persistent, in the Connect's batch", func(t *testing.T) {
		h := newHarness(t)
		got := h.batch(connA.connect(true, 0, testWill()), connA.abandon())
		checkOutputs(t, got, outputs(
			wantPresence(connA, true, false, 1),
			wantResult(connA, 1),
			wantRemoveAll(connA, 1),
			wantPresence(connA, false, false, 1),
		)) // no will
		if s := h.session(connA); s.Online || s.Active || s.Will != nil || s.Generation != 1 {
			t.Errorf("session after the abandoned connect: %+v", s)
		}
	})
	t.Run("persistent, in a later batch", func(t *testing.T) {
		h := newHarness(t)
		w := testWill()
		w.DelayIntervalS = 30
		h.batch(connA.connect(false, 3600, w))
		checkOutputs(t, h.batch(connA.abandon()), outputs(wantPresence(connA, false, true, 1)))
		s := h.session(connA)
		if s.Online || !s.Active || s.Will != nil || !s.WillDueAt.IsZero() || s.ExpiryS != 3600 {
			t.Errorf("persistent session after the abandoned connect: %+v", s)
		}
		// Nothing is due later either.
		if _, outs := h.ticks(1, 120); len(outs) != 0 {
			t.Errorf("ticks after the abandoned connect: outputs %v, want none", outs)
		}
		// The client's next connection resumes the session.
		res := h.batch(connA2.connect(false, 3600, nil))
		if len(res) == 0 || !res[len(res)-1].env.GetConnectResult().GetSessionPresent() {
			t.Errorf("reconnect after the abandoned connect: %v, want the session present", res)
		}
	})
	t.Run("a newer connection is never affected", func(t *testing.T) {
		h := newHarness(t)
		h.batch(connA.connect(true, 0, testWill()))
		h.batch(connA2.connect(false, 3600, testWill())) // takes over
		before := h.session(connA2)
		if got := h.batch(connA.abandon()); len(got) != 0 {
			t.Errorf("abandoned connect of a connection taken over: outputs %v, want none", got)
		}
		if after := h.session(connA2); !after.Equal(before) {
			t.Errorf("the newer connection's session changed:\n got %+v\nwant %+v", after, before)
		}
	})
	t.Run("a Connect never written or refused", func(t *testing.T) {
		h := newHarness(t)
		if got := h.batch(connA.abandon()); len(got) != 0 {
			t.Errorf("abandoned connect of an unknown client: outputs %v, want none", got)
		}
		h.batch(connA.connect(false, 3600, nil))
		h.batch(connA.disconnect(1, false, nil))
		before := h.session(connA)
		if got := h.batch(connA.abandon()); len(got) != 0 {
			t.Errorf("abandoned connect of an offline session: outputs %v, want none", got)
		}
		if after := h.session(connA); !after.Equal(before) {
			t.Errorf("the offline session changed:\n got %+v\nwant %+v", after, before)
		}
	})
}

// heartbeatAt is the heartbeat of a gateway run (connection base) whose
// marker is at marker in its slot of shoal.deliveries.
func heartbeatAt(slot int32, base uint64, marker int64, at time.Time) *eventspb.Envelope {
	env := heartbeat(slot, base, at)
	env.GetGatewayHeartbeat().MarkerOffset = marker
	return env
}

// A run of a slot's gateway that lost the slot (paused past its lease while
// another run took the slot) may write heartbeats before it notices: they
// are not a restart (the newer run's connections stay) and do not keep the
// slot alive.
func TestHeartbeatOfEarlierRunIgnored(t *testing.T) {
	h := newHarness(t)
	h.batch(heartbeatAt(1, 5<<24, 10, testNow), run5.connect(false, 60, testWill()))
	got := h.batch(heartbeatAt(1, 6<<24, 20, testNow.Add(time.Second)), run6.connect(true, 0, nil))
	if len(got) == 0 || h.session(run5).Online {
		t.Fatalf("the newer run (marker 20) did not end the older run's connection: %v", got)
	}
	if got := h.batch(heartbeatAt(1, 5<<24, 10, testNow.Add(2*time.Second))); len(got) != 0 {
		t.Fatalf("heartbeat of the earlier run: outputs %v, want none", got)
	}
	if !h.session(run6).Online {
		t.Fatal("the earlier run's heartbeat ended the newer run's connection")
	}
	// Only the earlier run keeps writing: the slot is silent for the newer
	// one, whose connection ends after the gateway timeout (10 s, counted
	// from the first tick).
	for sec := 3; sec <= 20; sec++ {
		at := testNow.Add(time.Duration(sec) * time.Second)
		got := h.batch(heartbeatAt(1, 5<<24, 10, at), tickAt(at))
		if len(got) == 0 {
			continue
		}
		if sec < 13 {
			t.Fatalf("second %d: outputs %v before the gateway timeout", sec, got)
		}
		if h.session(run6).Online {
			t.Fatalf("second %d: outputs %v, but the newer run's connection is still online", sec, got)
		}
		return
	}
	t.Fatal("the newer run's connection outlived its silent gateway")
}

// The gateway of a connection taken over is gone before that connection's
// end came (a restart on its slot, or silence): the old session's removal
// goes to every partition then, instead of waiting for the client's next
// session end, which a resumed persistent session may never have.
func TestTakenOverConnectionOfAGoneGateway(t *testing.T) {
	taker := conn{tenant: "acme", client: "acme-dev1", gateway: "gw-2", slot: 2, connection: 7<<24 | 1, request: 200}
	gone := func() []output {
		outs := wantRemoveAll(run5, 1)
		for _, o := range outs {
			o.env.Gateway = ""
		}
		return outs
	}
	t.Run("restarted", func(t *testing.T) {
		h := newHarness(t)
		h.batch(heartbeat(1, 5<<24, testNow), heartbeat(2, 7<<24, testNow), run5.connect(true, 0, nil))
		h.batch(taker.connect(true, 0, nil))
		if s := h.session(taker); s.PendingRemoval == nil {
			t.Fatal("the takeover left no removal pending")
		}
		checkOutputs(t, h.batch(heartbeat(1, 6<<24, testNow.Add(time.Second))), gone())
		if s := h.session(taker); s.PendingRemoval != nil || !s.RemoveEverywhere || !s.Online {
			t.Errorf("after the old gateway's restart: pending %v, remove everywhere %v, online %v; want nil, true, true",
				s.PendingRemoval, s.RemoveEverywhere, s.Online)
		}
	})
	t.Run("silent", func(t *testing.T) {
		h := newHarness(t)
		h.batch(heartbeat(1, 5<<24, testNow), run5.connect(true, 0, nil))
		h.batch(taker.connect(true, 0, nil))
		for sec := 1; sec <= 20; sec++ {
			at := testNow.Add(time.Duration(sec) * time.Second)
			h.batch(heartbeat(2, 7<<24, at)) // the taker's gateway lives
			if got := h.batch(tickAt(at)); len(got) > 0 {
				if sec != 12 {
					t.Errorf("the removal came at +%ds, want +12s (10 s after the first tick)", sec)
				}
				checkOutputs(t, got, gone())
				if s := h.session(taker); s.PendingRemoval != nil || !s.Online {
					t.Errorf("after the old gateway went silent: pending %v, online %v", s.PendingRemoval, s.Online)
				}
				return
			}
		}
		t.Fatal("the silent gateway's connection taken over was never removed")
	})
}

// TestIdleBatchesStoreTheOffsetSeldom: batches that change no session
// (heartbeats of a running gateway) move the partition's offset in memory
// and store it at most every offsetStoreEvery, where a batch that changes
// a session stores at once; a restart resumes from the stored offset with
// the sessions as they were (the heartbeats after it are read again).
func TestIdleBatchesStoreTheOffsetSeldom(t *testing.T) {
	h := newHarness(t)
	now := testNow
	h.m.now = func() time.Time { return now }
	h.batch(heartbeat(1, 5<<24, now), run5.connect(false, 60, nil))
	stored := func() (int, int64) {
		h.store.mu.Lock()
		defer h.store.mu.Unlock()
		return h.store.commits, h.store.parts[0].offset
	}
	commits, at := stored()
	for i := 1; i <= 4; i++ { // a second apart: within offsetStoreEvery
		now = now.Add(time.Second)
		if got := h.batch(heartbeat(1, 5<<24, now)); len(got) != 0 {
			t.Fatalf("heartbeat %d of the same run: %d outputs", i, len(got))
		}
	}
	if c, off := stored(); c != commits || off != at {
		t.Fatalf("idle heartbeats stored: %d commits (want %d), offset %d (want %d)", c, commits, off, at)
	}
	if h.p.nextOffset() != h.next {
		t.Fatalf("the partition resumes at %d, want %d: the offset did not move in memory", h.p.nextOffset(), h.next)
	}
	now = now.Add(offsetStoreEvery)
	h.batch(heartbeat(1, 5<<24, now))
	if c, off := stored(); c != commits+1 || off != h.next-1 {
		t.Fatalf("after %s: %d commits (want %d), offset %d (want %d)", offsetStoreEvery, c, commits+1, off, h.next-1)
	}
	// A change stores at once, however soon.
	now = now.Add(time.Millisecond)
	h.batch(run6.connect(true, 0, nil))
	if c, off := stored(); c != commits+2 || off != h.next-1 {
		t.Fatalf("a connect: %d commits (want %d), offset %d (want %d)", c, commits+2, off, h.next-1)
	}
	// A heartbeat left unstored, then a restart.
	now = now.Add(time.Second)
	h.batch(heartbeat(1, 5<<24, now))
	h.restart()
	if s := h.session(run5); !s.Online {
		t.Fatal("run 5's client went offline across the restart")
	}
}
