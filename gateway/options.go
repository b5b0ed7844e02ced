package gateway

import (
	"github.com/shoal-mqtt/shoal/gateway/quota"
	"github.com/shoal-mqtt/shoal/internal/obs"
)

// Option completes a Gateway at construction (New): what it is given
// besides its configuration and its log. A gateway without options
// accepts every client, leases no slot, keeps no quotas and reports
// nothing beyond its Stats.
type Option func(*Gateway)

// WithAuth sets how CONNECTs are authenticated.
func WithAuth(a Auth) Option { return func(g *Gateway) { g.auth = a } }

// WithSessionLog makes the gateway write every record for shoal.sessions
// through p: the Connect requests, the Disconnects, the heartbeats, the
// inboxes' acknowledgements and returns. In `shoal all` the gateway's own
// producer lingers (Config.ProduceLinger) to share requests between
// publishes, while a CONNECT waits for its Connect to be written and
// answered: p is then the process's producer that sends at once, which
// takes the linger off every connect. One producer for the whole topic
// keeps the order of the gateway's records in each of its partitions: a
// client's acknowledgements and Disconnect, then its next Connect.
func WithSessionLog(p Producer) Option {
	return func(g *Gateway) { g.sessionLog, g.splitLog = p, true }
}

// WithExpress makes the gateway offer its QoS 0 publishes to x before it
// produces them (docs/local-path.md); with tracing on it has no effect.
func WithExpress(x Express) Option { return func(g *Gateway) { g.express = x } }

// WithQuotas sets the tenants' quotas (nil: none, every check is
// skipped). Quotas kept by a quota.Shared, made for this gateway's
// Config.ID, are counted with the other gateways' through shoal.quotas
// (quotashare.go).
func WithQuotas(q *quota.Quotas) Option {
	return func(g *Gateway) {
		g.quotas = q
		g.share, _ = q.Backend().(*quota.Shared)
	}
}

// WithSlotLeaser makes the gateway lease its slot from l: a free one when
// Config.Slot is -1, else Config.Slot itself.
func WithSlotLeaser(l SlotLeaser) Option { return func(g *Gateway) { g.leaser = l } }

// WithTelemetry gives the gateway the providers it reports through.
// Without it the gateway records no spans and no metrics beyond its Stats.
func WithTelemetry(p obs.Providers) Option { return func(g *Gateway) { g.tel = p.WithDefaults() } }

// useTelemetry reports through p from now on: its instruments are made.
func (g *Gateway) useTelemetry(p obs.Providers) {
	g.tel = p.WithDefaults()
	var err error
	if g.met, err = newGatewayMetrics(g.tel); err != nil {
		g.log.Warn("gateway metrics", "err", err)
	}
}
