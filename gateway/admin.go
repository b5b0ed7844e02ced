package gateway

import (
	"cmp"
	"strings"
	"time"

	"github.com/shoal-mqtt/shoal/internal/firstn"
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
	out, _ := g.ClientsPage(tenant, allTenants, ClientPage{})
	return out
}

// ClientPage selects a page of a gateway's connections: those after the
// key (AfterTenant, AfterClient) in the order of tenant and client id,
// whose client id holds Search in any case, Limit of them at most (0: all).
type ClientPage struct {
	AfterTenant, AfterClient, Search string
	Limit                            int
}

// ClientsPage is Clients for page p, and whether more follow it. The
// page's connections are picked (firstn: the least Limit of them,
// without sorting the rest) before any is described, so a page costs its
// own rows' descriptions, not every connection's (the console lists 50 of
// 10,000).
func (g *Gateway) ClientsPage(tenant string, allTenants bool, p ClientPage) ([]ClientInfo, bool) {
	search := strings.ToLower(p.Search)
	paged := p.AfterTenant != "" || p.AfterClient != ""
	keep := firstn.New(p.Limit, func(a, b *conn) int {
		return cmp.Or(cmp.Compare(a.tenant, b.tenant), cmp.Compare(a.clientID, b.clientID))
	})
	g.mu.RLock()
	for _, c := range g.clients {
		if !allTenants && c.tenant != tenant {
			continue
		}
		if paged && cmp.Or(cmp.Compare(c.tenant, p.AfterTenant), cmp.Compare(c.clientID, p.AfterClient)) <= 0 {
			continue
		}
		if search != "" && !strings.Contains(strings.ToLower(c.clientID), search) {
			continue
		}
		keep.Offer(c)
	}
	g.mu.RUnlock()
	conns, more := keep.Result()
	out := make([]ClientInfo, len(conns))
	for i, c := range conns {
		out[i] = c.info()
	}
	return out, more
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
