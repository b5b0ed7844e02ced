package topic

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

type testTrie = Trie[string, int]
type testEntry = Entry[string, int]

// model is the reference the trie is checked against: a plain map of
// subscriptions matched one by one with Match.
type model map[[2]string]int

func (m model) match(name string) []testEntry {
	var out []testEntry
	for fk, v := range m {
		if Match(fk[0], name) {
			out = append(out, testEntry{Key: fk[1], Val: v})
		}
	}
	return out
}

func sortEntries(es []testEntry) []testEntry {
	slices.SortFunc(es, func(a, b testEntry) int {
		return cmp.Or(strings.Compare(a.Key, b.Key), cmp.Compare(a.Val, b.Val))
	})
	return es
}

// checkMatch asserts that tr.Match(name) returns exactly m.match(name).
func checkMatch(t *testing.T, tr *testTrie, m model, name string) {
	t.Helper()
	got := sortEntries(tr.Match(name, nil))
	want := sortEntries(m.match(name))
	if !slices.Equal(got, want) {
		t.Fatalf("Match(%q):\n got  %v\n want %v", name, got, want)
	}
}

// checkInvariants walks the trie's nodes and verifies the structure: parent
// links, no empty node below the root, entry indexes in step, and the node
// and entry counters. It returns the number of nodes below the root.
func checkInvariants(t *testing.T, tr *testTrie) int {
	t.Helper()
	tr.mu.RLock()
	defer tr.mu.RUnlock()
	nodes, entries := 0, 0
	var visit func(n *node[string, int])
	visit = func(n *node[string, int]) {
		entries += len(n.entries)
		if n != &tr.root {
			nodes++
			if n.empty() {
				t.Errorf("empty node %q not pruned", n.level)
			}
		}
		var index map[string]int
		if n.ext != nil {
			index = n.ext.index
			if n.ext.kids == nil && index == nil {
				t.Errorf("node %q: empty ext kept", n.level)
			}
		}
		if index != nil {
			if len(index) != len(n.entries) {
				t.Errorf("node %q: index has %d keys, entries %d", n.level, len(index), len(n.entries))
			}
			for k, i := range index {
				if i >= len(n.entries) || n.entries[i].Key != k {
					t.Errorf("node %q: index[%q] = %d is stale", n.level, k, i)
				}
			}
		} else if len(n.entries) > indexAt {
			t.Errorf("node %q: %d entries without an index", n.level, len(n.entries))
		}
		if (len(n.entries) == 1) != (cap(n.entries) == 1 && &n.entries[0] == &n.one[0]) {
			t.Errorf("node %q: %d entries, inline = %v", n.level, len(n.entries), cap(n.entries) == 1)
		}
		if len(n.entries) != 1 && n.one[0] != (testEntry{}) {
			t.Errorf("node %q: stale inline entry %v", n.level, n.one[0])
		}
		seen := map[string]bool{}
		for _, e := range n.entries {
			if seen[e.Key] {
				t.Errorf("node %q: key %q twice", n.level, e.Key)
			}
			seen[e.Key] = true
		}
		table := n.table()
		if table != nil && (n.small[0].n != nil || n.small[1].n != nil) {
			t.Errorf("node %q: children both in small and in the table", n.level)
		}
		if table != nil && n.nkids <= 1 {
			t.Errorf("node %q: table kept for %d children", n.level, n.nkids)
		}
		if len(table) > 0 && int(n.nkids)*2 > len(table) {
			t.Errorf("node %q: child table %d/%d over half full", n.level, n.nkids, len(table))
		}
		kids := 0
		for i, k := range append(n.small[:], table...) {
			if k.n == nil {
				continue
			}
			kids++
			c := k.n
			if _, key := tr.hasher.next(c.level, 0); key != k.key {
				t.Errorf("child %q of %q: slot key %x, level has %x", c.level, n.level, k.key, key)
			}
			if c.level == "+" || c.level == "#" {
				t.Errorf("wildcard %q of %q among the literal children", c.level, n.level)
			}
			if got := n.child(&tr.hasher, k.key, c.level); got != c {
				t.Errorf("child %q of %q in slot %d: lookup finds %p, want %p", c.level, n.level, i, got, c)
			}
			visit(c)
		}
		if kids != int(n.nkids) {
			t.Errorf("node %q: nkids = %d, found %d", n.level, n.nkids, kids)
		}
		if n.plus != nil {
			if n.plus.level != "+" {
				t.Errorf("'+' child of %q has level %q", n.level, n.plus.level)
			}
			visit(n.plus)
		}
		if n.hash != nil {
			if n.hash.level != "#" || n.hash.nkids != 0 || n.hash.plus != nil || n.hash.hash != nil {
				t.Errorf("'#' child of %q is not a leaf", n.level)
			}
			visit(n.hash)
		}
	}
	visit(&tr.root)
	if nodes != tr.nodes {
		t.Errorf("node counter %d, walked %d", tr.nodes, nodes)
	}
	if entries != tr.len {
		t.Errorf("entry counter %d, walked %d", tr.len, entries)
	}
	return nodes
}

