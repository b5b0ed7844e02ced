package sessionsvc

import (
	"fmt"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

func TestExpiredSessionDoesNotResume(t *testing.T) {
	h := newHarness(t)
	h.batch(connA.connect(false, 10, nil))
	h.batch(connA.disconnect(1, false, nil))
	// The connect comes 10 s later: its own time decides (the machine's
	// clock, which stamps the outputs, does not).
	h.m.now = func() time.Time { return testNow.Add(10 * time.Second) }
	late := connA2.connect(false, 10, nil)
	late.TimestampUs = testNow.Add(10 * time.Second).UnixMicro()
	got := h.batch(late)
	for i := range got { // the outputs carry the later time
		got[i].env.TimestampUs = testNow.UnixMicro()
	}
	checkOutputs(t, got, outputs(wantRemoveAll(connA, 1), wantPresence(connA2, true, true, 2), wantResult(connA2, 2)))
}

func TestTickExpiresSessions(t *testing.T) {
	h := newHarness(t)
	h.batch(connA.connect(false, 10, nil), connB.connect(false, kafka.SessionExpiryNever, nil))
	h.batch(connA.disconnect(1, false, nil), connB.disconnect(1, false, nil))
	tick := func(at time.Time) *eventspb.Envelope {
		return &eventspb.Envelope{TimestampUs: at.UnixMicro(), Event: &eventspb.Envelope_SessionTick{SessionTick: &eventspb.SessionTick{}}}
	}
	if got := h.batch(tick(testNow.Add(9 * time.Second))); len(got) != 0 {
		t.Fatalf("tick before the expiry: %d outputs", len(got))
	}
	got := h.batch(tick(testNow.Add(10 * time.Second)))
	for i := range got {
		got[i].env.TimestampUs = testNow.UnixMicro()
	}
	checkOutputs(t, got, outputs(wantRemoveAll(connA, 1)))
	if s := h.session(connA); s.Active {
		t.Error("the expired session is still active")
	}
	if s := h.session(connB); !s.Active {
		t.Error("a session that never expires ended")
	}
	// A restart replays nothing twice: the tick's effect is committed.
	h.restart()
	if got := h.batch(tick(testNow.Add(20 * time.Second))); len(got) != 0 {
		t.Fatalf("a later tick after the restart: %d outputs", len(got))
	}
}

func delayedWill(delay uint32) *eventspb.Will {
	w := testWill()
	w.DelayIntervalS = delay
	return w
}

func tickAt(at time.Time) *eventspb.Envelope {
	return &eventspb.Envelope{TimestampUs: at.UnixMicro(), Event: &eventspb.Envelope_SessionTick{SessionTick: &eventspb.SessionTick{}}}
}

// atTestNow rewrites the outputs' timestamps to testNow, for outputs made
// at a tick's later time.
func atTestNow(outs []output) []output {
	for i := range outs {
		outs[i].env.TimestampUs = testNow.UnixMicro()
	}
	return outs
}

func TestWillDelay(t *testing.T) {
	t.Run("published after the delay", func(t *testing.T) {
		h := newHarness(t)
		h.batch(connA.connect(false, 60, delayedWill(5)))
		if got := h.batch(connA.disconnect(1, true, nil)); len(got) != 1 { // presence only
			t.Fatalf("disconnect with a delayed will: %d outputs, want the presence alone", len(got))
		}
		if got := h.batch(tickAt(testNow.Add(4 * time.Second))); len(got) != 0 {
			t.Fatalf("before the delay: %d outputs", len(got))
		}
		got := atTestNow(h.batch(tickAt(testNow.Add(5 * time.Second))))
		checkOutputs(t, got, outputs(wantWill(connA, delayedWill(5), 1)))
		if got := h.batch(tickAt(testNow.Add(6 * time.Second))); len(got) != 0 {
			t.Fatalf("the will was published twice: %d outputs", len(got))
		}
	})
	t.Run("cancelled by a resuming connection", func(t *testing.T) {
		h := newHarness(t)
		h.batch(connA.connect(false, 60, delayedWill(5)))
		h.batch(connA.disconnect(1, true, nil))
		h.batch(connA2.connect(false, 60, nil))
		if got := h.batch(tickAt(testNow.Add(10 * time.Second))); len(got) != 0 {
			t.Fatalf("a cancelled will produced %d outputs", len(got))
		}
	})
	t.Run("published at session expiry when that comes first", func(t *testing.T) {
		h := newHarness(t)
		h.batch(connA.connect(false, 10, delayedWill(100)))
		h.batch(connA.disconnect(1, true, nil))
		got := atTestNow(h.batch(tickAt(testNow.Add(10 * time.Second))))
		checkOutputs(t, got, outputs(wantRemoveAll(connA, 1), wantWill(connA, delayedWill(100), 1)))
	})
	t.Run("published by a clean start that ends the session", func(t *testing.T) {
		h := newHarness(t)
		h.batch(connA.connect(false, 60, delayedWill(30)))
		h.batch(connA.disconnect(1, true, nil))
		got := h.batch(connA2.connect(true, 0, nil))
		checkOutputs(t, got, outputs(wantRemoveAll(connA, 1), wantPresence(connA2, true, false, 2),
			wantWill(connA, delayedWill(30), 1), wantResult(connA2, 2)))
	})
	t.Run("at once for a session that ends with its connection", func(t *testing.T) {
		h := newHarness(t)
		h.batch(connA.connect(true, 0, delayedWill(30)))
		got := h.batch(connA.disconnect(1, true, nil))
		checkOutputs(t, got, outputs(wantRemoveAll(connA, 1), wantPresence(connA, false, false, 1), wantWill(connA, delayedWill(30), 1)))
	})
	t.Run("not published on a normal DISCONNECT", func(t *testing.T) {
		h := newHarness(t)
		h.batch(connA.connect(false, 60, delayedWill(5)))
		h.batch(connA.disconnect(1, false, nil))
		if got := h.batch(tickAt(testNow.Add(10 * time.Second))); len(got) != 0 {
			t.Fatalf("a discarded will produced %d outputs", len(got))
		}
	})
}

// TestTickLeavesIdleSessionsAlone: a tick copies only the sessions it may
// change, so its cost does not grow with the idle sessions of the
// partition; the one session that expires among them still ends.
func TestTickLeavesIdleSessionsAlone(t *testing.T) {
	h := newHarness(t)
	const n = 500
	var envs []*eventspb.Envelope
	for i := range n {
		c := conn{tenant: "acme", client: fmt.Sprintf("acme-idle%d", i), gateway: "gw-1", slot: 1,
			connection: uint64(1000 + i), request: uint64(5000 + i)}
		envs = append(envs, c.connect(true, 0, nil))
	}
	h.batch(envs...)
	h.batch(connB.connect(false, 10, nil))
	h.batch(connB.disconnect(1, false, nil)) // persistent: expires 10 s after testNow
	at := testNow.Add(time.Second)
	hb := func() *eventspb.Envelope { // keeps gw-1 alive
		return &eventspb.Envelope{TimestampUs: at.UnixMicro(), Event: &eventspb.Envelope_GatewayHeartbeat{
			GatewayHeartbeat: &eventspb.GatewayHeartbeat{Slot: 1, ConnectionBase: 0}}}
	}
	h.batch(hb(), tickAt(at))
	allocs := testing.AllocsPerRun(20, func() {
		at = at.Add(100 * time.Millisecond)
		if outs := h.batch(hb(), tickAt(at)); len(outs) != 0 {
			t.Fatalf("tick at +%v: %d outputs from idle sessions", at.Sub(testNow), len(outs))
		}
	})
	if allocs > 150 {
		t.Errorf("a tick over %d idle sessions allocates %.0f times, want it independent of them", n, allocs)
	}
	got := h.batch(tickAt(testNow.Add(20 * time.Second)))
	var ended bool
	for _, o := range got {
		if o.key != nil && string(o.key) == "acme/acme-dev2" {
			ended = true
		}
	}
	if !ended {
		t.Fatalf("the expired session did not end at the tick: %d outputs", len(got))
	}
}
