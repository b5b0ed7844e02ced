package routersvc

import (
	"log/slog"
	"strings"
	"sync"
	"time"
)

// Tenant quotas in the router: max_retained, the retained messages a
// tenant may hold.
//
// The router holds the retained store, so it enforces the bound: a
// retained PUBLISH that would add a new retained topic to a tenant at its
// bound is delivered as any message but not kept. Replacing a retained
// message, or deleting one (an empty payload), is always allowed. The
// publisher is not told: its PUBACK was sent once the message was in the
// log, before any router saw it.
//
// A shard counts only its own retained messages: each shard is a
// deterministic state machine over its partition, and a count across
// shards would make a replay of the log decide otherwise than the first
// run did. So each shard allows a tenant its share of the bound,
// ceil(max_retained / partitions of shoal.messages): a tenant never holds
// more than max_retained + partitions − 1, but one whose topics hash
// unevenly over the partitions is refused a little before max_retained
// (with bounds of many times the partitions, the shares fill evenly). A
// bound lowered below what a tenant holds deletes nothing: new topics are
// refused until the tenant holds less. Topics starting with '$' ($SYS,
// which the gateways publish retained for each tenant) are the broker's:
// they are neither counted nor refused.

// retainedLogInterval bounds the log lines about one tenant's refused
// retained messages; the metric counts every one.
const retainedLogInterval = 10 * time.Second

// RetainedLimits bound the retained messages of each tenant: the
// configuration's `tenants.<name>.max_retained`, Default for a tenant
// without a value of its own. 0 is no bound.
type RetainedLimits struct {
	Default int64
	Tenants map[string]int64
}

// Of returns the bound of tenant.
func (l RetainedLimits) Of(tenant string) int64 {
	if n, ok := l.Tenants[tenant]; ok {
		return n
	}
	return l.Default
}

// IsZero reports whether l bounds no tenant.
func (l RetainedLimits) IsZero() bool {
	if l.Default > 0 {
		return false
	}
	for _, n := range l.Tenants {
		if n > 0 {
			return false
		}
	}
	return true
}

// RetainedQuota applies RetainedLimits in the shards of a router and
// counts, per tenant, the retained messages it refused. Safe for
// concurrent use.
type RetainedQuota struct {
	limits     RetainedLimits
	partitions int64
	log        *slog.Logger

	mu      sync.Mutex
	refused map[string]*retainedRefusals
}

// retainedRefusals are one tenant's refused retained messages.
type retainedRefusals struct {
	total    int64
	unlogged int64     // since the last log line
	loggedAt time.Time // of the last log line
}

// NewRetainedQuota returns the quota of limits for shards of a topic of
// partitions partitions, logging refusals to log; nil when limits bound
// nothing.
func NewRetainedQuota(limits RetainedLimits, partitions int32, log *slog.Logger) *RetainedQuota {
	if limits.IsZero() {
		return nil
	}
	return &RetainedQuota{limits: limits, partitions: int64(max(partitions, 1)), log: log,
		refused: make(map[string]*retainedRefusals)}
}

// ShardLimit returns the retained messages of tenant one shard may hold,
// its share of the tenant's bound; 0 is no bound.
func (q *RetainedQuota) ShardLimit(tenant string) int64 {
	n := q.limits.Of(tenant)
	if n <= 0 {
		return 0
	}
	return (n + q.partitions - 1) / q.partitions
}

// Refused returns, per tenant, the retained messages refused since start.
func (q *RetainedQuota) Refused() map[string]int64 {
	if q == nil {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	m := make(map[string]int64, len(q.refused))
	for t, r := range q.refused {
		m[t] = r.total
	}
	return m
}

// refuse counts a retained message of tenant on topic that partition's
// shard did not keep at now, and logs it, at most once per tenant per
// retainedLogInterval (with the count since the last line).
func (q *RetainedQuota) refuse(tenant, topic string, partition int32, now time.Time) {
	q.mu.Lock()
	r := q.refused[tenant]
	if r == nil {
		r = &retainedRefusals{}
		q.refused[strings.Clone(tenant)] = r // tenant may alias a record buffer
	}
	r.total++
	r.unlogged++
	n := r.unlogged
	due := r.loggedAt.IsZero() || now.Sub(r.loggedAt) >= retainedLogInterval
	if due {
		r.unlogged, r.loggedAt = 0, now
	}
	q.mu.Unlock()
	if due {
		q.log.Warn("retained message not kept: the tenant holds its max_retained", "tenant", tenant,
			"topic", topic, "partition", partition, "max_retained", q.limits.Of(tenant),
			"shard_limit", q.ShardLimit(tenant), "refused", n)
	}
}

// SetRetainedQuota makes the shard apply q to the retained messages of
// its publishes (nil: no bound).
func (s *Shard) SetRetainedQuota(q *RetainedQuota) { s.rquota = q }

// retainRefused reports whether a retained message on topic of the tenant
// named tenant (t: its state in the shard, nil when it has none) must not
// be kept: a new retained topic beyond the tenant's share of its bound. A
// refusal is counted and logged.
func (s *Shard) retainRefused(t *tenant, name, topic string) bool {
	q := s.rquota
	if q == nil || t == nil || strings.HasPrefix(topic, "$") { // $SYS: the broker's own, not counted
		return false
	}
	limit := q.ShardLimit(name)
	if limit <= 0 || int64(t.retained.n-t.retained.sys) < limit || t.retained.get(topic) != nil {
		return false
	}
	q.refuse(name, topic, s.partition, s.clock())
	return true
}

// RetainedRefused returns, per tenant, the retained messages this router
// did not keep because of the tenant's max_retained, since start.
func (r *Router) RetainedRefused() map[string]int64 { return r.retainedQuota.Refused() }