func TestTrieZeroValue(t *testing.T) {
	var tr testTrie
	if got := tr.Match("a", nil); len(got) != 0 {
		t.Fatalf("empty trie matched %v", got)
	}
	if tr.Unsubscribe("a", "k") {
		t.Fatal("Unsubscribe on empty trie reported a removal")
	}
	if tr.Subscribe("a/#", "k", 1) {
		t.Fatal("first Subscribe reported a replacement")
	}
	checkMatch(t, &tr, model{{"a/#", "k"}: 1}, "a/b")
}

func TestTrieSubscribeReplaceUnsubscribe(t *testing.T) {
	tr := New[string, int]()
	if tr.Subscribe("sport/tennis/+", "c1", 1) {
		t.Fatal("new subscription reported replaced")
	}
	if tr.Subscribe("sport/tennis/+", "c2", 2) {
		t.Fatal("second key reported replaced")
	}
	if !tr.Subscribe("sport/tennis/+", "c1", 3) {
		t.Fatal("same (filter, key) not reported replaced")
	}
	if got := tr.Len(); got != 2 {
		t.Fatalf("Len = %d, want 2", got)
	}
	if v, ok := tr.Lookup("sport/tennis/+", "c1"); !ok || v != 3 {
		t.Fatalf("Lookup c1 = %d, %v; want 3, true", v, ok)
	}
	for _, miss := range [][2]string{{"sport/tennis/+", "c3"}, {"sport/tennis", "c1"}, {"sport/tennis/#", "c1"}, {"sport/tennis/+/x", "c1"}} {
		if _, ok := tr.Lookup(miss[0], miss[1]); ok {
			t.Errorf("Lookup(%q, %q) found an entry", miss[0], miss[1])
		}
	}
	checkMatch(t, tr, model{{"sport/tennis/+", "c1"}: 3, {"sport/tennis/+", "c2"}: 2}, "sport/tennis/player1")

	if tr.Unsubscribe("sport/tennis/+", "c3") {
		t.Error("Unsubscribe of unknown key reported removed")
	}
	if tr.Unsubscribe("sport/tennis", "c1") {
		t.Error("Unsubscribe of unknown filter prefix reported removed")
	}
	if tr.Unsubscribe("sport/tennis/+/more", "c1") {
		t.Error("Unsubscribe of unknown longer filter reported removed")
	}
	if !tr.Unsubscribe("sport/tennis/+", "c1") {
		t.Fatal("Unsubscribe c1 not removed")
	}
	if tr.Unsubscribe("sport/tennis/+", "c1") {
		t.Fatal("second Unsubscribe c1 reported removed")
	}
	checkMatch(t, tr, model{{"sport/tennis/+", "c2"}: 2}, "sport/tennis/player1")
	if got := checkInvariants(t, tr); got != 3 {
		t.Errorf("nodes = %d, want 3", got)
	}
	if !tr.Unsubscribe("sport/tennis/+", "c2") {
		t.Fatal("Unsubscribe c2 not removed")
	}
	if got := checkInvariants(t, tr); got != 0 || tr.Len() != 0 {
		t.Fatalf("after removing everything: %d nodes, Len %d; want 0, 0", got, tr.Len())
	}
	if tr.root.ext != nil || tr.root.nkids != 0 {
		t.Error("root keeps children or a table after the last child went")
	}
}

