package topic

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// checkLevels asserts that levelHasher.next splits s like strings.Split and
// gives every level the key it has on its own, with short keys exact.
func checkLevels(t *testing.T, lh levelHasher, s string) {
	t.Helper()
	start := 0
	for i, want := range strings.Split(s, "/") {
		end, key := lh.next(s, start)
		if got := s[start:end]; got != want {
			t.Fatalf("%q: level %d = %q, want %q", s, i, got, want)
		}
		if _, alone := lh.next(want, 0); alone != key {
			t.Fatalf("%q: level %d %q has key %x in place, %x alone", s, i, want, key, alone)
		}
		if isShortKey(key) != (len(want) < 8) {
			t.Fatalf("%q: level %q: short key = %v", s, want, isShortKey(key))
		}
		if isShortKey(key) {
			var b []byte
			for k := range int(key >> 56) {
				b = append(b, byte(key>>(8*k)))
			}
			if string(b) != want {
				t.Fatalf("%q: short key %x decodes to %q, want %q", s, key, b, want)
			}
		}
		start = end + 1
	}
	if start != len(s)+1 {
		t.Fatalf("%q: levels end at %d, want %d", s, start-1, len(s))
	}
}

func TestLevelKeys(t *testing.T) {
	lh := newLevelHasher()
	var cases []string
	// Every placement of '/' in strings of up to 20 bytes, so levels of
	// every length start and end at every offset, near and far from the
	// end of the string.
	for n := range 21 {
		for _, slashAt := range []int{-1, 0, 1, 3, 6, 7, 8, 9, 15, 16, 17} {
			b := []byte(strings.Repeat("abcdefghij", 3)[:n])
			if slashAt >= 0 && slashAt < n {
				b[slashAt] = '/'
			}
			if n >= 2 {
				b[n-2] = '/'
			}
			cases = append(cases, string(b))
		}
	}
	cases = append(cases, "", "/", "//", "a//b", "\x00", "\x00/\x00\x00", "\xff\xff\xff\xff\xff\xff\xff",
		"t3/site/s25/device/d812/telemetry", "capteur/température/°C")
	for _, s := range cases {
		checkLevels(t, lh, s)
	}
	// Distinct short levels have distinct keys, including those that differ
	// only by trailing NULs.
	seen := map[uint64]string{}
	for _, l := range []string{"", "\x00", "\x00\x00", "a", "a\x00", "ab", "abcdefg", "abcdefg\x00"} {
		_, key := lh.next(l, 0)
		if prev, dup := seen[key]; dup {
			t.Errorf("levels %q and %q share key %x", prev, l, key)
		}
		seen[key] = l
	}
}

// TestChildLongKeyCollision gives several long levels the same key, as a
// 64-bit hash collision would: lookups must still tell them apart by text,
// in small and in the table, and removals must take out the right one.
func TestChildLongKeyCollision(t *testing.T) {
	lh := newLevelHasher()
	_, key := lh.next("telemetry", 0)
	var n node[string, int]
	levels := []string{"telemetry", "telemetrz", "other-long-level", "yet-another-level", "and-one-more-level"}
	nodes := map[string]*node[string, int]{}
	for i, l := range levels {
		c := &node[string, int]{level: l}
		nodes[l] = c
		n.addChild(&lh, key, c)
		for _, m := range levels[:i+1] {
			if got := n.child(&lh, key, m); got != nodes[m] {
				t.Fatalf("after adding %d children: child(%q) = %p, want %p", i+1, m, got, nodes[m])
			}
		}
		if n.child(&lh, key, "not-a-child-level") != nil {
			t.Fatalf("after adding %d children: found a level never added", i+1)
		}
	}
	for i, l := range levels {
		n.removeChild(&lh, key, nodes[l])
		if n.child(&lh, key, l) != nil {
			t.Fatalf("removed %q still found", l)
		}
		for _, m := range levels[i+1:] {
			if got := n.child(&lh, key, m); got != nodes[m] {
				t.Fatalf("after removing %q: child(%q) = %p, want %p", l, m, got, nodes[m])
			}
		}
	}
	if n.nkids != 0 || n.ext != nil {
		t.Fatalf("after removing all: nkids %d, ext %v", n.nkids, n.ext)
	}
	var empty node[string, int]
	if _, key := lh.next("", 0); empty.child(&lh, key, "") != nil {
		t.Fatal("empty node matched the empty level")
	}
}

// TestTrieCollidingSlots forces every level of a given length into the same
// home slot (s1 = 1 makes the slot the key's top bits, which hold the
// length), so child tables probe long runs and deletes shift them back.
func TestTrieCollidingSlots(t *testing.T) {
	for _, hasher := range []levelHasher{{s0: 0, s1: 1}, newLevelHasher()} {
		t.Run(fmt.Sprintf("s1=%x", hasher.s1), func(t *testing.T) {
			tr := New[string, int]()
			tr.hasher, tr.seeded = hasher, true
			rng := rand.New(rand.NewPCG(5, 6))
			m := model{}
			var filters []string
			for i := range 300 {
				filters = append(filters, fmt.Sprintf("x/%03d", i), fmt.Sprintf("x/long-level-%d/y", i), fmt.Sprintf("%03d", i))
			}
			for round := range 3 {
				for _, i := range rng.Perm(len(filters)) {
					f := filters[i]
					fk := [2]string{f, "k"}
					if _, had := m[fk]; had {
						tr.Unsubscribe(f, "k")
						delete(m, fk)
					} else {
						tr.Subscribe(f, "k", round)
						m[fk] = round
					}
					if i%37 == 0 {
						checkInvariants(t, tr)
						checkMatch(t, tr, m, filters[rng.IntN(len(filters))])
					}
				}
				checkInvariants(t, tr)
				for _, f := range filters[:30] {
					checkMatch(t, tr, m, f)
				}
			}
			for fk := range m {
				tr.Unsubscribe(fk[0], fk[1])
			}
			if n := checkInvariants(t, tr); n != 0 {
				t.Fatalf("%d nodes left", n)
			}
		})
	}
}
