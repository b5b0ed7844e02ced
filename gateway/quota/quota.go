package quota

import (
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Limits are one tenant's limits. A zero field is no limit.
type Limits struct {
	// MaxConnections bounds the tenant's connections at once.
	MaxConnections int64
	// ConnectionRate bounds new connections per second; ConnectionBurst
	// is how many may come at once (0: the rate, at least 1).
	ConnectionRate  float64
	ConnectionBurst int64
	// MessagesRate bounds the PUBLISH packets the tenant's clients send
	// per second, BytesRate their bytes (whole packets) per second; each
	// may burst one second's worth.
	MessagesRate float64
	BytesRate    int64
	// MaxSubscriptionsPerClient bounds the subscriptions of one client.
	MaxSubscriptionsPerClient int
}

// IsZero reports whether l limits nothing.
func (l Limits) IsZero() bool { return l == Limits{} }

// Config is every tenant's limits: Default for a tenant without an entry
// in Tenants, whose entries are complete (a tenant's own entry replaces
// Default entirely: the configuration merges them).
type Config struct {
	Default Limits
	Tenants map[string]Limits
}

// Of returns the limits of tenant.
func (c Config) Of(tenant string) Limits {
	if l, ok := c.Tenants[tenant]; ok {
		return l
	}
	return c.Default
}

// IsZero reports whether c limits no tenant.
func (c Config) IsZero() bool {
	if !c.Default.IsZero() {
		return false
	}
	for _, l := range c.Tenants {
		if !l.IsZero() {
			return false
		}
	}
	return true
}

// Counter counts a tenant's connections against its limit.
type Counter interface {
	// Acquire counts one more connection unless max (> 0) are counted
	// already, and reports whether it did. A takeover (a new connection
	// of a client identifier that has one, which is about to end) is
	// counted whatever the count.
	Acquire(max int64, takeover bool) bool
	// Release uncounts a connection Acquire counted.
	Release()
	// Current returns the connections counted now.
	Current() int64
}

// Limiter is a rate: [Bucket] is the local one.
type Limiter interface {
	// Reserve takes n units at now, into debt if need be, and returns how
	// long the caller waits before it goes on (0: at once).
	Reserve(now time.Time, n int64) time.Duration
	// Take takes n units at now if they are there, and reports whether
	// it did; nothing is taken otherwise.
	Take(now time.Time, n int64) bool
}

// Resource names what a Limiter limits.
type Resource uint8

// The rates of a tenant.
const (
	ConnectionRate Resource = iota // new connections
	Messages                       // inbound PUBLISH packets
	Bytes                          // bytes of inbound PUBLISH packets
	numResources
)

// String names the rate as the metrics do.
func (r Resource) String() string {
	switch r {
	case ConnectionRate:
		return "connections"
	case Messages:
		return "messages"
	case Bytes:
		return "bytes"
	}
	return "unknown"
}

// Backend keeps the counts a tenant's limits are checked against: [Local]
// in one process, [Shared] across the gateways of a pool. Each method is
// called once per tenant, when its state is made. A Counter may also have
// Total() int64 (the tenant's connections across the pool) and a Limiter
// PerSecond() float64 (the rate it gives now): Stats reports them.
type Backend interface {
	Connections(tenant string) Counter
	Rate(tenant string, r Resource, perSecond float64, burst int64) Limiter
}

// Local is the Backend of one process: every gateway counts the
// connections and the traffic of the clients it holds.
type Local struct{}

// Connections implements Backend.
func (Local) Connections(string) Counter { return new(localCounter) }

// Rate implements Backend.
func (Local) Rate(_ string, _ Resource, perSecond float64, burst int64) Limiter {
	return NewBucket(perSecond, burst)
}

// localCounter is a Counter in one atomic word.
type localCounter struct{ n atomic.Int64 }

func (c *localCounter) Acquire(max int64, takeover bool) bool {
	for {
		n := c.n.Load()
		if max > 0 && n >= max && !takeover {
			return false
		}
		if c.n.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (c *localCounter) Release() { c.n.Add(-1) }

func (c *localCounter) Current() int64 { return c.n.Load() }

// Total is the tenant's count: this process's.
func (c *localCounter) Total() int64 { return c.n.Load() }

// Quotas holds the state of each tenant with limits.
type Quotas struct {
	cfg     Config
	backend Backend

	mu      sync.RWMutex
	tenants map[string]*Tenant
}

// New returns the quotas of cfg kept by backend (nil: Local), or nil when
// cfg limits nothing: the caller then skips every check.
func New(cfg Config, backend Backend) *Quotas {
	if cfg.IsZero() {
		return nil
	}
	if backend == nil {
		backend = Local{}
	}
	return &Quotas{cfg: cfg, backend: backend, tenants: make(map[string]*Tenant)}
}

// Backend returns what keeps q's counts ([Local] or [Shared]); nil when
// q is.
func (q *Quotas) Backend() Backend {
	if q == nil {
		return nil
	}
	return q.backend
}

// Tenant returns the state of tenant, made at its first call, or nil when
// the tenant has no limit (and then nothing is kept for it).
func (q *Quotas) Tenant(name string) *Tenant {
	if q == nil {
		return nil
	}
	q.mu.RLock()
	t := q.tenants[name]
	q.mu.RUnlock()
	if t != nil {
		return t
	}
	l := q.cfg.Of(name)
	if l.IsZero() {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if t := q.tenants[name]; t != nil {
		return t
	}
	t = newTenant(name, l, q.backend)
	q.tenants[t.name] = t
	return t
}

// Each calls f for every tenant whose state was made, in no order.
func (q *Quotas) Each(f func(*Tenant)) {
	if q == nil {
		return
	}
	q.mu.RLock()
	ts := make([]*Tenant, 0, len(q.tenants))
	for _, t := range q.tenants {
		ts = append(ts, t)
	}
	q.mu.RUnlock()
	for _, t := range ts {
		f(t)
	}
}

// Refusal is why Admit refused a connection.
type Refusal uint8

// Admit's answers.
const (
	Admitted           Refusal = iota
	RefusedConnections         // max_connections reached
	RefusedRate                // max_connection_rate exceeded
)

// Tenant is one tenant's quota state on this gateway: its counts, its
// buckets, and counters of what its limits did. Safe for concurrent use.
type Tenant struct {
	name   string
	limits Limits
	conns  Counter // the connections on this gateway, against max_connections (0: none)
	// Rates; nil: no limit.
	connRate, msgs, bytes Limiter

	refusedConns atomic.Int64
	refusedRate  atomic.Int64
	refusedSubs  atomic.Int64
	throttles    atomic.Int64
	throttledNs  atomic.Int64
	loggedAt     atomic.Int64 // unix ns of the last log line LogDue allowed
}

func newTenant(name string, l Limits, b Backend) *Tenant {
	t := &Tenant{name: strings.Clone(name), limits: l} // not a view of a connection's key
	// Counted whatever the limits: a shared backend tells the other
	// gateways that it holds clients of the tenant, whose rates it then
	// has a share of.
	t.conns = b.Connections(name)
	if l.ConnectionRate > 0 {
		burst := l.ConnectionBurst
		if burst <= 0 {
			burst = burstOf(l.ConnectionRate)
		}
		t.connRate = b.Rate(name, ConnectionRate, l.ConnectionRate, burst)
	}
	if l.MessagesRate > 0 {
		t.msgs = b.Rate(name, Messages, l.MessagesRate, burstOf(l.MessagesRate))
	}
	if l.BytesRate > 0 {
		t.bytes = b.Rate(name, Bytes, float64(l.BytesRate), l.BytesRate)
	}
	return t
}

// burstOf is one second of a rate, at least one unit.
func burstOf(rate float64) int64 { return max(1, int64(math.Ceil(rate))) }

// Name returns the tenant's name.
func (t *Tenant) Name() string { return t.name }

// Limits returns the tenant's limits.
func (t *Tenant) Limits() Limits { return t.limits }

// Admit counts a new connection at now against max_connections, then
// takes it from max_connection_rate, and says why it is refused, if it
// is. An admitted connection counts until Release; a takeover (see
// Counter.Acquire) is not refused by the count. A connection refused by
// the count takes nothing from the rate.
func (t *Tenant) Admit(now time.Time, takeover bool) Refusal {
	if !t.conns.Acquire(t.limits.MaxConnections, takeover) {
		t.refusedConns.Add(1)
		return RefusedConnections
	}
	if t.connRate != nil && !t.connRate.Take(now, 1) {
		t.conns.Release()
		t.refusedRate.Add(1)
		return RefusedRate
	}
	return Admitted
}

// Release uncounts a connection Admit admitted, at its end.
func (t *Tenant) Release() { t.conns.Release() }

// Rated reports whether the tenant's publishes are limited by a message
// or byte rate.
func (t *Tenant) Rated() bool { return t.msgs != nil || t.bytes != nil }

// ChargePublish takes a PUBLISH of size bytes (the whole packet) at now
// from the tenant's message and byte rates and returns how long its reader
// waits before it reads it: 0 when the rates had room. It never refuses
// and never allocates.
func (t *Tenant) ChargePublish(now time.Time, size int) time.Duration {
	var d time.Duration
	if t.msgs != nil {
		d = t.msgs.Reserve(now, 1)
	}
	if t.bytes != nil {
		d = max(d, t.bytes.Reserve(now, int64(size)))
	}
	return d
}

// Throttled counts a reader that waited d for the tenant's rates.
func (t *Tenant) Throttled(d time.Duration) {
	t.throttles.Add(1)
	t.throttledNs.Add(int64(d))
}

// SubscriptionRefused counts a subscription refused by
// MaxSubscriptionsPerClient.
func (t *Tenant) SubscriptionRefused() { t.refusedSubs.Add(1) }

// LogDue reports whether a log line about this tenant's limits may be
// written at now: at most one per interval, so a client hammering a limit
// does not flood the log (the counters count every refusal).
func (t *Tenant) LogDue(now time.Time, interval time.Duration) bool {
	ns := now.UnixNano()
	last := t.loggedAt.Load()
	if last != 0 && ns-last < int64(interval) {
		return false
	}
	return t.loggedAt.CompareAndSwap(last, ns)
}

// Stats is a snapshot of what a tenant's limits did on this gateway.
type Stats struct {
	// Connections counted now on this gateway (against max_connections
	// when the tenant has it).
	Connections int64
	// RefusedConnections by max_connections, RefusedRate by
	// max_connection_rate, RefusedSubscriptions by
	// max_subscriptions_per_client.
	RefusedConnections, RefusedRate, RefusedSubscriptions int64
	// Throttles counts the waits of readers for the message and byte
	// rates, Throttled their total.
	Throttles int64
	Throttled time.Duration
	// TenantConnections is the tenant's connections as this gateway
	// counts them against max_connections: its own, and with a Shared
	// backend the other gateways' reported ones (0 without the limit).
	TenantConnections int64
	// Rates is, by Resource, the rate this gateway enforces now: the
	// tenant's limit, or with a Shared backend this gateway's share of it
	// (0 without the limit).
	Rates [numResources]float64
}

// Stats returns the tenant's counters.
func (t *Tenant) Stats() Stats {
	s := Stats{
		RefusedConnections:   t.refusedConns.Load(),
		RefusedRate:          t.refusedRate.Load(),
		RefusedSubscriptions: t.refusedSubs.Load(),
		Throttles:            t.throttles.Load(),
		Throttled:            time.Duration(t.throttledNs.Load()),
	}
	s.Connections = t.conns.Current()
	if t.limits.MaxConnections > 0 {
		s.TenantConnections = s.Connections
		if tc, ok := t.conns.(interface{ Total() int64 }); ok {
			s.TenantConnections = tc.Total()
		}
	}
	for r, l := range [numResources]Limiter{ConnectionRate: t.connRate, Messages: t.msgs, Bytes: t.bytes} {
		if ps, ok := l.(interface{ PerSecond() float64 }); ok {
			s.Rates[r] = ps.PerSecond()
		}
	}
	return s
}
