package quota

import (
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Counting a tenant across the gateways of a pool (distributed mode).
//
// Each gateway keeps its own counts and buckets, as [Local] does, and
// tells the others what it holds of each tenant in a [Report] every
// interval (the gateway's heartbeat): its connections, and what its
// clients used of each rate over the interval and whether they wanted
// more (its share was spent). The gateway writes the reports to a
// compacted topic and applies the others' ([Shared.Apply]); this package
// knows nothing of Kafka. From the others' latest reports each gateway
// derives:
//
//   - Connections: a connection is admitted while this gateway's count
//     plus the others' reported counts is below max_connections.
//   - Rates (messages, bytes, new connections): each gateway's bucket gets
//     a share of the tenant's rate. A tenth of the rate is set aside in
//     equal floors, one per gateway holding the tenant, so that a gateway
//     whose clients were idle can serve a new burst at once; the rest is
//     shared by demand, max-min fair (water-filling): a gateway whose share
//     was not spent needs what it used and a quarter more, a gateway whose
//     share was spent needs all it can get; the needs are met smallest
//     first, the saturated gateways split what is left equally, and what
//     nobody needs is shared equally. So the shares add up to the rate when
//     the gateways see the same reports, and the rate goes where the
//     clients are. (Proportional shares, the first proposal, give a
//     saturated gateway only its past use times a factor: it climbs to
//     its fair share over several intervals, and leaves part of the rate
//     with gateways that do not use it.) Each bucket's burst is its share
//     of the tenant's burst, at least one unit.
//
// A report is read as new for three of its writer's intervals after it was
// read (and not longer than that after its own timestamp plus reportSkew,
// so that the reports of a gateway that stopped long ago, read at start
// from the compacted topic, count for nothing); then it is ignored. A
// gateway that holds nothing of a tenant any more says so once (Gone), and
// so does a gateway that stops.
//
// The slack, which docs/security.md repeats ("Tenant quotas"):
//
//   - Connections admitted by other gateways since the report this gateway
//     read last are not counted: at most what the pool admits while a
//     report is under way. A gateway reports early, at most four times an
//     interval, once its count moved by max_connections / (10 × gateways)
//     (at least one), so in steady state the pool admits at most a tenth of
//     the limit too many; under a storm of connections, at most what the
//     pool admits in a quarter interval and a produce→consume round trip;
//     and the last free connection can be taken by several gateways at
//     the same instant (at most one each). A takeover by a connection on
//     another gateway is not known to be one: at the limit it is refused
//     until the old connection's gateway reports it gone.
//   - A gateway that starts serving a tenant takes its floor (and, when
//     the others do not use theirs, more) while the others, who have not
//     read its report yet, still share the whole rate among themselves: the
//     tenant may get up to that gateway's share more for one interval. The
//     floors of gateways whose clients are idle, and the quarter of
//     headroom of those below their share, are not used by the others:
//     together at most a tenth of the rate and a quarter of what the
//     unsaturated gateways use. Rounding up the bursts adds at most one
//     unit per gateway.
//   - A gateway that dies without saying so keeps being counted for three
//     of its intervals after its last report was read, and up to one of
//     the reader's own intervals more (stale reports are dropped at each
//     of the reader's intervals and when a report of the tenant comes).
const (
	// staleIntervals is how many of its writer's intervals a report counts.
	staleIntervals = 3
	// reportSkew is how far a report's timestamp may lag the reader's
	// clock (clock skew and the report's way through the log) and still
	// count for its full staleIntervals from the moment it was read.
	reportSkew = 2 * time.Second
	// floorShare is the part of a rate set aside in equal floors.
	floorShare = 0.1
	// headroom is the share beyond its use given to a gateway whose share
	// was not spent.
	headroom = 0.25
	// earlySteps is how many early reports the pool may send over one
	// limit's worth of connections: a gateway reports early once its count
	// moved by max_connections / (earlySteps × gateways).
	earlySteps = 10
)

// Usage is what a gateway's clients used of one of a tenant's rates over
// an interval.
type Usage struct {
	// Limited says the gateway has this rate (its share of it); the
	// other fields are zero otherwise.
	Limited bool
	// PerSecond is the units taken per second.
	PerSecond float64
	// Saturated says the share was spent at some point of the interval (a
	// reader waited, a connection was refused): the clients wanted more.
	Saturated bool
}

// Report is what one gateway holds of one tenant, as it writes it for the
// others and as they apply it.
type Report struct {
	Tenant, Gateway string
	// At is when it was made, by its writer's clock; Interval is how soon
	// the next one is due.
	At       time.Time
	Interval time.Duration
	// Gone says the gateway holds nothing of the tenant (any more): the
	// other fields are zero.
	Gone bool
	// Connections counted on the gateway now.
	Connections int64
	// Rates by Resource.
	Rates [numResources]Usage
}

// holds reports whether r says the gateway has something of the tenant:
// connections, or traffic over the interval.
func (r *Report) holds() bool {
	if r.Connections > 0 {
		return true
	}
	for _, u := range r.Rates {
		if u.PerSecond > 0 || u.Saturated {
			return true
		}
	}
	return false
}

// Shared is the Backend of a gateway in a pool: it counts and rates a
// tenant's clients across the gateways from their reports (see above).
// The gateway writes what Reports returns, every interval and when Due
// says, and what Leave returns when it stops; and it applies every
// report it reads, its own included (Apply). One Shared serves one
// gateway's Quotas. Safe for concurrent use.
//
// Lock order: Quotas.mu, then Shared.mu, then a tenant's mu; the buckets
// and the counts are atomic.
type Shared struct {
	self string
	due  chan struct{}

	mu      sync.Mutex
	tenants map[string]*sharedTenant
}

// NewShared returns the Backend of the gateway named gateway (its
// gateway.id, which its reports carry).
func NewShared(gateway string) *Shared {
	return &Shared{self: gateway, due: make(chan struct{}, 1), tenants: make(map[string]*sharedTenant)}
}

// Gateway returns the name of the gateway s counts for.
func (s *Shared) Gateway() string { return s.self }

// Due receives when a tenant's connection count moved far enough since it
// was last reported that the others should hear of it before the interval
// ends: the gateway then writes what Reports(…, false) returns.
func (s *Shared) Due() <-chan struct{} { return s.due }

// tenant returns the state of name, made at its first use, with its mu
// held; local marks it as one of this gateway's Quotas' (it is then kept
// for good). Taking the tenant's mu before Shared.mu is let go keeps
// forget from dropping a state that is about to get a report.
func (s *Shared) tenant(name string, local bool) *sharedTenant {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.tenants[name]
	if st == nil {
		st = &sharedTenant{name: strings.Clone(name), s: s, peers: make(map[string]peer)}
		st.gateways.Store(1)
		s.tenants[st.name] = st
	}
	st.local = st.local || local
	st.mu.Lock()
	return st
}

// snapshot returns the tenants' states, in no order.
func (s *Shared) snapshot() []*sharedTenant {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := make([]*sharedTenant, 0, len(s.tenants))
	for _, st := range s.tenants {
		ts = append(ts, st)
	}
	return ts
}

// Connections implements Backend: the count is this gateway's, checked
// against the others' reports.
func (s *Shared) Connections(tenant string) Counter {
	st := s.tenant(tenant, true)
	st.mu.Unlock()
	return st
}

// Rate implements Backend: a bucket of this gateway's share of the rate,
// which follows the reports. Until its first interval is measured, this
// gateway counts as wanting all it can get.
func (s *Shared) Rate(tenant string, r Resource, perSecond float64, burst int64) Limiter {
	st := s.tenant(tenant, true)
	defer st.mu.Unlock()
	sr := &sharedRate{limit: perSecond, burst: max(burst, 1)}
	st.rates[r] = sr
	st.own[r] = Usage{Limited: true, Saturated: true}
	rate, b := st.share(r)
	sr.b = NewBucket(rate, b)
	return sr
}

// Reports appends to dst the reports this gateway writes at now, its
// reporting interval being interval. With all (once an interval) it first
// forgets the others' stale reports, measures each tenant's rates over
// the time since the last such call, and sets the buckets' shares; it
// returns a report for every tenant this gateway holds something of, and
// a Gone report for each it held something of at the last report and no
// longer does. Without all (an early report, Due), it returns reports
// only for the tenants whose connection count moved far enough, with the
// rates measured last.
func (s *Shared) Reports(dst []Report, now time.Time, interval time.Duration, all bool) []Report {
	ts := s.snapshot()
	for _, st := range ts {
		dst = st.report(dst, now, interval, all)
	}
	if all {
		s.forget(ts)
	}
	return dst
}

// Leave appends to dst a Gone report for every tenant this gateway
// reported holding something of: it stops.
func (s *Shared) Leave(dst []Report, now time.Time) []Report {
	for _, st := range s.snapshot() {
		st.mu.Lock()
		if st.active {
			dst = append(dst, Report{Tenant: st.name, Gateway: s.self, At: now, Gone: true})
			st.active = false
			st.reported.Store(0)
		}
		st.mu.Unlock()
	}
	return dst
}

// Apply takes in a report read at now. A report of this gateway's own
// (written by an earlier run under the same name) makes the next Reports
// say what this run holds of the tenant, Gone if nothing: the earlier
// run's counts stop counting at once.
func (s *Shared) Apply(r Report, now time.Time) {
	if r.Gateway == s.self {
		if !r.Gone {
			st := s.tenant(r.Tenant, false)
			st.active = true
			st.mu.Unlock()
		}
		return
	}
	st := s.tenant(r.Tenant, false)
	defer st.mu.Unlock()
	if r.Gone {
		delete(st.peers, r.Gateway)
	} else {
		iv := r.Interval
		if iv <= 0 {
			iv = time.Second
		}
		from := now
		if at := r.At.Add(reportSkew); at.Before(from) {
			from = at // an old report, found at start: it counts for what is left of its time
		}
		if expires := from.Add(staleIntervals * iv); expires.After(now) {
			r.Tenant, r.Gateway = st.name, strings.Clone(r.Gateway)
			st.peers[r.Gateway] = peer{r: r, expires: expires}
		} else {
			delete(st.peers, r.Gateway)
		}
	}
	st.expire(now)
	st.rebalance(now)
}

// forget drops the states of tenants this gateway has no quota state for
// and no other gateway reports any more.
func (s *Shared) forget(ts []*sharedTenant) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range ts {
		if st.local {
			continue
		}
		st.mu.Lock()
		if len(st.peers) == 0 && !st.active {
			delete(s.tenants, st.name)
		}
		st.mu.Unlock()
	}
}

