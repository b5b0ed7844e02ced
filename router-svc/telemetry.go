package routersvc

import "github.com/shoal-mqtt/shoal/internal/obs"

// SetTelemetry gives the router the providers it reports through; call it
// before Run. Without it the router records no spans and no metrics.
func (r *Router) SetTelemetry(p obs.Providers) {
	r.tel = p.WithDefaults()
	var err error
	if r.met, err = newRouterMetrics(r.tel); err != nil {
		r.log.Warn("router metrics", "err", err)
	}
}