func TestTrieMatchSpec(t *testing.T) {
	for _, tt := range matchTests {
		tr := New[string, int]()
		tr.Subscribe(tt.filter, "k", 1)
		got := len(tr.Match(tt.name, nil)) == 1
		if got != tt.want {
			t.Errorf("trie with %q: Match(%q) = %v, want %v", tt.filter, tt.name, got, tt.want)
		}
	}
}

// TestTrieOverlapping checks that one key subscribed through several
// matching filters gets one entry per filter, and the '$' rule.
func TestTrieOverlapping(t *testing.T) {
	tr := New[string, int]()
	m := model{}
	for i, f := range []string{
		"sport/tennis/player1", "sport/tennis/+", "sport/+/player1", "sport/#",
		"sport/tennis/player1/#", "+/+/+", "+/tennis/#", "#", "+/#",
		"sport/tennis", "sport/+", "+/+/+/+", "$SYS/#", "$SYS/+", "+/SYS",
	} {
		for _, k := range []string{"c1", "c2"} {
			tr.Subscribe(f, k, i)
			m[[2]string{f, k}] = i
		}
	}
	checkInvariants(t, tr)
	for _, name := range []string{
		"sport/tennis/player1", "sport/tennis", "sport", "sport/", "sport/tennis/player1/ranking",
		"/", "//", "golf/tennis/x", "$SYS", "$SYS/uptime", "$SYS/a/b", "x/SYS",
	} {
		checkMatch(t, tr, m, name)
	}
	if got, want := len(tr.Match("sport/tennis/player1", nil)), 2*9; got != want {
		t.Errorf("sport/tennis/player1: %d entries, want %d", got, want)
	}
	if got := tr.Match("$SYS/uptime", nil); len(got) != 4 {
		t.Errorf("$SYS/uptime matched %v, want only $SYS/# and $SYS/+ for both keys", got)
	}
}

// TestTrieRandom compares the trie with the reference model on random
// filters and names over a small alphabet, through subscribes, replaces and
// unsubscribes, and checks that pruning leaves nothing behind.
func TestTrieRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	levels := []string{"a", "b", "", "$x", "+", "#"}
	randomFilter := func() string {
		n := 1 + rng.IntN(4)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = levels[rng.IntN(len(levels))]
			if parts[i] == "#" && i != n-1 {
				parts[i] = "+"
			}
		}
		if n == 1 && parts[0] == "" {
			return "/"
		}
		return strings.Join(parts, "/")
	}
	randomName := func() string {
		n := 1 + rng.IntN(4)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = levels[rng.IntN(4)]
		}
		return strings.Join(parts, "/")
	}
	keys := []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9", "k10", "k11"}
	rounds := 2000
	if testing.Short() {
		rounds = 300
	}
	tr := New[string, int]()
	m := model{}
	for i := range rounds {
		f, k := randomFilter(), keys[rng.IntN(len(keys))]
		fk := [2]string{f, k}
		if ValidateFilter(f) != nil {
			t.Fatalf("generator made invalid filter %q", f)
		}
		if rng.IntN(3) == 0 {
			_, had := m[fk]
			if got := tr.Unsubscribe(f, k); got != had {
				t.Fatalf("Unsubscribe(%q, %q) = %v, want %v", f, k, got, had)
			}
			delete(m, fk)
		} else {
			_, had := m[fk]
			if got := tr.Subscribe(f, k, i); got != had {
				t.Fatalf("Subscribe(%q, %q) = %v, want %v", f, k, got, had)
			}
			m[fk] = i
		}
		if tr.Len() != len(m) {
			t.Fatalf("Len = %d, want %d", tr.Len(), len(m))
		}
		checkMatch(t, tr, m, randomName())
		if i%100 == 0 {
			checkInvariants(t, tr)
		}
	}
	walked := model{}
	tr.Walk(func(filter string, e testEntry) bool {
		walked[[2]string{filter, e.Key}] = e.Val
		return true
	})
	if len(walked) != len(m) {
		t.Fatalf("Walk saw %d entries, want %d", len(walked), len(m))
	}
	for fk, v := range m {
		if walked[fk] != v {
			t.Fatalf("Walk: %q = %d, want %d", fk, walked[fk], v)
		}
	}
	for fk := range m {
		if !tr.Unsubscribe(fk[0], fk[1]) {
			t.Fatalf("Unsubscribe(%q, %q) found nothing", fk[0], fk[1])
		}
	}
	if n := checkInvariants(t, tr); n != 0 || tr.Len() != 0 {
		t.Fatalf("after unsubscribing all: %d nodes, Len %d; want 0, 0", n, tr.Len())
	}
}

