package broker

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/shoal-mqtt/shoal/gateway"
	"github.com/shoal-mqtt/shoal/gateway/quota"
)

// gatewayCounters are the gateway's Stats as metrics: the names /metrics
// has always had (an OpenTelemetry counter gets its _total in Prometheus).
// $SYS/broker reads the same counters.
var gatewayCounters = [...]struct {
	counter gateway.Counter
	name    string
	gauge   bool
	help    string
}{
	{gateway.ConnectionsCurrent, "shoal.gateway.connections", true, "MQTT connections established now."},
	{gateway.ConnectionsTotal, "shoal.gateway.connections_total", false, "MQTT connections established since start."},
	{gateway.MessagesReceived, "shoal.gateway.messages_received", false, "PUBLISH packets received from clients."},
	{gateway.MessagesSent, "shoal.gateway.messages_sent", false, "PUBLISH packets sent to clients."},
	{gateway.BytesReceived, "shoal.gateway.bytes_received", false, "Bytes of MQTT packets received."},
	{gateway.BytesSent, "shoal.gateway.bytes_sent", false, "Bytes written to MQTT clients."},
	{gateway.Dropped, "shoal.gateway.messages_dropped", false, "Messages dropped: client queue or buffer full, or above the client's maximum packet size."},
	{gateway.ACLDenied, "shoal.gateway.acl_denied", false, "Publishes, subscriptions and deliveries the ACL refused."},
	{gateway.AuthFailures, "shoal.gateway.auth_failures", false, "CONNECTs refused for wrong or missing credentials."},
}

// registerMetrics registers the observable instruments of the roles this
// broker runs, read from the roles' own counters at each collection.
func (b *Broker) registerMetrics(m metric.Meter) error {
	var obs []metric.Observable
	var cbs []func(metric.Observer)
	add := func(name, help string, gauge bool, read func(metric.Observer, metric.Observable)) error {
		var in metric.Observable
		var err error
		if gauge {
			in, err = m.Float64ObservableGauge(name, metric.WithDescription(help))
		} else {
			in, err = m.Float64ObservableCounter(name, metric.WithDescription(help))
		}
		if err != nil {
			return fmt.Errorf("metric %s: %w", name, err)
		}
		obs = append(obs, in)
		cbs = append(cbs, func(o metric.Observer) { read(o, in) })
		return nil
	}
	observe := func(o metric.Observer, in metric.Observable, v float64, attrs ...attribute.KeyValue) {
		switch in := in.(type) {
		case metric.Float64ObservableGauge:
			o.ObserveFloat64(in, v, metric.WithAttributes(attrs...))
		case metric.Float64ObservableCounter:
			o.ObserveFloat64(in, v, metric.WithAttributes(attrs...))
		}
	}
	tenant := func(t string) attribute.KeyValue { return attribute.String("tenant", t) }

	b.mu.Lock()
	gw, router, sess := b.gateway, b.router, b.session
	b.mu.Unlock()
	var errs []error
	if gw != nil {
		for _, c := range gatewayCounters {
			errs = append(errs, add(c.name, c.help, c.gauge, func(o metric.Observer, in metric.Observable) {
				observe(o, in, float64(gw.Stats.Load(c.counter)))
			}))
		}
		errs = append(errs,
			add("shoal.gateway.connections_parked", "Idle connections parked: no reader goroutine, the socket watched by the poller.", true,
				func(o metric.Observer, in metric.Observable) { observe(o, in, float64(gw.Parked())) }),
			add("shoal.gateway.parks", "Times an idle connection was parked.", false,
				func(o metric.Observer, in metric.Observable) { observe(o, in, float64(gw.Parks())) }),
			add("shoal.gateway.tenant_connections", "MQTT connections established now, per tenant.", true,
				b.perTenant(gw, gateway.ConnectionsCurrent, observe)),
			add("shoal.gateway.tenant.messages_received", "PUBLISH packets received from clients, per tenant.", false,
				b.perTenant(gw, gateway.MessagesReceived, observe)),
			add("shoal.gateway.tenant.messages_sent", "PUBLISH packets sent to clients, per tenant.", false,
				b.perTenant(gw, gateway.MessagesSent, observe)),
		)
		errs = append(errs, b.registerQuotaMetrics(gw, add, observe)...)
	}
	if sess != nil {
		errs = append(errs, add("shoal.session.inbox_dropped", "Messages dropped because an offline session's inbox was full.", false,
			func(o metric.Observer, in metric.Observable) { observe(o, in, float64(sess.InboxDropped())) }))
	}
	if router != nil {
		errs = append(errs, add("shoal.router.quota_retained_refused", "Retained messages delivered but not kept: the tenant held its max_retained.", false,
			func(o metric.Observer, in metric.Observable) {
				for t, n := range router.RetainedRefused() {
					observe(o, in, float64(n), tenant(t))
				}
			}))
	}
	errs = append(errs, add("shoal.ready", "Whether every role is ready.", true, func(o metric.Observer, in metric.Observable) {
		v := 0.0
		if b.Ready() {
			v = 1
		}
		observe(o, in, v)
	}))
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	_, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, cb := range cbs {
			cb(o)
		}
		return nil
	}, obs...)
	return err
}