// peer is another gateway's latest report of a tenant.
type peer struct {
	r       Report
	expires time.Time
}

// sharedTenant is one tenant's state in a Shared: this gateway's count
// (it is the tenant's Counter), its rates, and the others' reports.
type sharedTenant struct {
	name  string
	s     *Shared
	local bool // made for this gateway's Quotas (Shared.mu)

	conns    atomic.Int64 // counted here
	others   atomic.Int64 // the fresh reports' connections
	gateways atomic.Int64 // holding the tenant: this one and the fresh reports'
	reported atomic.Int64 // conns in the last report written
	limit    atomic.Int64 // max_connections, as Acquire saw it last

	mu         sync.Mutex
	peers      map[string]peer // by gateway
	rates      [numResources]*sharedRate
	own        [numResources]Usage // this gateway's, measured last
	measuredAt time.Time
	active     bool // the last report written held something
}

// Acquire implements Counter: it counts the connection unless this
// gateway's count and the others' reported ones reach limit.
func (st *sharedTenant) Acquire(limit int64, takeover bool) bool {
	if st.limit.Load() != limit {
		st.limit.Store(limit)
	}
	for {
		n := st.conns.Load()
		if limit > 0 && !takeover && n+st.others.Load() >= limit {
			return false
		}
		if st.conns.CompareAndSwap(n, n+1) {
			st.moved(n + 1)
			return true
		}
	}
}

