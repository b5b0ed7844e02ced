package config

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/shoal-mqtt/shoal/gateway/quota"
	routersvc "github.com/shoal-mqtt/shoal/router-svc"
)

// DefaultTenant is the entry of Tenants that applies to every tenant.
const DefaultTenant = "default"

// Tenants is the `tenants` section: quotas per tenant. The entry "default"
// applies to every tenant; a tenant's own entry, under its name ("" names
// the tenant of client identifiers without the separator), overrides the
// keys it sets and takes the others from "default". A limit of 0 is no
// limit: 0 in a tenant's entry lifts the default's limit for it. Without
// the section, or with only zeros, nothing is limited.
//
//	tenants:
//	  default:
//	    max_connections: 10000
//	    max_messages_rate: 1000
//	  acme:
//	    max_connections: 50
//
// The gateway enforces the limits (gateway/quota): in `shoal all` alone;
// in a distributed deployment each gateway for the clients it holds,
// counting the other gateways' through shoal.quotas, so that the limits
// hold for the tenant across the gateways within a slack (quota.Shared).
// Each router shard enforces max_retained for the topics it holds, its
// share of the bound (router-svc/quota.go).
type Tenants map[string]TenantLimits

// TenantLimits is one entry of Tenants; a key not set (nil) is the
// default entry's.
type TenantLimits struct {
	// MaxConnections bounds the tenant's connections at once; beyond it
	// CONNACK 0x97 (3.1.1: 3).
	MaxConnections *int64 `yaml:"max_connections"`
	// MaxConnectionRate bounds new connections per second (a token
	// bucket holding ConnectionBurst, by default one second's worth);
	// beyond it CONNACK 0x9F (3.1.1: 3).
	MaxConnectionRate *float64 `yaml:"max_connection_rate"`
	ConnectionBurst   *int64   `yaml:"connection_burst"`
	// MaxMessagesRate and MaxBytesRate bound the PUBLISH packets and
	// bytes the tenant's clients send per second, each with a burst of
	// one second's worth: a client beyond them is read more slowly.
	MaxMessagesRate *float64  `yaml:"max_messages_rate"`
	MaxBytesRate    *ByteSize `yaml:"max_bytes_rate"`
	// MaxSubscriptionsPerClient bounds one client's subscriptions; the
	// filters of a SUBSCRIBE beyond it get SUBACK 0x97 (3.1.1: 0x80).
	MaxSubscriptionsPerClient *int64 `yaml:"max_subscriptions_per_client"`
	// MaxRetained bounds the retained messages the tenant holds; a
	// retained message on a new topic beyond it is delivered, not kept.
	MaxRetained *int64 `yaml:"max_retained"`
}

// limits are one tenant's limits, resolved.
type limits struct {
	maxConnections, connectionBurst, maxBytesRate, maxSubscriptions, maxRetained int64
	connectionRate, messagesRate                                                 float64
}

// merge returns d with the keys e sets replaced.
func merge(d limits, e TenantLimits) limits {
	set := func(dst *int64, v *int64) {
		if v != nil {
			*dst = *v
		}
	}
	setF := func(dst *float64, v *float64) {
		if v != nil {
			*dst = *v
		}
	}
	set(&d.maxConnections, e.MaxConnections)
	setF(&d.connectionRate, e.MaxConnectionRate)
	set(&d.connectionBurst, e.ConnectionBurst)
	setF(&d.messagesRate, e.MaxMessagesRate)
	if e.MaxBytesRate != nil {
		d.maxBytesRate = int64(*e.MaxBytesRate)
	}
	set(&d.maxSubscriptions, e.MaxSubscriptionsPerClient)
	set(&d.maxRetained, e.MaxRetained)
	return d
}

// resolved returns the limits of the default entry and of every tenant
// with an entry of its own.
func (t Tenants) resolved() (def limits, own map[string]limits) {
	def = merge(limits{}, t[DefaultTenant])
	own = make(map[string]limits, len(t))
	for name, e := range t {
		if name != DefaultTenant {
			own[name] = merge(def, e)
		}
	}
	return def, own
}

func (l limits) quota() quota.Limits {
	return quota.Limits{
		MaxConnections:            l.maxConnections,
		ConnectionRate:            l.connectionRate,
		ConnectionBurst:           l.connectionBurst,
		MessagesRate:              l.messagesRate,
		BytesRate:                 l.maxBytesRate,
		MaxSubscriptionsPerClient: int(l.maxSubscriptions),
	}
}

// Quotas returns the gateway's limits per tenant (all but max_retained).
func (t Tenants) Quotas() quota.Config {
	def, own := t.resolved()
	c := quota.Config{Default: def.quota(), Tenants: make(map[string]quota.Limits, len(own))}
	for name, l := range own {
		c.Tenants[name] = l.quota()
	}
	return c
}

// RetainedLimits returns the router's max_retained per tenant.
func (t Tenants) RetainedLimits() routersvc.RetainedLimits {
	def, own := t.resolved()
	r := routersvc.RetainedLimits{Default: def.maxRetained, Tenants: make(map[string]int64, len(own))}
	for name, l := range own {
		r.Tenants[name] = l.maxRetained
	}
	return r
}

// Validate reports every invalid key of the section, each named:
// tenants.acme.max_connections.
func (t Tenants) Validate() error {
	var errs []error
	names := make([]string, 0, len(t))
	for name := range t {
		names = append(names, name)
	}
	slices.Sort(names)
	def := merge(limits{}, t[DefaultTenant])
	for _, name := range names {
		e := t[name]
		key := func(k string) string { return "tenants." + tenantKey(name) + "." + k }
		for k, v := range map[string]*int64{
			"max_connections": e.MaxConnections, "connection_burst": e.ConnectionBurst,
			"max_subscriptions_per_client": e.MaxSubscriptionsPerClient, "max_retained": e.MaxRetained,
			"max_bytes_rate": (*int64)(e.MaxBytesRate),
		} {
			if v != nil && *v < 0 {
				errs = append(errs, fmt.Errorf("%s: must be ≥ 0, is %d", key(k), *v))
			}
		}
		for k, v := range map[string]*float64{"max_connection_rate": e.MaxConnectionRate, "max_messages_rate": e.MaxMessagesRate} {
			if v != nil && (*v < 0 || math.IsNaN(*v) || math.IsInf(*v, 0)) {
				errs = append(errs, fmt.Errorf("%s: must be a number ≥ 0, is %v", key(k), *v))
			}
		}
		if e.MaxSubscriptionsPerClient != nil && *e.MaxSubscriptionsPerClient > math.MaxInt32 {
			errs = append(errs, fmt.Errorf("%s: must be at most %d", key("max_subscriptions_per_client"), math.MaxInt32))
		}
		l := def
		if name != DefaultTenant {
			l = merge(def, e)
		}
		if e.ConnectionBurst != nil && *e.ConnectionBurst > 0 && l.connectionRate <= 0 {
			errs = append(errs, fmt.Errorf("%s: a burst without max_connection_rate", key("connection_burst")))
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

// tenantKey writes a tenant's name as a key of an error message: quoted
// when it is empty or holds a dot or a space.
func tenantKey(name string) string {
	if name == "" || strings.ContainsAny(name, ". \t\"") {
		return strconv.Quote(name)
	}
	return name
}
