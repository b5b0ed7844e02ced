package routersvc

import (
	"context"
	"errors"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/shoal-mqtt/shoal/internal/obs"
)

// The router's instruments: subscriptions matched and records produced per
// message, messages that expired before routing, and the retained
// messages its shards hold per tenant. Made once, by WithTelemetry;
// recording allocates nothing. A Shard records into the metrics its router
// gave it (setMetrics); a shard without (a Rebuild's, a test's) records
// nothing.

// routerMetrics are a router's instruments; nil records nothing.
type routerMetrics struct {
	matches metric.Int64Histogram
	fanout  metric.Int64Histogram
	drops   *obs.Drops
	tenants *obs.Tenants

	// retained counts the retained messages the router's shards hold, by
	// tenant: changed by the shards as they store and remove them, read
	// by the observable gauge.
	mu       sync.Mutex
	retained map[string]int64
}

// newRouterMetrics makes the router's instruments on p's meter.
func newRouterMetrics(p obs.Providers) (*routerMetrics, error) {
	m := p.Meter.Meter(obs.Scope)
	rm := &routerMetrics{tenants: p.Tenants, retained: make(map[string]int64)}
	var errs [5]error
	rm.matches, errs[0] = m.Int64Histogram("shoal.router.matches", metric.WithUnit("{subscription}"),
		metric.WithDescription("Subscriptions a published message matched in its shard (shared subscriptions count each member)."),
		metric.WithExplicitBucketBoundaries(obs.CountBuckets...))
	rm.fanout, errs[1] = m.Int64Histogram("shoal.router.fanout", metric.WithUnit("{record}"),
		metric.WithDescription("Records the router produced for a published message: one delivery per gateway slot (split beyond router.max_targets_per_delivery targets) and one inbox append per persistent session's QoS 1/2 target."),
		metric.WithExplicitBucketBoundaries(obs.CountBuckets...))
	rm.drops, errs[2] = obs.NewDrops(m)
	var retained metric.Int64ObservableGauge
	retained, errs[3] = m.Int64ObservableGauge("shoal.router.retained", metric.WithUnit("{message}"),
		metric.WithDescription("Retained messages held by this router's shards, per tenant (beyond telemetry.max_tenant_labels tenants: tenant=\"_other\")."))
	if errs[3] == nil {
		_, errs[4] = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
			for t, n := range rm.retainedByLabel() {
				o.ObserveInt64(retained, n, metric.WithAttributeSet(attribute.NewSet(attribute.String("tenant", t))))
			}
			return nil
		}, retained)
	}
	return rm, errors.Join(errs[:]...)
}

// retainedByLabel returns the retained messages held per tenant label:
// the tenants beyond the cap summed into obs.OtherTenant.
func (m *routerMetrics) retainedByLabel() map[string]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]int64, len(m.retained))
	for t, n := range m.retained {
		out[m.tenants.Label(t)] += n
	}
	return out
}

// addRetained changes tenant's count of retained messages by n.
func (m *routerMetrics) addRetained(tenant string, n int) {
	if m == nil || n == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.retained[tenant]
	if !ok {
		tenant = strings.Clone(tenant) // it may alias a record buffer
	}
	if v += int64(n); v != 0 {
		m.retained[tenant] = v
	} else {
		delete(m.retained, tenant)
	}
}

// addShard adds (sign 1) or removes (-1) what shard s holds to the counts:
// a shard loaded, a shard dropped.
func (m *routerMetrics) addShard(s *Shard, sign int) {
	if m == nil || s == nil {
		return
	}
	for _, t := range s.tenants {
		m.addRetained(t.name, sign*t.retained.n)
	}
}

// notePublish notes what a publish applied to s matched, for the
// router's metrics (routed); one that expired before routing is counted
// dropped.
func (s *Shard) notePublish(expired bool, matches int) {
	if expired {
		if s.met != nil {
			s.met.drops.Add(obs.DropExpired, 1)
		}
		return
	}
	s.routed = routeNote{ok: true, matches: matches}
}

// routed records the last record applied to s when it was a publish
// routed: its matches and the records produced for it.
func (m *routerMetrics) routed(s *Shard, records int) {
	note := s.routed
	s.routed = routeNote{}
	if m == nil || !note.ok {
		return
	}
	ctx := context.Background()
	m.matches.Record(ctx, int64(note.matches))
	m.fanout.Record(ctx, int64(records))
}

// routeNote is what the last publish applied to a shard matched, for the
// router's metrics (ok: the publish was routed).
type routeNote struct {
	ok      bool
	matches int
}

// setMetrics makes s record into m, which counts what s holds from now on.
func (s *Shard) setMetrics(m *routerMetrics) {
	s.met = m
	m.addShard(s, 1)
}
