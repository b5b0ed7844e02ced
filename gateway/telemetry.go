package gateway

import "github.com/shoal-mqtt/shoal/internal/obs"

// SetTelemetry gives the gateway the providers it reports through; call it
// before Run. Without it the gateway records no spans and no metrics
// beyond its Stats.
func (g *Gateway) SetTelemetry(p obs.Providers) {
	g.tel = p.WithDefaults()
	var err error
	if g.met, err = newGatewayMetrics(g.tel); err != nil {
		g.log.Warn("gateway metrics", "err", err)
	}
}
