// Package trie benchmarks Shoal's subscription trie side by side with the
// topic index of mochi-mqtt (github.com/mochi-mqtt/server/v2), on the same
// subscription mix and in the same run, so that the two can be compared on
// any machine. It is a module of its own so that Shoal's go.mod does not
// depend on mochi-mqtt. Run it with
//
//	cd bench/trie && go test -run='^$' -bench=. -benchmem -count=5
//
// and compare with benchstat -col /impl.
package trie

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/shoal-mqtt/shoal/internal/mqtt/topic"
)

// The subscription mix is the one of internal/mqtt/topic/bench_test.go
// (see there for its rationale), duplicated rather than exported from the
// topic package: an IoT mix, deterministic for a given size n (number of
// entries):
//
//   - 90% concrete device filters t{T}/site/s{S}/device/d{D}/telemetry and
//     .../status, key "app{D}";
//   - 3.5% per-site status filters t{T}/site/s{S}/device/+/status;
//   - 3.5% command filters +/site/s{S}/device/d{D}/cmd on random devices;
//   - 3% per-site catch-alls t{T}/site/s{S}/#.
//
// Published names are drawn uniformly from the device topic space (45%
// telemetry, 45% status, 10% cmd); each matches a handful of entries
// whatever n is. The generator draws from its random source in the same
// order as the topic package's, so both build the same filters and names.
const (
	devicesPerSite = 32
	sitesPerTenant = 8
	numNames       = 1 << 12
	poolSize       = 8192
)

type sub struct {
	filter, key string
	qos         byte
}

type mix struct {
	subs    []sub
	devices int
	names   []string // published topic names, in random order
}

func site(d int) int   { return d / devicesPerSite }
func tenant(s int) int { return s / sitesPerTenant }

func deviceTopic(d int, kind string) string {
	s := site(d)
	return "t" + strconv.Itoa(tenant(s)) + "/site/s" + strconv.Itoa(s) + "/device/d" + strconv.Itoa(d) + "/" + kind
}

func newMix(n int) *mix {
	rng := rand.New(rand.NewPCG(uint64(n), 42))
	devices := n * 45 / 100
	sites := (devices + devicesPerSite - 1) / devicesPerSite
	subs := make([]sub, 0, n)
	for d := range devices {
		key := "app" + strconv.Itoa(d)
		subs = append(subs, sub{deviceTopic(d, "telemetry"), key, 1}, sub{deviceTopic(d, "status"), key, 1})
	}
	for i := range n * 35 / 1000 {
		s := i % sites
		subs = append(subs, sub{fmt.Sprintf("t%d/site/s%d/device/+/status", tenant(s), s), "dash" + strconv.Itoa(i), 0})
	}
	for i := range n * 35 / 1000 {
		d := rng.IntN(devices)
		subs = append(subs, sub{fmt.Sprintf("+/site/s%d/device/d%d/cmd", site(d), d), "cmd" + strconv.Itoa(i), 1})
	}
	for i := range n * 3 / 100 {
		s := i % sites
		subs = append(subs, sub{fmt.Sprintf("t%d/site/s%d/#", tenant(s), s), "arch" + strconv.Itoa(i), 1})
	}
	names := make([]string, numNames)
	for i := range names {
		kind := "telemetry"
		switch r := rng.IntN(100); {
		case r >= 90:
			kind = "cmd"
		case r >= 45:
			kind = "status"
		}
		names[i] = deviceTopic(rng.IntN(devices), kind)
	}
	return &mix{subs: subs, devices: devices, names: names}
}

// pool returns p new filters: telemetry and status filters of devices the
// mix does not have, under its existing sites, as when new devices come
// online. Subscribing one creates one or two nodes; unsubscribing it prunes
// them.
func (m *mix) pool(p int) []string {
	pool := make([]string, 0, p)
	for d := m.devices; len(pool) < p; d++ {
		s := site(d % m.devices)
		name := func(kind string) string {
			return fmt.Sprintf("t%d/site/s%d/device/d%d/%s", tenant(s), s, d, kind)
		}
		pool = append(pool, name("telemetry"), name("status"))
	}
	return pool[:p]
}

// index is what the benchmarks drive: one implementation holding one mix.
type index interface {
	subscribe(filter, key string, qos byte) (isNew bool)
	unsubscribe(filter, key string) (removed bool)
	// match finds the subscribers of name as the broker's publish path
	// does, and returns how many there are.
	match(name string) int
}

// shoalIndex is Shoal's trie, matched into a reused slice as the router
// does.
type shoalIndex struct {
	t   *topic.Trie[string, byte]
	dst []topic.Entry[string, byte]
}

func newShoal() *shoalIndex {
	return &shoalIndex{t: topic.New[string, byte](), dst: make([]topic.Entry[string, byte], 0, 64)}
}

func (x *shoalIndex) subscribe(filter, key string, qos byte) bool {
	return !x.t.Subscribe(filter, key, qos)
}

func (x *shoalIndex) unsubscribe(filter, key string) bool { return x.t.Unsubscribe(filter, key) }

func (x *shoalIndex) match(name string) int {
	x.dst = x.t.Match(name, x.dst[:0])
	return len(x.dst)
}

// mochiIndex is mochi-mqtt's TopicsIndex, used as its Server uses it:
// Subscribe and Unsubscribe with the client ID, and Subscribers, which
// gathers the matching subscriptions into fresh maps keyed by client, for
// every PUBLISH (Server.publishToSubscribers).
type mochiIndex struct {
	x *mochi.TopicsIndex
}

func newMochi() *mochiIndex { return &mochiIndex{x: mochi.NewTopicsIndex()} }

func (x *mochiIndex) subscribe(filter, key string, qos byte) bool {
	return x.x.Subscribe(key, packets.Subscription{Filter: filter, Qos: qos})
}