// perTenant observes the gateway's counter k per tenant label: the
// tenants beyond telemetry.max_tenant_labels are summed into
// tenant="_other" (obs.Tenants), so that the series stay bounded
// whatever tenants connect. A tenant's counters are never removed, so a
// sum never goes back.
func (b *Broker) perTenant(gw *gateway.Gateway, k gateway.Counter,
	observe func(metric.Observer, metric.Observable, float64, ...attribute.KeyValue),
) func(metric.Observer, metric.Observable) {
	return func(o metric.Observer, in metric.Observable) {
		sums := make(map[string]int64)
		gw.EachTenant(func(t string, s *gateway.Stats) {
			sums[b.prov.Tenants.Label(t)] += s.Load(k)
		})
		for t, v := range sums {
			observe(o, in, float64(v), attribute.String("tenant", t))
		}
	}
}

// registerQuotaMetrics adds what the tenants' quotas refused and
// throttled, and the rates and counts they enforce.
func (b *Broker) registerQuotaMetrics(gw *gateway.Gateway,
	add func(string, string, bool, func(metric.Observer, metric.Observable)) error,
	observe func(metric.Observer, metric.Observable, float64, ...attribute.KeyValue),
) []error {
	tenant := func(t *quota.Tenant) attribute.KeyValue { return attribute.String("tenant", t.Name()) }
	each := func(f func(o metric.Observer, in metric.Observable, t *quota.Tenant, s quota.Stats)) func(metric.Observer, metric.Observable) {
		return func(o metric.Observer, in metric.Observable) {
			gw.Quotas().Each(func(t *quota.Tenant) { f(o, in, t, t.Stats()) })
		}
	}
	return []error{
		add("shoal.gateway.quota_connections_refused", "CONNECTs refused by the tenant's max_connections (CONNACK 0x97) or max_connection_rate (0x9F).", false,
			each(func(o metric.Observer, in metric.Observable, t *quota.Tenant, s quota.Stats) {
				observe(o, in, float64(s.RefusedConnections), tenant(t), attribute.String("reason", "max_connections"))
				observe(o, in, float64(s.RefusedRate), tenant(t), attribute.String("reason", "max_connection_rate"))
			})),
		add("shoal.gateway.quota_subscriptions_refused", "Subscriptions refused by the tenant's max_subscriptions_per_client (SUBACK 0x97).", false,
			each(func(o metric.Observer, in metric.Observable, t *quota.Tenant, s quota.Stats) {
				observe(o, in, float64(s.RefusedSubscriptions), tenant(t))
			})),
		add("shoal.gateway.quota_throttled", "Times a client's reader waited for its tenant's max_messages_rate or max_bytes_rate.", false,
			each(func(o metric.Observer, in metric.Observable, t *quota.Tenant, s quota.Stats) {
				observe(o, in, float64(s.Throttles), tenant(t))
			})),
		add("shoal.gateway.quota_throttled_seconds", "Time clients' readers waited for their tenant's max_messages_rate or max_bytes_rate.", false,
			each(func(o metric.Observer, in metric.Observable, t *quota.Tenant, s quota.Stats) {
				observe(o, in, s.Throttled.Seconds(), tenant(t))
			})),
		add("shoal.gateway.quota_tenant_connections", "The tenant's connections counted against its max_connections: this gateway's, and in distributed mode the other gateways' latest reports.", true,
			each(func(o metric.Observer, in metric.Observable, t *quota.Tenant, s quota.Stats) {
				if t.Limits().MaxConnections > 0 {
					observe(o, in, float64(s.TenantConnections), tenant(t))
				}
			})),
		add("shoal.gateway.quota_rate", "The tenant's rate this gateway enforces, per second: its limit, or in distributed mode this gateway's share of it (rate: connections, messages, bytes).", true,
			each(func(o metric.Observer, in metric.Observable, t *quota.Tenant, s quota.Stats) {
				for _, r := range []quota.Resource{quota.ConnectionRate, quota.Messages, quota.Bytes} {
					if s.Rates[r] > 0 {
						observe(o, in, s.Rates[r], tenant(t), attribute.String("rate", r.String()))
					}
				}
			})),
	}
}
