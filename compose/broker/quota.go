package broker

import (
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