// TestTrieManyKeys exercises the per-node key index: it is built past
// indexAt entries, kept in step by swap-removes, and dropped again.
func TestTrieManyKeys(t *testing.T) {
	tr := New[string, int]()
	m := model{}
	const n = 100
	for i := range n {
		for _, f := range []string{"a/b", "a/+", "#"} {
			k := fmt.Sprintf("k%d", i)
			tr.Subscribe(f, k, i)
			m[[2]string{f, k}] = i
		}
	}
	if !tr.Subscribe("a/+", "k50", -1) {
		t.Fatal("replace in indexed node not reported")
	}
	m[[2]string{"a/+", "k50"}] = -1
	checkInvariants(t, tr)
	checkMatch(t, tr, m, "a/b")
	rng := rand.New(rand.NewPCG(3, 4))
	order := rng.Perm(n)
	for j, i := range order {
		for _, f := range []string{"a/b", "a/+", "#"} {
			k := fmt.Sprintf("k%d", i)
			if !tr.Unsubscribe(f, k) {
				t.Fatalf("Unsubscribe(%q, %q) found nothing", f, k)
			}
			delete(m, [2]string{f, k})
		}
		if j%7 == 0 {
			checkInvariants(t, tr)
			checkMatch(t, tr, m, "a/b")
		}
	}
	if got := checkInvariants(t, tr); got != 0 {
		t.Fatalf("%d nodes left, want 0", got)
	}
}

// TestTrieDeep matches names with more levels than Match keys up front
// (cachedLevels), against filters with wildcards on both sides of that
// depth.
func TestTrieDeep(t *testing.T) {
	level := func(i int) string { return fmt.Sprintf("l%d", i) }
	name := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = level(i)
		}
		return strings.Join(parts, "/")
	}
	tr := New[string, int]()
	m := model{}
	add := func(f string) {
		tr.Subscribe(f, "k", len(m))
		m[[2]string{f, "k"}] = len(m)
	}
	for _, n := range []int{cachedLevels - 1, cachedLevels, cachedLevels + 1, 2*cachedLevels + 3} {
		full := strings.Split(name(n), "/")
		add(name(n))
		add(name(n) + "/#")
		for _, at := range []int{0, cachedLevels - 2, cachedLevels - 1, cachedLevels, cachedLevels + 1, n - 1} {
			if at < 0 || at >= n {
				continue
			}
			parts := slices.Clone(full)
			parts[at] = "+"
			add(strings.Join(parts, "/"))
			add(strings.Join(parts[:at], "/") + "/#")
			parts[n-1] = "+"
			add(strings.Join(parts, "/"))
		}
	}
	checkInvariants(t, tr)
	for n := 1; n <= 2*cachedLevels+5; n++ {
		checkMatch(t, tr, m, name(n))
		checkMatch(t, tr, m, name(n)+"/x")
		checkMatch(t, tr, m, "x/"+name(n))
	}
	for fk := range m {
		if !tr.Unsubscribe(fk[0], fk[1]) {
			t.Fatalf("Unsubscribe(%q) found nothing", fk[0])
		}
	}
	if n := checkInvariants(t, tr); n != 0 {
		t.Fatalf("%d nodes left", n)
	}
}

