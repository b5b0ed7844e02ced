package sessionsvc

import (
	"errors"
	"strings"
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

// With session.ended_cache, the most recently ended sessions stay in
// memory too (their clients skip the store's read when they come back),
// the oldest leave first, and a load at start keeps as many.
func TestEndedCacheKeepsTheNewest(t *testing.T) {
	h := newHarness(t)
	h.m.endedPerPartition = 2
	h.restart()
	clients := []conn{connA, connB, {tenant: "acme", client: "acme-dev3", gateway: "gw-1", slot: 1, connection: 12, request: 102}}
	for _, c := range clients {
		h.batch(c.connect(true, 0, nil))
		h.batch(knownOf(c, 1, nil))
	}
	if held(h, clients[0]) || !held(h, clients[1]) || !held(h, clients[2]) {
		t.Fatalf("held %v %v %v, want the two newest ended sessions only", held(h, clients[0]), held(h, clients[1]), held(h, clients[2]))
	}
	// The second comes back and ends again: it is the newest now, and the
	// third the oldest.
	lookups := h.store.lookups
	again := clients[1]
	again.connection, again.request = 21, 201
	h.batch(again.connect(true, 0, nil))
	if h.store.lookups != lookups {
		t.Errorf("%d store reads for a client whose ended session was held, want none", h.store.lookups-lookups)
	}
	h.batch(knownOf(again, 2, nil))
	h.batch(clients[0].connect(true, 0, nil)) // read back from the store
	h.batch(knownOf(clients[0], 2, nil))
	if !held(h, clients[0]) || !held(h, clients[1]) || held(h, clients[2]) {
		t.Errorf("held %v %v %v, want the first two (the newest ended)", held(h, clients[0]), held(h, clients[1]), held(h, clients[2]))
	}
	h.restart()
	n := 0
	for _, c := range clients {
		if held(h, c) {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d ended sessions held after a restart, want 2", n)
	}
}

// localMemStore is a memStore whose reads are local, as Pebble's.
type localMemStore struct{ *memStore }

func (localMemStore) LocalReads() bool { return true }

func TestEndedCacheDefault(t *testing.T) {
	cfg := DefaultConfig()
	if got := endedCache(cfg, newMemStore()); got != DefaultEndedCache {
		t.Errorf("default with a remote store: %d, want %d", got, DefaultEndedCache)
	}
	if got := endedCache(cfg, localMemStore{newMemStore()}); got != 0 {
		t.Errorf("default with a local store: %d, want 0", got)
	}
	cfg.EndedCache = 7
	if got := endedCache(cfg, localMemStore{newMemStore()}); got != 7 {
		t.Errorf("set to 7: %d", got)
	}
	cfg.EndedCache = 10
	if m := newTestMachine().withStore(cfg, newMemStore(), 4); m.endedPerPartition != 3 || !m.filterIDs {
		t.Errorf("10 over 4 partitions, a remote store: %d each, filter %v; want 3, true", m.endedPerPartition, m.filterIDs)
	}
	if m := newTestMachine().withStore(cfg, localMemStore{newMemStore()}, 4); m.filterIDs {
		t.Error("a filter of the stored clients with a local store")
	}
	cfg.EndedCache = -2
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "session.ended_cache") {
		t.Errorf("ended_cache -2: %v, want an error naming the key", err)
	}
}