func (x *mochiIndex) unsubscribe(filter, key string) bool { return x.x.Unsubscribe(filter, key) }

func (x *mochiIndex) match(name string) int {
	subs := x.x.Subscribers(name)
	return len(subs.Subscriptions) + len(subs.Shared) + len(subs.InlineSubscriptions)
}

var impls = []struct {
	name string
	new  func() index
}{
	{"shoal", func() index { return newShoal() }},
	{"mochi", func() index { return newMochi() }},
}

type fixture struct {
	mix *mix
	idx index
}

// fixtures builds each (implementation, size) once per process: the 1M
// indexes take seconds to build and -count runs every benchmark several
// times. Benchmarks that change a fixture restore it before they return.
var fixtures = struct {
	sync.Mutex
	mixes map[int]*mix
	m     map[string]*fixture
}{mixes: map[int]*mix{}, m: map[string]*fixture{}}

func getFixture(tb testing.TB, impl int, n int) *fixture {
	tb.Helper()
	fixtures.Lock()
	defer fixtures.Unlock()
	id := impls[impl].name + "/" + strconv.Itoa(n)
	if fx := fixtures.m[id]; fx != nil {
		return fx
	}
	m := fixtures.mixes[n]
	if m == nil {
		m = newMix(n)
		fixtures.mixes[n] = m
	}
	idx := impls[impl].new()
	for _, s := range m.subs {
		if !idx.subscribe(s.filter, s.key, s.qos) {
			tb.Fatalf("%s: %q for %q subscribed twice", impls[impl].name, s.filter, s.key)
		}
	}
	fx := &fixture{mix: m, idx: idx}
	fixtures.m[id] = fx
	return fx
}

func size(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "M"
	case n >= 1000 && n%1000 == 0:
		return strconv.Itoa(n/1000) + "K"
	}
	return strconv.Itoa(n)
}

// TestSameMatches checks that the two implementations do the same work:
// for every published name of the 10K mix, Shoal's Match returns the same
// subscribers as mochi's Subscribers. (Each name matches each key through
// at most one filter, so Shoal's one entry per filter and mochi's one
// subscription per client coincide.)
func TestSameMatches(t *testing.T) {
	const n = 10_000
	sh := getFixture(t, 0, n)
	mo := getFixture(t, 1, n)
	total := 0
	for _, name := range sh.mix.names {
		s := sh.idx.(*shoalIndex)
		s.match(name)
		var got []string
		for _, e := range s.dst {
			got = append(got, e.Key)
		}
		var want []string
		for client := range mo.idx.(*mochiIndex).x.Subscribers(name).Subscriptions {
			want = append(want, client)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: shoal matches %q, mochi %q", name, got, want)
		}
		total += len(got)
	}
	if total < 2*len(sh.mix.names) {
		t.Fatalf("%d names matched %d subscribers in all, want a handful each", len(sh.mix.names), total)
	}
}

// BenchmarkMatch finds the subscribers of published names cycling through
// the mix's names, so each lookup walks the path of a random device.
func BenchmarkMatch(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		for i, impl := range impls {
			b.Run("impl="+impl.name+"/subs="+size(n), func(b *testing.B) {
				fx := getFixture(b, i, n)
				names := fx.mix.names
				matched := 0
				b.ReportAllocs()
				j := 0
				for b.Loop() {
					matched += fx.idx.match(names[j%numNames])
					j++
				}
				b.ReportMetric(float64(matched)/float64(j), "entries/op")
			})
		}
	}
}

// BenchmarkSubscribe subscribes new filters into an index holding n
// entries. Each round subscribes the pool's filters (key "new") with the
// timer running, then unsubscribes them with the timer stopped, so every
// timed Subscribe creates a new entry.
func BenchmarkSubscribe(b *testing.B) {
	for _, n := range []int{100_000} {
		for i, impl := range impls {
			b.Run("impl="+impl.name+"/subs="+size(n), func(b *testing.B) {
				fx := getFixture(b, i, n)
				pool := fx.mix.pool(poolSize)
				idx := fx.idx
				b.ReportAllocs()
				j := 0
				for b.Loop() {
					if !idx.subscribe(pool[j], "new", 1) {
						b.Fatal("pool filter already subscribed")
					}
					if j++; j == len(pool) {
						b.StopTimer()
						for _, f := range pool {
							idx.unsubscribe(f, "new")
						}
						j = 0
						b.StartTimer()
					}
				}
				b.StopTimer()
				for _, f := range pool[:j] {
					idx.unsubscribe(f, "new")
				}
			})
		}
	}
}

// BenchmarkUnsubscribe unsubscribes filters from an index holding n
// entries plus up to poolSize pool entries: each round unsubscribes the
// pool's filters with the timer running, pruning their nodes, after the
// pool was subscribed with the timer stopped.
func BenchmarkUnsubscribe(b *testing.B) {
	for _, n := range []int{100_000} {
		for i, impl := range impls {
			b.Run("impl="+impl.name+"/subs="+size(n), func(b *testing.B) {
				fx := getFixture(b, i, n)
				pool := fx.mix.pool(poolSize)
				idx := fx.idx
				for _, f := range pool {
					idx.subscribe(f, "new", 1)
				}
				b.ReportAllocs()
				j := 0
				for b.Loop() {
					if !idx.unsubscribe(pool[j], "new") {
						b.Fatal("pool filter not subscribed")
					}
					if j++; j == len(pool) {
						b.StopTimer()
						for _, f := range pool {
							idx.subscribe(f, "new", 1)
						}
						j = 0
						b.StartTimer()
					}
				}
				b.StopTimer()
				for _, f := range pool[j:] {
					idx.unsubscribe(f, "new")
				}
			})
		}
	}
}
