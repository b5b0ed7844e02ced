package sessionsvc

import (
	"errors"
	"testing"

	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// held reports whether the partition holds c's session in memory.
func held(h *harness, c conn) bool {
	h.p.mu.Lock()
	defer h.p.mu.Unlock()
	_, ok := h.p.sessions[c.key()]
	return ok
}

// An ended session lives in the store alone, and comes back from it with
// its generation when its client does: memory holds the clients with a
// session, not every client ever seen.
func TestEndedSessionLivesInTheStore(t *testing.T) {
	h := newHarness(t)
	h.batch(connA.connect(true, 0, nil))
	if !held(h, connA) {
		t.Fatal("a connected client's session is not held")
	}
	checkOutputs(t, h.batch(knownOf(connA, 1, nil)), outputs(wantPresenceGone(connA)))
	if held(h, connA) {
		t.Fatal("an ended session is still held in memory")
	}
	if s, _ := LoadClient(t.Context(), h.store, 0, connA.tenant, connA.client); s == nil || s.Active || s.Generation != 1 {
		t.Fatalf("stored record of the ended session: %+v, want generation 1, not active", s)
	}

	// A restart does not load it either …
	h.restart()
	if held(h, connA) {
		t.Fatal("a restart loaded an ended session")
	}
	// … and the client's next connection continues its generation.
	lookups := h.store.lookups
	got := h.batch(connA2.connect(true, 0, nil))
	checkOutputs(t, got, outputs(wantPresence(connA2, true, false, 2), wantResult(connA2, 2)))
	if h.store.lookups != lookups+1 {
		t.Errorf("%d store reads for the returning client, want 1", h.store.lookups-lookups)
	}
	if !held(h, connA2) {
		t.Error("the resumed client's session is not held")
	}

	// A stale event of an ended session reads it and lets it go again.
	h.batch(knownOf(connA2, 2, nil))
	h.batch(connA.disconnect(1, false, nil))
	if held(h, connA) {
		t.Error("a stale Disconnect left the ended session in memory")
	}
	if s := h.session(connA); s.Generation != 2 {
		t.Errorf("generation %d after a stale Disconnect, want 2", s.Generation)
	}
}

// A client never seen is looked for once per batch, and a batch that
// cannot read the store changes nothing and writes nothing.
func TestRecallOfANewClient(t *testing.T) {
	h := newHarness(t)
	lookups := h.store.lookups
	h.batch(connA.connect(true, 0, nil), connA.disconnect(1, false, nil), connB.connect(true, 0, nil))
	if n := h.store.lookups - lookups; n != 2 {
		t.Errorf("%d store reads for two new clients in one batch, want 2", n)
	}

	h.store.failLoad = errors.New("store down")
	h.writes = nil
	next := h.next
	err := h.p.process(t.Context(), []record{{offset: next, env: decoded(t, connA2.connect(true, 0, nil))}}, h.write)
	if !errors.Is(err, h.store.failLoad) {
		t.Fatalf("process with the store down: %v, want the store's error", err)
	}
	if len(h.writes) != 0 || h.p.nextOffset() != next {
		t.Fatalf("a failed recall wrote %d outputs, next offset %d (want none, %d)", len(h.writes), h.p.nextOffset(), next)
	}
	h.store.failLoad = nil
	got := h.batch(connA2.connect(true, 0, nil))
	checkOutputs(t, got, outputs(wantPresence(connA2, true, false, 2), wantResult(connA2, 2)))
}

// A session ended while its connection could still write keeps that in
// the store: the client's next session end removes everywhere even after
// a restart forgot it.
func TestDormantSessionKeepsRemoveEverywhere(t *testing.T) {
	h := newHarness(t)
	h.batch(connA.connect(true, 0, nil))
	sess := h.session(connA)
	h.p.m.gatewayGone(connA.key(), sess, testNow, nil)
	if !sess.dormant() || !sess.RemoveEverywhere {
		t.Fatalf("gateway gone: dormant %v, remove everywhere %v; want both", sess.dormant(), sess.RemoveEverywhere)
	}
	if err := h.store.CommitSessions(t.Context(), 0, h.next-1, []*Session{sess}); err != nil {
		t.Fatal(err)
	}
	h.restart()
	h.batch(connA2.connect(true, 0, nil))
	got := h.batch(knownOf(connA2, 2, nil))
	checkOutputs(t, got, outputs(wantRemoveAll(connA2, 2), wantPresence(connA2, false, false, 2)))
}

// decoded is env as read from the log.
func decoded(t *testing.T, env *eventspb.Envelope) *eventspb.Envelope {
	t.Helper()
	b, err := env.MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	var dec eventspb.Envelope
	if err := dec.UnmarshalVT(b); err != nil {
		t.Fatal(err)
	}
	return &dec
}
