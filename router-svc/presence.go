package routersvc

import (
	"strings"
	"sync"

	"github.com/shoal-mqtt/shoal/internal/intern"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// clientKey names a client across tenants. A struct of the two strings,
// not a joined string, so no choice of separator can make two clients
// collide.
type clientKey struct {
	Tenant string
	Client string
}

// route is where a client's connection is: the gateway slot, the
// connection id there and the session generation.
type route struct {
	slot int32
	conn uint64
	gen  uint64
}

func routeOf(r *eventspb.Route) route {
	return route{slot: r.GetSlot(), conn: r.GetConnection(), gen: r.GetGeneration()}
}

func (r route) proto() *eventspb.Route {
	return &eventspb.Route{Slot: r.slot, Connection: r.conn, Generation: r.gen}
}

type presenceState struct {
	route      route
	online     bool
	persistent bool
	// sessionGen is the generation of the connection that began the
	// client's session (Presence.session_generation): a subscription of
	// an older generation is left from an ended session. 0 when unknown.
	sessionGen uint64
}

// presenceEntry is a client's presence. Its address is stable while the
// client is known, so a shard caches it and reads it without hashing the
// client's key (fields guarded by Presence.mu).
type presenceEntry struct {
	st      presenceState
	deleted bool // removed from the map: look the client up again
}

// Presence is the router's view of shoal.presence: for each client the
// newest presence by generation (its route, whether it is online, whether
// its session is persistent). One Presence is fed by one consumer of
// shoal.presence and read by every shard of the process; it is safe for
// concurrent use.
type Presence struct {
	mu      sync.RWMutex
	m       map[clientKey]*presenceEntry
	tenants *intern.Table // one copy of each tenant the keys hold
	// inserts counts the entries ever added: a shard that found no entry
	// for a client need not look again while it is unchanged.
	inserts uint64
}

// NewPresence returns an empty Presence.
func NewPresence() *Presence {
	return &Presence{m: make(map[clientKey]*presenceEntry), tenants: intern.New(4096)}
}

// Update records p for the client unless a presence of a newer generation
// is already known. A presence of the same generation replaces the known
// one: the session service writes a connection's later state (offline
// after online) with the connection's generation. Update copies the
// strings it keeps, so they may alias a record buffer.
func (p *Presence) Update(tenant, client string, pr *eventspb.Presence) {
	st := presenceState{route: routeOf(pr.GetRoute()), online: pr.GetOnline(), persistent: pr.GetPersistent(),
		sessionGen: pr.GetSessionGeneration()}
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.m[clientKey{Tenant: tenant, Client: client}]; e != nil {
		if e.st.route.gen <= st.route.gen {
			e.st = st
		}
		return
	}
	p.m[clientKey{Tenant: p.tenants.Get(tenant), Client: strings.Clone(client)}] = &presenceEntry{st: st}
	p.inserts++
}

// Delete forgets the client, for a tombstone of the compacted presence
// topic (the session service deletes the presence of an ended session).
func (p *Presence) Delete(tenant, client string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delete(clientKey{Tenant: tenant, Client: client})
}

// delete removes k's entry, if any. The caller holds p.mu.
func (p *Presence) delete(k clientKey) {
	if e := p.m[k]; e != nil {
		e.deleted = true
		delete(p.m, k)
	}
}

// deleteRecordKey forgets the client of a shoal.presence record key (its
// tenant and client id, kafka.SplitKey), for a tombstone. It returns
// SplitKey's error for a key that names no client.
func (p *Presence) deleteRecordKey(key []byte) error {
	tenant, client, err := kafka.SplitKey(key)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delete(clientKey{Tenant: string(tenant), Client: string(client)})
	return nil
}

// Lookup returns a copy of the client's known presence.
func (p *Presence) Lookup(tenant, client string) (*eventspb.Presence, bool) {
	p.mu.RLock()
	e := p.m[clientKey{Tenant: tenant, Client: client}]
	var st presenceState
	if e != nil {
		st = e.st
	}
	p.mu.RUnlock()
	if e == nil {
		return nil, false
	}
	return &eventspb.Presence{Online: st.online, Route: st.route.proto(), Persistent: st.persistent,
		SessionGeneration: st.sessionGen}, true
}

// Len returns the number of clients known.
func (p *Presence) Len() int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return len(p.m)
}

// resolve returns where c is and whether it is online: the newest by
// generation of the route learned from its subscription changes (known
// online, since a live connection made them) and its presence. A presence
// of the same generation wins, as it may say the connection has ended. c
// caches its presence entry (c is the calling shard's). The caller holds
// p.mu for reading.
func (p *Presence) resolve(tenant string, c *client) (route, bool) {
	r, online, _, _ := p.resolveFull(tenant, c)
	return r, online
}

// resolveFull is resolve that also reports whether the client's session
// is persistent (its QoS 1/2 messages go through its inbox, online or
// not): the presence's word, or, before the presence of the route's
// generation has arrived, the subscription change's; and the generation
// the client's session began with, as far as the presence knows (0 when it
// does not): a subscription of an older generation is left from an ended
// session.
func (p *Presence) resolveFull(tenant string, c *client) (r route, online, persistent bool, sessionGen uint64) {
	e := c.presence
	if e == nil || e.deleted {
		if e != nil || c.presenceInserts != p.inserts {
			e = p.m[clientKey{Tenant: tenant, Client: c.id}]
			c.presence, c.presenceInserts = e, p.inserts
		}
	}
	if e == nil {
		return c.learned, true, c.learnedPersistent, 0
	}
	if e.st.route.gen >= c.learned.gen {
		return e.st.route, e.st.online, e.st.persistent, e.st.sessionGen
	}
	// An older presence still knows when the session began.
	return c.learned, true, c.learnedPersistent, e.st.sessionGen
}

// sessionGen returns the generation the client's session began with, as
// far as the presence knows; 0 when it does not.
func (p *Presence) sessionGen(tenant, client string) uint64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if e := p.m[clientKey{Tenant: tenant, Client: client}]; e != nil {
		return e.st.sessionGen
	}
	return 0
}
