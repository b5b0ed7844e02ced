package gateway

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestWheel: every connection expires at the first advance to or past its
// second, never before, whether it is due this round, rounds away, or
// already past when added; removed ones never expire.
func TestWheel(t *testing.T) {
	const start = 1_000_000
	w := wheel{now: start}
	rng := rand.New(rand.NewPCG(1, 2))
	byID := map[uint64]*conn{}
	var removed []*conn
	for i := range 5000 {
		c := &conn{id: uint64(i + 1)}
		switch i % 5 {
		case 0: // past: due at the next second
			c.parking.due = start - int64(rng.IntN(10))
		case 1: // rounds away
			c.parking.due = start + int64(wheelSlots*(1+rng.IntN(3))+rng.IntN(wheelSlots))
		default:
			c.parking.due = start + 1 + int64(rng.IntN(wheelSlots))
		}
		w.add(c)
		byID[c.id] = c
		if i%7 == 0 {
			removed = append(removed, c)
		}
	}
	for _, c := range removed {
		w.remove(c)
		delete(byID, c.id)
	}
	want := map[uint64]int64{} // id → the second it is due
	for id, c := range byID {
		want[id] = c.parking.due
	}
	if len(want) == 0 {
		t.Fatal("nothing left to expire")
	}
	now := int64(start)
	var expired []*conn
	for len(want) > 0 {
		step := int64(1 + rng.IntN(3))
		if rng.IntN(50) == 0 {
			step = wheelSlots + int64(rng.IntN(wheelSlots)) // a jump over a whole round
		}
		now += step
		expired = w.advance(now, expired[:0])
		for _, c := range expired {
			due, ok := want[c.id]
			if !ok {
				t.Fatalf("connection %d expired twice, or after its removal", c.id)
			}
			if due > now {
				t.Fatalf("connection %d due at %d expired at %d", c.id, due, now)
			}
			delete(want, c.id)
		}
		for id, due := range want {
			if due <= now {
				t.Fatalf("connection %d due at %d still in the wheel at %d", id, due, now)
			}
		}
		if now > start+10*wheelSlots {
			t.Fatalf("%d connections never expired", len(want))
		}
	}
	for i := range w.slots {
		if len(w.slots[i]) != 0 {
			t.Fatalf("slot %d still holds %d connections", i, len(w.slots[i]))
		}
	}
}

// TestWheelRemoveKeepsPositions: removing from the middle of a slot moves
// the last entry into the gap, and its recorded position follows.
func TestWheelRemoveKeepsPositions(t *testing.T) {
	w := wheel{now: 100}
	cs := make([]*conn, 100)
	for i := range cs {
		cs[i] = &conn{id: uint64(i)}
		cs[i].parking.due = 110 // all in one slot
		w.add(cs[i])
	}
	for _, i := range []int{0, 50, 98, 3, 99, 17} {
		w.remove(cs[i])
	}
	s := w.slots[110&(wheelSlots-1)]
	if len(s) != 94 {
		t.Fatalf("slot holds %d, want 94", len(s))
	}
	for pos, c := range s {
		if int(c.parking.pos) != pos {
			t.Fatalf("connection %d at %d records position %d", c.id, pos, c.parking.pos)
		}
		if slices.Contains([]uint64{0, 50, 98, 3, 99, 17}, c.id) {
			t.Fatalf("removed connection %d still in the slot", c.id)
		}
	}
}
