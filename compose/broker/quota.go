package broker

import "github.com/shoal-mqtt/shoal/gateway/quota"

// quotas are the gateway's quotas of the tenants of the configuration
// (`tenants`): its connection, rate and subscription limits; the router's
// max_retained is routersvc.WithRetainedLimits. Without limits every
// check is skipped.
//
// In `shoal all` the one gateway counts alone (quota.Local: exact, and
// nothing is written to shoal.quotas). A gateway of a distributed
// deployment shares its counts with the other gateways on the same Kafka
// (quota.Shared, through shoal.quotas): the limits hold for the tenant as
// a whole, within the slack gateway/quota describes.
func (b *Broker) quotas() *quota.Quotas {
	var backend quota.Backend // nil: quota.Local
	if b.roles != RolesAll {
		backend = quota.NewShared(b.cfg.Gateway.ID)
	}
	return quota.New(b.cfg.Tenants.Quotas(), backend)
}
