package broker

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/shoal-mqtt/shoal/gateway"
	"github.com/shoal-mqtt/shoal/gateway/quota"
	routersvc "github.com/shoal-mqtt/shoal/router-svc"
)

// applyQuotas gives the roles the tenants' quotas of the configuration
// (`tenants`): the gateway its connection, rate and subscription limits,
// the router max_retained. Either may be nil (a role this broker does not
// run). Without limits nothing is set, and every check is skipped.
//
// In `shoal all` the one gateway counts alone (quota.Local: exact, and
// nothing is written to shoal.quotas). A gateway of a distributed
// deployment shares its counts with the other gateways on the same Kafka
// (quota.Shared, through shoal.quotas): the limits hold for the tenant as
// a whole, within the slack gateway/quota describes.
func (b *Broker) applyQuotas(gw *gateway.Gateway, router *routersvc.Router) {
	t := b.cfg.Tenants
	if gw != nil {
		var backend quota.Backend // nil: quota.Local
		if b.roles != RolesAll {
			backend = quota.NewShared(b.cfg.Gateway.ID)
		}
		gw.SetQuotas(quota.New(t.Quotas(), backend))
	}
	if router != nil {
		router.SetRetainedLimits(t.RetainedLimits())
	}
}

// writeTenantMetrics writes the per-tenant series of /metrics: the
// gateway's connections per tenant, what the tenants' quotas refused and
// throttled, and the retained messages the router did not keep. Tenants
// are in order, one series per tenant a role has seen.
func (b *Broker) writeTenantMetrics(w io.Writer) {
	b.mu.Lock()
	gw, router := b.gateway, b.router
	b.mu.Unlock()
	if gw != nil {
		var conns []series
		gw.EachTenant(func(tenant string, s *gateway.Stats) {
			conns = append(conns, series{tenant: tenant, v: float64(s.Load(gateway.ConnectionsCurrent))})
		})
		writeFamily(w, "shoal_gateway_tenant_connections", "gauge", "MQTT connections established now, per tenant.", conns)

		var refusedCount, refusedRate, refusedSubs, throttles, throttled []series
		gw.Quotas().Each(func(t *quota.Tenant) {
			s := t.Stats()
			refusedCount = append(refusedCount, series{tenant: t.Name(), label: `reason="max_connections"`, v: float64(s.RefusedConnections)})
			refusedRate = append(refusedRate, series{tenant: t.Name(), label: `reason="max_connection_rate"`, v: float64(s.RefusedRate)})
			refusedSubs = append(refusedSubs, series{tenant: t.Name(), v: float64(s.RefusedSubscriptions)})
			throttles = append(throttles, series{tenant: t.Name(), v: float64(s.Throttles)})
			throttled = append(throttled, series{tenant: t.Name(), v: s.Throttled.Seconds()})
		})
		writeFamily(w, "shoal_gateway_quota_connections_refused_total", "counter",
			"CONNECTs refused by the tenant's max_connections (CONNACK 0x97) or max_connection_rate (0x9F).",
			append(refusedCount, refusedRate...))
		writeFamily(w, "shoal_gateway_quota_subscriptions_refused_total", "counter",
			"Subscriptions refused by the tenant's max_subscriptions_per_client (SUBACK 0x97).", refusedSubs)
		writeFamily(w, "shoal_gateway_quota_throttled_total", "counter",
			"Times a client's reader waited for its tenant's max_messages_rate or max_bytes_rate.", throttles)
		writeFamily(w, "shoal_gateway_quota_throttled_seconds_total", "counter",
			"Time clients' readers waited for their tenant's max_messages_rate or max_bytes_rate.", throttled)

		var total, rates []series
		gw.Quotas().Each(func(t *quota.Tenant) {
			s := t.Stats()
			if t.Limits().MaxConnections > 0 {
				total = append(total, series{tenant: t.Name(), v: float64(s.TenantConnections)})
			}
			for _, r := range []quota.Resource{quota.ConnectionRate, quota.Messages, quota.Bytes} {
				if s.Rates[r] > 0 {
					rates = append(rates, series{tenant: t.Name(), label: `rate="` + r.String() + `"`, v: s.Rates[r]})
				}
			}
		})
		writeFamily(w, "shoal_gateway_quota_tenant_connections", "gauge",
			"The tenant's connections counted against its max_connections: this gateway's, and in distributed mode the other gateways' latest reports.", total)
		writeFamily(w, "shoal_gateway_quota_rate", "gauge",
			"The tenant's rate this gateway enforces, per second: its limit, or in distributed mode this gateway's share of it (rate: connections, messages, bytes).", rates)
	}
	if router != nil {
		var refused []series
		for tenant, n := range router.RetainedRefused() {
			refused = append(refused, series{tenant: tenant, v: float64(n)})
		}
		writeFamily(w, "shoal_router_quota_retained_refused_total", "counter",
			"Retained messages delivered but not kept: the tenant held its max_retained.", refused)
	}
}

// series is one tenant's value of a metric family, with an optional
// further label (name="value", escaped).
type series struct {
	tenant, label string
	v             float64
}

// writeFamily writes a metric family in Prometheus' text format, its
// series in order of tenant; a family without series is left out.
func writeFamily(w io.Writer, name, kind, help string, ss []series) {
	if len(ss) == 0 {
		return
	}
	slices.SortFunc(ss, func(a, b series) int {
		return cmp.Or(strings.Compare(a.tenant, b.tenant), strings.Compare(a.label, b.label))
	})
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, kind)
	for _, s := range ss {
		labels := `tenant="` + labelEscaper.Replace(s.tenant) + `"`
		if s.label != "" {
			labels += "," + s.label
		}
		fmt.Fprintf(w, "%s{%s} %s\n", name, labels, strconv.FormatFloat(s.v, 'f', -1, 64))
	}
}

// labelEscaper escapes a label value for the text format: backslash,
// double quote and line feed.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