// Release implements Counter.
func (st *sharedTenant) Release() { st.moved(st.conns.Add(-1)) }

// Current implements Counter: the connections counted on this gateway.
func (st *sharedTenant) Current() int64 { return st.conns.Load() }

// Total returns the tenant's connections as this gateway counts them
// against its limit: its own and the others' reported ones.
func (st *sharedTenant) Total() int64 { return st.conns.Load() + st.others.Load() }

// moved makes an early report due when the count n moved by a step since
// the last report.
func (st *sharedTenant) moved(n int64) {
	limit := st.limit.Load()
	if limit <= 0 {
		return
	}
	step := max(1, limit/(earlySteps*st.gateways.Load()))
	if d := n - st.reported.Load(); d >= step || -d >= step {
		select {
		case st.s.due <- struct{}{}:
		default:
		}
	}
}

// report appends st's report to dst (see Shared.Reports).
func (st *sharedTenant) report(dst []Report, now time.Time, interval time.Duration, all bool) []Report {
	st.mu.Lock()
	defer st.mu.Unlock()
	conns := st.conns.Load()
	if all {
		st.expire(now)
		st.measure(now, interval)
		st.rebalance(now)
	} else {
		limit := st.limit.Load()
		step := max(1, limit/(earlySteps*st.gateways.Load()))
		if d := conns - st.reported.Load(); limit <= 0 || (d < step && -d < step) {
			return dst
		}
	}
	r := Report{Tenant: st.name, Gateway: st.s.self, At: now, Interval: interval, Connections: conns, Rates: st.own}
	switch {
	case r.holds():
		st.active = true
	case st.active:
		r = Report{Tenant: st.name, Gateway: st.s.self, At: now, Interval: interval, Gone: true}
		st.active = false
	default:
		return dst // nothing held, and the others know
	}
	st.reported.Store(conns)
	return append(dst, r)
}

