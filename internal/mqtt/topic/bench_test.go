package topic

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
)

// The benchmarks use an IoT subscription mix, deterministic for a given
// size n (number of entries):
//
//   - 90% concrete device filters: every device d has two,
//     t{T}/site/s{S}/device/d{D}/telemetry and .../status, subscribed by
//     the device's application (key "app{D}");
//   - 3.5% per-site status filters, t{T}/site/s{S}/device/+/status, spread
//     round-robin over the sites (about 2.5 dashboards per site);
//   - 3.5% command filters, +/site/s{S}/device/d{D}/cmd, each on a random
//     device (a command service watching one device across tenants);
//   - 3% per-site catch-alls, t{T}/site/s{S}/#, round-robin over the sites
//     (about two archivers per site).
//
// Devices are grouped 32 to a site and sites 8 to a tenant; site and device
// numbers are global, so every filter is distinct. Published names are drawn
// uniformly from the device topic space (45% telemetry, 45% status, 10% cmd)
// into a slice of benchNames names that Match cycles through: each Match
// walks the path of a random device, so the trie's nodes are mostly not in
// the CPU caches, as in a broker serving many devices. Each name matches a
// handful of entries whatever n is (about 3 for telemetry, 5 for status, 2
// for cmd), so the benchmarks show how lookup scales with the trie, not how
// many entries are copied out. BenchmarkTrieMatchHot cycles through a few
// devices instead, so that everything stays in cache and only the work of
// matching is measured.
const (
	benchDevicesPerSite = 32
	benchSitesPerTenant = 8
	benchNames          = 1 << 12
)

type benchKey = string

type benchFixture struct {
	trie    *Trie[benchKey, uint8]
	devices int
	names   []string // published topic names, in random order
}

func benchSite(d int) int   { return d / benchDevicesPerSite }
func benchTenant(s int) int { return s / benchSitesPerTenant }

func benchDeviceTopic(d int, kind string) string {
	s := benchSite(d)
	return "t" + strconv.Itoa(benchTenant(s)) + "/site/s" + strconv.Itoa(s) + "/device/d" + strconv.Itoa(d) + "/" + kind
}

func newBenchFixture(n int) *benchFixture {
	rng := rand.New(rand.NewPCG(uint64(n), 42))
	devices := n * 45 / 100
	sites := (devices + benchDevicesPerSite - 1) / benchDevicesPerSite
	tr := New[benchKey, uint8]()
	for d := range devices {
		key := "app" + strconv.Itoa(d)
		tr.Subscribe(benchDeviceTopic(d, "telemetry"), key, 1)
		tr.Subscribe(benchDeviceTopic(d, "status"), key, 1)
	}
	for i := range n * 35 / 1000 {
		s := i % sites
		tr.Subscribe(fmt.Sprintf("t%d/site/s%d/device/+/status", benchTenant(s), s), "dash"+strconv.Itoa(i), 0)
	}
	for i := range n * 35 / 1000 {
		d := rng.IntN(devices)
		tr.Subscribe(fmt.Sprintf("+/site/s%d/device/d%d/cmd", benchSite(d), d), "cmd"+strconv.Itoa(i), 1)
	}
	for i := range n * 3 / 100 {
		s := i % sites
		tr.Subscribe(fmt.Sprintf("t%d/site/s%d/#", benchTenant(s), s), "arch"+strconv.Itoa(i), 1)
	}
	names := make([]string, benchNames)
	for i := range names {
		kind := "telemetry"
		switch r := rng.IntN(100); {
		case r >= 90:
			kind = "cmd"
		case r >= 45:
			kind = "status"
		}
		names[i] = benchDeviceTopic(rng.IntN(devices), kind)
	}
	return &benchFixture{trie: tr, devices: devices, names: names}
}

// benchFixtures builds each size once per process: the 1M trie takes
// seconds to build and -count runs every benchmark several times.
// Benchmarks that change a fixture restore it before they return.
var benchFixtures = struct {
	sync.Mutex
	m map[int]*benchFixture
}{m: map[int]*benchFixture{}}

