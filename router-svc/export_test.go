package routersvc

import "github.com/shoal-mqtt/shoal/internal/obs"

// What the external tests reach of the router's metrics (metrics.go).

// NewMetrics returns a router's instruments on p, as WithTelemetry makes
// them.
func NewMetrics(p obs.Providers) (*routerMetrics, error) { return newRouterMetrics(p) }

// SetMetrics makes s record into m, as the router does with the shards it
// loads.
func (s *Shard) SetMetrics(m *routerMetrics) { s.setMetrics(m) }

// Routed records the record last applied to s, as Router.apply does, with
// the records it produced.
func (m *routerMetrics) Routed(s *Shard, records int) { m.routed(s, records) }

// DropShard uncounts what s holds, as the router does with a revoked
// shard.
func (m *routerMetrics) DropShard(s *Shard) { m.addShard(s, -1) }