// expire forgets the reports that are stale at now and sums the others'
// connections. st.mu is held.
func (st *sharedTenant) expire(now time.Time) {
	var others int64
	for gw, p := range st.peers {
		if !p.expires.After(now) {
			delete(st.peers, gw)
			continue
		}
		others += p.r.Connections
	}
	st.others.Store(others)
	st.gateways.Store(int64(1 + len(st.peers)))
}

// measure sets this gateway's use of each rate over the time since the
// last measure (the first covers one interval). st.mu is held.
func (st *sharedTenant) measure(now time.Time, interval time.Duration) {
	elapsed := now.Sub(st.measuredAt)
	if st.measuredAt.IsZero() || elapsed <= 0 {
		elapsed = interval
	}
	st.measuredAt = now
	for r, sr := range st.rates {
		if sr == nil {
			continue
		}
		used := sr.used.Swap(0)
		st.own[r] = Usage{Limited: true, PerSecond: float64(used) / elapsed.Seconds(), Saturated: sr.saturated.Swap(false)}
	}
}

// rebalance sets each bucket to this gateway's share. st.mu is held.
func (st *sharedTenant) rebalance(now time.Time) {
	for r, sr := range st.rates {
		if sr == nil {
			continue
		}
		if rate, burst := st.share(Resource(r)); rate != sr.b.PerSecond() || burst != sr.b.Burst() {
			sr.b.SetRate(now, rate, burst)
		}
	}
}

// share returns this gateway's share of rate r and of its burst, from
// its own use and the others' reports. st.mu is held.
func (st *sharedTenant) share(r Resource) (float64, int64) {
	sr := st.rates[r]
	demands := make([]float64, 1, 1+len(st.peers))
	demands[0] = demand(st.own[r])
	for _, p := range st.peers {
		if u := p.r.Rates[r]; u.Limited {
			demands = append(demands, demand(u))
		}
	}
	rate := waterfill(sr.limit, demands)
	burst := max(1, int64(math.Ceil(float64(sr.burst)*rate/sr.limit)))
	return rate, burst
}

// demand is what a gateway needs of a rate: all it can get when its share
// was spent, else what it used and some headroom.
func demand(u Usage) float64 {
	if u.Saturated {
		return math.Inf(1)
	}
	return u.PerSecond * (1 + headroom)
}

// waterfill shares limit among gateways of the given demands and returns
// the share of the first: each gets an equal floor (floorShare of the
// limit in all), then the rest is given max-min fair, the smallest needs
// beyond the floors met first, and what no one needs is shared equally.
// The shares add up to limit.
func waterfill(limit float64, demands []float64) float64 {
	n := float64(len(demands))
	floor := floorShare * limit / n
	need := make([]float64, len(demands))
	order := make([]int, len(demands))
	for i, d := range demands {
		need[i] = max(0, d-floor)
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		switch {
		case need[a] < need[b]:
			return -1
		case need[a] > need[b]:
			return 1
		}
		return 0
	})
	left, k := limit-floor*n, n
	var own float64
	for _, i := range order {
		g := min(need[i], left/k)
		left -= g
		k--
		if i == 0 {
			own = g
		}
	}
	return floor + own + left/n
}

// sharedRate is this gateway's bucket of a tenant's rate, measuring what
// it gives.
type sharedRate struct {
	b     *Bucket
	limit float64 // the tenant's rate
	burst int64   // the tenant's burst

	used      atomic.Int64 // units taken since the last measure
	saturated atomic.Bool  // a wait or a refusal since the last measure
}

// Reserve implements Limiter.
func (r *sharedRate) Reserve(now time.Time, n int64) time.Duration {
	d := r.b.Reserve(now, n)
	r.used.Add(n)
	if d > 0 && !r.saturated.Load() {
		r.saturated.Store(true)
	}
	return d
}

// Take implements Limiter.
func (r *sharedRate) Take(now time.Time, n int64) bool {
	if r.b.Take(now, n) {
		r.used.Add(n)
		return true
	}
	if !r.saturated.Load() {
		r.saturated.Store(true)
	}
	return false
}

// PerSecond returns this gateway's share of the rate now.
func (r *sharedRate) PerSecond() float64 { return r.b.PerSecond() }
