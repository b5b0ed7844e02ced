package gateway

import (
	"cmp"
	"slices"
	"time"
)

// ClientInfo is one connection of this gateway as an operator sees it
// (shoal ctl clients, through the admin API that compose/admin serves).
type ClientInfo struct {
	Tenant   string
	ClientID string
	// Username is the identity the CONNECT proved, "" when anonymous.
	Username string
	// Address is the client's: the socket's peer or a PROXY header's
	// source.
	Address string
	// Listener is "mqtt", "ws", "mqtts" or "wss".
	Listener string
	// ProtocolVersion is the protocol level: 3 or 4 (3.1, 3.1.1), 5.
	ProtocolVersion int
	// ConnectedAt is when the session service was asked to accept it.
	ConnectedAt time.Time
	KeepAlive   time.Duration
	// SessionExpiryS is the session expiry interval the client asked for.
	SessionExpiryS uint32
	// Inflight is the QoS 1/2 messages sent to the client and not
	// acknowledged yet; Queued those waiting for room in its receive
	// window; InflightIn the client's QoS 1/2 publishes not completed.
	Inflight, Queued, InflightIn int
	// Subscriptions is the number of filters subscribed on the
	// connection.
	Subscriptions int
}

// Clients returns the connections of tenant (of every tenant with
// allTenants) that the session service accepted and that have not ended,
// sorted by tenant and client id.
func (g *Gateway) Clients(tenant string, allTenants bool) []ClientInfo {
	g.mu.RLock()
	conns := make([]*conn, 0, len(g.clients))
	for _, c := range g.clients {
		if allTenants || c.tenant == tenant {
			conns = append(conns, c)
		}
	}
	g.mu.RUnlock()
	out := make([]ClientInfo, len(conns))
	for i, c := range conns {
		out[i] = c.info()
	}
	slices.SortFunc(out, func(a, b ClientInfo) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.ClientID, b.ClientID))
	})
	return out
}

// Client returns the connection of a client, and whether it has one on
// this gateway.
func (g *Gateway) Client(tenant, clientID string) (ClientInfo, bool) {
	g.mu.RLock()
	c := g.clients[clientKey(tenant, clientID)]
	g.mu.RUnlock()
	if c == nil {
		return ClientInfo{}, false
	}
	return c.info(), true
}

// info describes c: the handshake's fields (set before the slot consumer
// registered c under Gateway.mu, read-only since), and under c.mu what
// traffic is under way.
func (c *conn) info() ClientInfo {
	ci := ClientInfo{
		Tenant: c.tenant, ClientID: c.clientID, Listener: listenerName(c.listener),
		ProtocolVersion: int(c.version), ConnectedAt: time.Unix(0, c.connectedAt),
		KeepAlive: c.keepAlive, SessionExpiryS: c.sessionExpiry,
		InflightIn: int(c.inInflight.Load()),
	}
	if c.ident != nil {
		ci.Username = c.ident.Name
	}
	if c.clientAddr != nil {
		ci.Address = c.clientAddr.String()
	} else if a := c.nc.RemoteAddr(); a != nil {
		ci.Address = a.String()
	}
	c.mu.Lock()
	if c.flow != nil {
		ci.Inflight, ci.Queued = len(c.inflight), len(c.queue)
	}
	ci.Subscriptions = len(c.subs)
	c.mu.Unlock()
	return ci
}

// listenerCode packs a listener's name into the connection (a byte, not a
// string: the connection's struct stays in its size class).
func listenerCode(name string) uint8 {
	switch name {
	case "mqtt":
		return 1
	case "ws":
		return 2
	case "mqtts":
		return 3
	case "wss":
		return 4
	}
	return 0
}

func listenerName(code uint8) string {
	switch code {
	case 1:
		return "mqtt"
	case 2:
		return "ws"
	case 3:
		return "mqtts"
	case 4:
		return "wss"
	}
	return ""
}