func getBenchFixture(b *testing.B, n int) *benchFixture {
	b.Helper()
	benchFixtures.Lock()
	defer benchFixtures.Unlock()
	fx := benchFixtures.m[n]
	if fx == nil {
		fx = newBenchFixture(n)
		benchFixtures.m[n] = fx
	}
	if got := fx.trie.Len(); got != n {
		b.Fatalf("fixture holds %d entries, want %d", got, n)
	}
	return fx
}

func BenchmarkTrieMatch(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b.Run("subs="+benchSize(n), func(b *testing.B) {
			fx := getBenchFixture(b, n)
			dst := make([]Entry[benchKey, uint8], 0, 64)
			matched := 0
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				dst = fx.trie.Match(fx.names[i%benchNames], dst[:0])
				matched += len(dst)
				i++
			}
			b.ReportMetric(float64(matched)/float64(i), "entries/op")
		})
	}
}

func BenchmarkTrieMatchHot(b *testing.B) {
	for _, n := range []int{10_000, 1_000_000} {
		b.Run("subs="+benchSize(n), func(b *testing.B) {
			fx := getBenchFixture(b, n)
			names := fx.names[:16]
			dst := make([]Entry[benchKey, uint8], 0, 64)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				dst = fx.trie.Match(names[i%len(names)], dst[:0])
				i++
			}
		})
	}
}

// benchPool returns p new filters for the fixture: telemetry and status
// filters of devices the fixture does not have, under its existing sites,
// as when new devices come online. Subscribing one creates one or two
// nodes; unsubscribing it prunes them.
func benchPool(fx *benchFixture, p int) []string {
	pool := make([]string, 0, p)
	for d := fx.devices; len(pool) < p; d++ {
		// Keep the new devices under existing sites.
		old := d % fx.devices
		site := benchSite(old)
		name := func(kind string) string {
			return fmt.Sprintf("t%d/site/s%d/device/d%d/%s", benchTenant(site), site, d, kind)
		}
		pool = append(pool, name("telemetry"), name("status"))
	}
	return pool[:p]
}

const benchPoolSize = 8192

// BenchmarkTrieSubscribe measures subscribing new filters into a trie
// holding n entries. Each round subscribes the pool's filters (key "new")
// with the timer running, then unsubscribes them with the timer stopped, so
// the trie stays between n and n+benchPoolSize entries and every timed
// Subscribe creates a new entry.
func BenchmarkTrieSubscribe(b *testing.B) {
	for _, n := range []int{100_000} {
		b.Run("subs="+benchSize(n), func(b *testing.B) {
			fx := getBenchFixture(b, n)
			pool := benchPool(fx, benchPoolSize)
			tr := fx.trie
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if tr.Subscribe(pool[i], "new", 1) {
					b.Fatal("pool filter already subscribed")
				}
				if i++; i == len(pool) {
					b.StopTimer()
					for _, f := range pool {
						tr.Unsubscribe(f, "new")
					}
					i = 0
					b.StartTimer()
				}
			}
			b.StopTimer()
			for _, f := range pool[:i] {
				tr.Unsubscribe(f, "new")
			}
		})
	}
}

// BenchmarkTrieUnsubscribe measures unsubscribing from a trie holding n
// entries plus up to benchPoolSize pool entries: each round unsubscribes the
// pool's filters with the timer running, pruning their nodes, after the pool
// was subscribed with the timer stopped.
func BenchmarkTrieUnsubscribe(b *testing.B) {
	for _, n := range []int{100_000} {
		b.Run("subs="+benchSize(n), func(b *testing.B) {
			fx := getBenchFixture(b, n)
			pool := benchPool(fx, benchPoolSize)
			tr := fx.trie
			for _, f := range pool {
				tr.Subscribe(f, "new", 1)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if !tr.Unsubscribe(pool[i], "new") {
					b.Fatal("pool filter not subscribed")
				}
				if i++; i == len(pool) {
					b.StopTimer()
					for _, f := range pool {
						tr.Subscribe(f, "new", 1)
					}
					i = 0
					b.StartTimer()
				}
			}
			b.StopTimer()
			for _, f := range pool[i:] {
				tr.Unsubscribe(f, "new")
			}
		})
	}
}

func benchSize(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "M"
	case n >= 1000 && n%1000 == 0:
		return strconv.Itoa(n/1000) + "K"
	}
	return strconv.Itoa(n)
}