func TestTrieWalkStops(t *testing.T) {
	tr := New[string, int]()
	for i := range 10 {
		tr.Subscribe(fmt.Sprintf("a/%d", i), "k", i)
	}
	calls := 0
	tr.Walk(func(string, testEntry) bool {
		calls++
		return calls < 3
	})
	if calls != 3 {
		t.Fatalf("Walk called fn %d times after it returned false, want 3", calls)
	}
}

// TestTrieConcurrent runs Match alongside Subscribe and Unsubscribe (run it
// with -race). Entries that are never removed must be seen by every Match.
func TestTrieConcurrent(t *testing.T) {
	tr := New[string, int]()
	tr.Subscribe("dev/+/status", "stable", 0)
	tr.Subscribe("#", "stable", 1)
	const workers, ops = 4, 2000
	var wg sync.WaitGroup
	errs := make(chan error, 2*workers)
	for w := range workers {
		wg.Add(2)
		go func() { // writer: churns its own keys
			defer wg.Done()
			key := fmt.Sprintf("w%d", w)
			for i := range ops {
				f := fmt.Sprintf("dev/%d/status", i/2%50)
				if i%2 == 0 {
					tr.Subscribe(f, key, i)
				} else if !tr.Unsubscribe(f, key) {
					errs <- fmt.Errorf("writer %d: Unsubscribe(%q) found nothing", w, f)
					return
				}
			}
		}()
		go func() { // reader
			defer wg.Done()
			dst := make([]testEntry, 0, 16)
			for i := range ops {
				dst = tr.Match(fmt.Sprintf("dev/%d/status", i%50), dst[:0])
				stable := 0
				for _, e := range dst {
					if e.Key == "stable" {
						stable++
					}
				}
				if stable != 2 {
					errs <- fmt.Errorf("reader %d: Match saw %d stable entries in %v, want 2", w, stable, dst)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := tr.Len(); got != 2 {
		t.Errorf("Len = %d after balanced churn, want 2", got)
	}
	tr.Unsubscribe("dev/+/status", "stable")
	tr.Unsubscribe("#", "stable")
	if n := checkInvariants(t, tr); n != 0 {
		t.Errorf("%d nodes left, want 0", n)
	}
}

func TestTrieMatchAllocs(t *testing.T) {
	tr := New[string, int]()
	for _, f := range []string{
		"t1/site/s1/device/d1/telemetry", "t1/site/s1/device/+/telemetry",
		"+/site/s1/device/d1/telemetry", "t1/site/s1/#", "#", "$SYS/#",
	} {
		tr.Subscribe(f, "k", 1)
	}
	deep := strings.Repeat("a/", 2*cachedLevels) + "b"
	tr.Subscribe(deep, "k", 1)
	tr.Subscribe(strings.Repeat("+/", 2*cachedLevels)+"#", "k", 1)
	dst := make([]testEntry, 0, 16)
	for _, name := range []string{"t1/site/s1/device/d1/telemetry", "$SYS/x", "nomatch/at/all", deep} {
		n := testing.AllocsPerRun(100, func() { dst = tr.Match(name, dst[:0]) })
		if n != 0 {
			t.Errorf("Match(%q): %v allocs per run, want 0", name, n)
		}
	}
	if got := len(tr.Match("t1/site/s1/device/d1/telemetry", nil)); got != 5 {
		t.Errorf("matched %d entries, want 5", got)
	}
}

// TestNodeLayout guards the layout node's comment promises: with a string
// key and a byte value, a node is 128 bytes and the fields Match reads at a
// leaf start at byte 64, so each group is one cache line.
func TestNodeLayout(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("layout is tuned for 64-bit platforms")
	}
	var n node[string, uint8]
	if got := unsafe.Sizeof(n); got != 128 {
		t.Errorf("node is %d bytes, want 128", got)
	}
	if got := unsafe.Offsetof(n.entries); got != 64 {
		t.Errorf("entries at byte %d, want 64", got)
	}
}
