package gateway

import (
	"context"
	"time"

	"github.com/shoal-mqtt/shoal/gateway/quota"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

// Tenant quotas (gateway/quota): what a connection does with its tenant's
// limits. The handshake admits the connection against max_connections and
// max_connection_rate (admit); its end releases it (releaseQuota). The
// reader charges each PUBLISH to the tenant's message and byte rates once
// its fixed header is in, before its body is read, and waits while the
// rates are spent (throttle): flow control, the client's writes back up in
// TCP, nothing is refused or lost. SUBSCRIBE refuses the filters beyond
// max_subscriptions_per_client (subscriptionRefused).

// quotaLogInterval bounds the log lines about one tenant's refusals: the
// metrics count every one.
const quotaLogInterval = 10 * time.Second

// connQuota is a connection's share of its tenant's quotas, made by the
// handshake when the tenant has limits (conn.q; nil otherwise, and then
// every check is a nil check). Its fields are the reader's, but wake.
type connQuota struct {
	t    *quota.Tenant
	held bool // one of the tenant's connections is counted for this one: released at its end
	// paid says the PUBLISH whose header is next in the read buffer is
	// charged; until (unix ns), when it may be read (0: now).
	paid  bool
	until int64
	// wake interrupts the reader's wait when the connection is closing
	// (serverClose, close); nil when the tenant has no rate. Buffered: a
	// wake before the wait is not lost.
	wake  chan struct{}
	timer *time.Timer // the reader's wait, reused
}

// Quotas returns the tenants' quotas, nil without any.
func (g *Gateway) Quotas() *quota.Quotas { return g.quotas }

// EachTenant calls f with the counters of every tenant the gateway has
// served, in no order.
func (g *Gateway) EachTenant(f func(tenant string, s *Stats)) {
	g.mu.RLock()
	tenants := make(map[string]*Stats, len(g.tenants))
	for k, v := range g.tenants {
		tenants[k] = v
	}
	g.mu.RUnlock()
	for k, v := range tenants {
		f(k, v)
	}
}

// admit applies the tenant's connection limits to a CONNECT about to be
// asked for its session, and reports whether it may go on. Beyond
// max_connections the client gets CONNACK 0x97 (quota exceeded), beyond
// max_connection_rate 0x9F (connection rate exceeded); a 3.1.1 CONNACK has
// neither and says 3 (server unavailable), which clients take as "try
// again later", unlike 4 and 5, which blame their credentials.
//
// The connection counts from here until its end (releaseQuota, also when
// the handshake fails), so that handshakes under way at once cannot all
// pass the limit. A client identifier that has a connection on this
// gateway is taking it over: the old connection is about to end (the
// session service kicks it), so the new one is not refused by the count
// and both count until then; each is released once.
func (c *conn) admit() bool {
	g := c.g
	t := g.quotas.Tenant(c.tenant)
	if t == nil {
		return true
	}
	g.mu.RLock()
	_, takeover := g.clients[c.clientsKey]
	g.mu.RUnlock()
	now := g.clock()
	var code packet.ReasonCode
	switch t.Admit(now, takeover) {
	case quota.Admitted:
		c.q = &connQuota{t: t, held: true}
		if t.Rated() {
			c.q.wake = make(chan struct{}, 1)
		}
		return true
	case quota.RefusedConnections:
		code = packet.CodeQuotaExceeded
	default:
		code = packet.CodeConnectionRateExceeded
	}
	if t.LogDue(now, quotaLogInterval) {
		c.refuseFor(causeQuota, code)
		return false
	}
	c.refuse(code, c.version) // the tenant's refusals were logged lately
	return false
}

// releaseQuota uncounts the connection from its tenant's connections, once:
// at its end, or when its handshake fails after admit. Reader owner only.
func (c *conn) releaseQuota() {
	if q := c.q; q != nil && q.held {
		q.held = false
		q.t.Release()
	}
}

// throttle holds the reader back while its tenant's message or byte rate
// is spent (c.q is not nil). It charges the PUBLISH whose fixed header is
// next in the read buffer, reading the socket until the header is in
// (only once per packet: paid), and then waits, reading nothing more, until
// the rates have paid for it: the client's writes back up in the socket
// buffers and TCP's window, and nothing is refused or lost. A packet that
// is not a PUBLISH, or a read that fails, is left to the caller's read.
//
// It reports whether the caller must not read the packet yet: after a
// wait, because the read deadline it set may have passed meanwhile (it
// sets it again and calls throttle again, which finds the packet paid); or
// on a poller's worker (nonblock), which never waits, when a wait is due:
// the worker gives the connection a reader goroutine of its own, whose
// throttle waits.
//
// The keep alive counts from the end of a wait: the client has sent (the
// header is in), and a PINGREQ it sent meanwhile waits unread behind its
// publishes, so the time the gateway chose not to read is not held against
// it.
func (c *conn) throttle() bool {
	q := c.q
	if q.wake == nil {
		return false // no rate
	}
	if !q.paid {
		h, size, err := c.rd.PeekHeader()
		if err != nil || h.Type != packet.PUBLISH {
			return false
		}
		q.paid = true
		now := c.g.clock()
		if d := q.t.ChargePublish(now, size); d > 0 {
			q.until = now.Add(d).UnixNano()
			q.t.Throttled(d)
		}
	}
	if q.until == 0 {
		return false
	}
	if c.nonblock {
		return true
	}
	if d := time.Duration(q.until - c.g.clock().UnixNano()); d > 0 {
		if q.timer == nil {
			q.timer = time.NewTimer(d)
		} else {
			q.timer.Reset(d)
		}
		select {
		case <-q.timer.C:
		case <-q.wake: // closing: the caller finds out
			q.timer.Stop()
		}
	}
	q.until = 0
	c.lastPacket = c.g.clock().UnixNano()
	return true
}

// readQuota notes that the reader took a packet off the read buffer: the
// next one is not paid yet.
func (c *conn) readQuota() {
	if c.q != nil {
		c.q.paid = false
	}
}

// interruptWait ends a wait of the reader in throttle: the connection is
// closing.
func (c *conn) interruptWait() {
	if q := c.q; q != nil && q.wake != nil {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
}

// subscriptionRefused reports whether filter would be one subscription
// too many for the tenant's max_subscriptions_per_client, counting the
// refusal; a filter the client has already is replaced, not added. The
// SUBACK then says 0x97 (quota exceeded) for it, 0x80 (failure) in 3.1.1.
func (c *conn) subscriptionRefused(filter string) bool {
	q := c.q
	if q == nil {
		return false
	}
	limit := q.t.Limits().MaxSubscriptionsPerClient
	if limit <= 0 {
		return false
	}
	c.mu.Lock()
	_, had := c.subs[filter]
	n := len(c.subs)
	c.mu.Unlock()
	if had || n < limit {
		return false
	}
	q.t.SubscriptionRefused()
	if now := c.g.clock(); q.t.LogDue(now, quotaLogInterval) {
		c.logInfo(context.Background(), "subscription refused by the tenant's quota",
			"filter", filter, "max_subscriptions_per_client", limit)
	}
	return true
}
