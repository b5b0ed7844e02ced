package sessionsvc

import (
	"fmt"
	"testing"
)

// An idFilter never says no for a key it holds, says yes for a few % of
// the others, and grows in filters each twice the one before.
func TestIDFilter(t *testing.T) {
	f := newIDFilter()
	if f.mayHold(clientKey{"t", "a"}) {
		t.Fatal("an empty filter holds a key")
	}
	const n = 100_000
	for i := range n {
		f.add(clientKey{"t", fmt.Sprintf("held-%d", i)})
	}
	for i := range n {
		if k := (clientKey{"t", fmt.Sprintf("held-%d", i)}); !f.mayHold(k) {
			t.Fatalf("%v added but not held", k)
		}
	}
	if f.mayHold(clientKey{"th", "eld-1"}) && f.mayHold(clientKey{"", "theld-1"}) {
		t.Error("tenant and client run together")
	}
	wrong := 0
	for i := range n {
		if f.mayHold(clientKey{"t", fmt.Sprintf("other-%d", i)}) {
			wrong++
		}
	}
	if rate := float64(wrong) / n; rate > 0.06 {
		t.Errorf("%.1f %% of keys never added held, want a few %%", 100*rate)
	}
	var bytes, room int
	for _, b := range f.parts {
		bytes += 8 * len(b.bits)
		room += b.n
	}
	if room < n || bytes > 4*n {
		t.Errorf("%d filters, room for %d keys in %d bytes; want room for %d in under 4 bytes each", len(f.parts), room, bytes, n)
	}
	t.Logf("%d filters, %d bytes for %d keys, %.2f %% false", len(f.parts), bytes, n, 100*float64(wrong)/n)
}

// With a store whose reads are round trips, a partition reads only for
// the clients it has stored sessions of: one never seen costs no read,
// before and after a restart.
func TestStoredClientsFilter(t *testing.T) {
	h := newHarness(t)
	h.m.filterIDs = true
	h.restart()
	lookups := h.store.lookups
	h.batch(connA.connect(true, 0, nil))
	h.batch(knownOf(connA, 1, nil))
	if n := h.store.lookups - lookups; n != 0 {
		t.Errorf("%d store reads for a client never seen, want none", n)
	}
	h.restart()
	lookups = h.store.lookups
	got := h.batch(connA2.connect(true, 0, nil), connB.connect(true, 0, nil))
	checkOutputs(t, got, outputs(wantPresence(connA2, true, false, 2), wantPresence(connB, true, false, 1),
		wantResult(connA2, 2), wantResult(connB, 1)))
	if n := h.store.lookups - lookups; n != 1 {
		t.Errorf("%d store reads for a stored client and a new one, want 1", n)
	}
}
