package routersvc

import (
	"github.com/shoal-mqtt/shoal/internal/obs"
	"github.com/shoal-mqtt/shoal/kafka"
)

// Option completes a Router at construction (New). A router without
// options hands nothing over, routes every publish from the log, keeps
// every retained message and reports nothing.
type Option func(*Router)

// WithHandoff makes the router hand its deliveries to h before producing
// them (docs/local-path.md). With tracing on it has no effect, so that
// every delivery's trace goes through Kafka.
func WithHandoff(h Handoff) Option { return func(r *Router) { r.handoff = h } }

// WithExpress makes the router take QoS 0 publishes of its process's
// gateway through Express (docs/local-path.md). It needs a hand-off
// (WithHandoff) and a client with the local delivery path
// (kafka.Config.Feed); with tracing on Express routes nothing, so that
// every message's trace goes through Kafka. Every record the router makes
// is then produced through via, a client of the same process whose
// records linger to share requests (the gateway's): nothing waits for
// them, the hand-off delivered them; one request per express message would
// cost more CPU than the rest of its way; and one client for both paths
// keeps a slot's records in the order they were handed over. The router
// must be made before the process's clients produce to shoal.messages.
func WithExpress(via *kafka.Client) Option {
	return func(r *Router) {
		r.client.TrackOrder(r.topics.Messages.Name)
		r.express, r.producer = via, via
	}
}

// WithRetainedLimits bounds the retained messages of each tenant (see
// RetainedQuota).
func WithRetainedLimits(l RetainedLimits) Option {
	return func(r *Router) { r.retainedQuota = NewRetainedQuota(l, r.topics.Messages.Partitions, r.log) }
}

// WithTelemetry gives the router the providers it reports through.
// Without it the router records no spans and no metrics.
func WithTelemetry(p obs.Providers) Option {
	return func(r *Router) {
		r.tel = p.WithDefaults()
		var err error
		if r.met, err = newRouterMetrics(r.tel); err != nil {
			r.log.Warn("router metrics", "err", err)
		}
	}
}
