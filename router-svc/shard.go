package routersvc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shoal-mqtt/shoal/internal/mqtt/topic"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// ErrMalformed is wrapped by the errors of [Shard.Apply] and of the
// ShardLoader methods for a record or row the shard cannot use (no event
// it handles, a missing field, an invalid topic or filter). The shard
// skips such a record; its offset still counts as applied.
var ErrMalformed = errors.New("malformed record")

// Shard is the deterministic state machine of one partition of
// shoal.messages: the subscription index (a topic trie per tenant, holding
// the concrete filters whose topic hashes to this partition and every
// wildcard filter), the retained messages of the topics that hash here and
// the offset of the last record applied. See docs/router.md, "One shard
// per partition".
//
// Apply does no I/O: it changes the in-memory state and appends to an
// [Output] the deliveries to produce and the mutations to store. A Shard is
// not safe for concurrent use: one goroutine applies records to it. It
// reads the shared [Presence], which is.
type Shard struct {
	// mu serialises the router's applying of a batch and the express
	// path's routing (express.go); a Shard used on its own needs no lock.
	mu sync.Mutex
	// xdec decodes the express path's publishes and xrecs holds their
	// records, under mu.
	xdec  kafka.PublishDecoder
	xrecs []*kafka.Record

	partition int32
	presence  *Presence
	clock     func() time.Time
	offset    int64
	tenants   map[string]*tenant
	expiries  expiryHeap
	// maxTargets bounds the targets of one delivery record.
	maxTargets int
	// sharedHash picks shared members by message identity instead of
	// round robin (Config.SharedStrategy).
	sharedHash bool
	// rquota bounds the tenants' retained messages (quota.go); nil: no
	// bound.
	rquota *RetainedQuota
	// met are the router's metrics (metrics.go); nil: none. routed is
	// what the last publish applied matched, for them.
	met    *routerMetrics
	routed routeNote

	// Scratch reused from Apply to Apply.
	epoch    uint64 // numbers each publish; stamps clients and groups
	matches  []topic.Entry[subKey, *sub]
	groups   []*shareGroup
	rmatch   []*retained
	laneMap  map[lane]*eventspb.Delivery // a publish's deliveries, past the first few
	laneMapE uint64                      // epoch for which laneMap is valid
}

// tenant is one tenant's part of a shard; nothing is shared across tenants.
type tenant struct {
	name     string
	subs     topic.Trie[subKey, *sub]
	clients  map[string]*client
	groups   map[filterKey]*shareGroup
	retained retainedTree
	// unreleased holds, by client id, the packet identifiers of QoS 2
	// messages of persistent sessions routed here and not released yet
	// (unreleased.go).
	unreleased map[string]*unreleasedIDs
}

// subKey is the trie key of a subscription: within one filter, a client
// has one plain subscription and one per share group.
type subKey struct {
	client string
	group  string
}

// filterKey names a subscription within a client (or a shared
// subscription within a tenant): share group and filter.
type filterKey struct {
	group  string
	filter string
}

// client is a client with subscriptions in the shard: its subscriptions
// (for REMOVE and REMOVE_ALL) and the newest route learned from its
// subscription changes.
type client struct {
	id      string
	learned route
	// learnedPersistent is what the ADD that gave learned said of the
	// session (SubscriptionChange.persistent_session): the presence's
	// answer until the presence of that generation arrives. Not stored:
	// a restarted router reads the presence before it routes.
	learnedPersistent bool
	subs              map[filterKey]*sub

	// The client's entry in the Presence, cached: nil when it had none
	// while the Presence had seen presenceInserts entries.
	presence        *presenceEntry
	presenceInserts uint64

	// Scratch of one publish: when stamp is the shard's epoch, target is
	// the client's target in the current publish, or nil when the client
	// is offline, and sessionGen the generation its session began with.
	stamp      uint64
	target     *eventspb.Target
	sessionGen uint64
}

// sub is one subscription, the value stored in the trie.
type sub struct {
	client  *client
	filter  string
	share   string      // the share group's name, "" when not shared
	group   *shareGroup // nil when not shared
	qos     uint32
	noLocal bool
	rap     bool
	rh      uint32
	id      uint32
	route   route // of the connection that made it; route.gen is the entry's generation
}

func (s *sub) setOptions(o *eventspb.SubscriptionOptions) {
	s.qos = min(o.GetQos(), 2)
	s.noLocal = o.GetNoLocal()
	s.rap = o.GetRetainAsPublished()
	s.rh = o.GetRetainHandling()
	s.id = o.GetSubscriptionId()
}

func (s *sub) options() *eventspb.SubscriptionOptions {
	return &eventspb.SubscriptionOptions{
		Qos: s.qos, NoLocal: s.noLocal, RetainAsPublished: s.rap,
		RetainHandling: s.rh, SubscriptionId: s.id,
	}
}

// shareGroup is one shared subscription ($share/{group}/{filter}) of a
// tenant: its members in client id order and the round-robin position.
type shareGroup struct {
	members []*sub
	next    int
	stamp   uint64 // the epoch of the publish that last matched it
}

func (g *shareGroup) add(s *sub) {
	i, _ := slices.BinarySearchFunc(g.members, s.client.id, func(m *sub, id string) int {
		return strings.Compare(m.client.id, id)
	})
	g.members = slices.Insert(g.members, i, s)
}

func (g *shareGroup) remove(s *sub) {
	if i := slices.Index(g.members, s); i >= 0 {
		g.members = slices.Delete(g.members, i, i+1)
	}
}

// NewShard returns an empty shard for partition, with offset -1 (no record
// applied). presence is the process's presence view and clock its clock.
func NewShard(partition int32, presence *Presence, clock func() time.Time) *Shard {
	return &Shard{
		partition:  partition,
		presence:   presence,
		clock:      clock,
		offset:     -1,
		tenants:    make(map[string]*tenant),
		laneMap:    make(map[lane]*eventspb.Delivery),
		maxTargets: DefaultMaxTargets,
	}
}

// DefaultMaxTargets is the default bound on the targets of one delivery
// record: a publish with more targets on one gateway becomes several
// records for that slot, so a record stays far below Kafka's maximum
// message size (1000 targets take some 30–60 kB besides the message).
const DefaultMaxTargets = 1000

// SetSharedStrategy sets how a shared subscription's member is chosen:
// SharedRoundRobin or SharedHash.
func (s *Shard) SetSharedStrategy(strategy string) { s.sharedHash = strategy == SharedHash }

// SetMaxTargets bounds the targets of one delivery record; n < 1 means
// [DefaultMaxTargets].
func (s *Shard) SetMaxTargets(n int) {
	if n < 1 {
		n = DefaultMaxTargets
	}
	s.maxTargets = n
}

// OpenShard loads the shard of partition from st.
func OpenShard(ctx context.Context, st Store, partition int32, presence *Presence, clock func() time.Time) (*Shard, error) {
	s := NewShard(partition, presence, clock)
	off, err := st.LoadShard(ctx, partition, s)
	if err != nil {
		return nil, fmt.Errorf("load shard %d: %w", partition, err)
	}
	s.offset = off
	return s, nil
}

// Partition returns the shard's partition of shoal.messages.
func (s *Shard) Partition() int32 { return s.partition }

// Offset returns the offset of the last record applied, or -1.
func (s *Shard) Offset() int64 { return s.offset }

// SetOffset sets the offset of the last record applied, for a shard built
// from stored rows with its ShardLoader methods.
func (s *Shard) SetOffset(offset int64) { s.offset = offset }

// Subscriptions returns the number of subscriptions held.
func (s *Shard) Subscriptions() int {
	n := 0
	for _, t := range s.tenants {
		n += t.subs.Len()
	}
	return n
}

// RetainedCount returns the number of retained messages held.
func (s *Shard) RetainedCount() int {
	n := 0
	for _, t := range s.tenants {
		n += t.retained.n
	}
	return n
}

// LoadSubscription adds a stored subscription, without output; it
// implements [ShardLoader].
func (s *Shard) LoadSubscription(sub Subscription) error {
	if sub.Client == "" || sub.Route == nil {
		return fmt.Errorf("%w: subscription without client or route", ErrMalformed)
	}
	if err := topic.ValidateFilter(sub.Filter); err != nil {
		return fmt.Errorf("%w: subscription filter: %w", ErrMalformed, err)
	}
	s.tenant(sub.Tenant).upsert(sub.Client, sub.ShareGroup, sub.Filter, sub.Options, routeOf(sub.Route))
	return nil
}

// LoadRetained adds a stored retained message, without output; it
// implements [ShardLoader]. The shard keeps publish.
func (s *Shard) LoadRetained(publish *eventspb.Envelope) error {
	msg := publish.GetPublish().GetMessage()
	if msg == nil {
		return fmt.Errorf("%w: retained row without a publish", ErrMalformed)
	}
	if err := topic.ValidateName(msg.Topic); err != nil {
		return fmt.Errorf("%w: retained topic: %w", ErrMalformed, err)
	}
	s.storeRetained(s.tenant(publish.Tenant), publish)
	return nil
}

// Apply applies the record at offset: a Publish, a SubscriptionChange, a
// SharedRedispatch or a PublishRelease (docs/router.md, "What a shard does
// with each record"). It appends the deliveries to produce and the state
// mutations to store to out, and sets out.Mutations.Offset. A record at
// or below the shard's offset was applied already and is ignored. A
// record the shard cannot use is skipped with an error wrapping
// [ErrMalformed]; its offset still counts as applied. Apply copies what it
// keeps of rec, strings included, so rec may alias a record buffer
// (kafka.DecodeEnvelope); see [Output] for what out refers to until it is
// reset.
func (s *Shard) Apply(rec *eventspb.Envelope, offset int64, out *Output) error {
	if offset <= s.offset {
		return nil
	}
	s.offset = offset
	out.Mutations.Offset = offset
	switch ev := rec.GetEvent().(type) {
	case *eventspb.Envelope_Publish:
		return s.publish(rec, ev.Publish, out)
	case *eventspb.Envelope_SubscriptionChange:
		return s.change(rec, ev.SubscriptionChange, out)
	case *eventspb.Envelope_SharedRedispatch:
		return s.redispatch(rec, ev.SharedRedispatch, out)
	case *eventspb.Envelope_PublishRelease:
		return s.release(rec, ev.PublishRelease, out)
	default:
		return fmt.Errorf("%w: unexpected event %T at offset %d", ErrMalformed, ev, offset)
	}
}

// Skip counts the record at offset as applied without applying it, for a
// record that cannot be decoded.
func (s *Shard) Skip(offset int64, out *Output) {
	if offset > s.offset {
		s.offset = offset
		out.Mutations.Offset = offset
	}
}

// ExpireRetained deletes the retained messages that have expired by the
// shard's clock, appending their deletions to out, and returns how many it
// deleted. Expired messages are never sent; this frees them.
func (s *Shard) ExpireRetained(out *Output) int {
	nowMs := s.clock().UnixMilli()
	n := 0
	out.Mutations.Offset = max(out.Mutations.Offset, s.offset)
	for r := s.expiries.peek(); r != nil && r.expired(nowMs); r = s.expiries.peek() {
		s.removeRetained(r, out)
		n++
	}
	return n
}

func (s *Shard) tenant(name string) *tenant {
	t := s.tenants[name]
	if t == nil {
		t = &tenant{
			name:    strings.Clone(name),
			clients: make(map[string]*client),
			groups:  make(map[filterKey]*shareGroup),
		}
		s.tenants[t.name] = t
	}
	return t
}

// dropIfEmpty forgets a tenant left without subscriptions or retained
// messages.
func (s *Shard) dropIfEmpty(t *tenant) {
	if len(t.clients) == 0 && t.retained.n == 0 && len(t.unreleased) == 0 {
		delete(s.tenants, t.name)
	}
}

func (s *Shard) change(env *eventspb.Envelope, ch *eventspb.SubscriptionChange, out *Output) error {
	if env.ClientId == "" {
		return fmt.Errorf("%w: subscription change without a client", ErrMalformed)
	}
	gen := ch.GetRoute().GetGeneration()
	switch ch.Op {
	case eventspb.SubscriptionChange_OP_ADD:
		if ch.Route == nil {
			return fmt.Errorf("%w: subscription add without a route", ErrMalformed)
		}
		if err := topic.ValidateFilter(ch.Filter); err != nil {
			return fmt.Errorf("%w: subscription filter: %w", ErrMalformed, err)
		}
		t := s.tenant(env.Tenant)
		r := routeOf(ch.Route)
		sb, prevGen, existed, stale := t.upsert(env.ClientId, ch.ShareGroup, ch.Filter, ch.Options, r)
		if stale {
			return nil
		}
		if existed && prevGen < ch.GetSessionGeneration() {
			// The entry replaced was an ended session's (taken over, its
			// REMOVE_ALL still to come): for the new session this is a
			// new subscription (retain handling 1).
			existed = false
		}
		if c := sb.client; c.learned.gen == r.gen {
			c.learnedPersistent = ch.GetPersistentSession()
		}
		out.Mutations.putSubscription(SubscriptionMutation{Subscription: Subscription{
			SubscriptionKey: SubscriptionKey{Tenant: t.name, Client: sb.client.id, ShareGroup: sb.share, Filter: sb.filter},
			Options:         sb.options(),
			Route:           sb.route.proto(),
		}})
		// An ADD older than the generation the client's session began
		// with belongs to a session that has ended (written before a
		// takeover, it reached the shard after the REMOVE_ALL of its
		// session): it is kept, since the view is what the log says
		// whatever the presence (a rebuild, a replay), but routes nothing
		// (plan.target), retained messages included; the client's next
		// REMOVE_ALL removes it (the session service sends the next one
		// to every partition).
		ended := r.gen < s.presence.sessionGen(env.Tenant, env.ClientId)
		if !ended && sb.group == nil && !ch.GetResume() && (sb.rh == 0 || (sb.rh == 1 && !existed)) {
			s.sendRetained(t, sb, out)
		}
	case eventspb.SubscriptionChange_OP_REMOVE:
		t := s.tenants[env.Tenant]
		if t == nil {
			return nil
		}
		c := t.clients[env.ClientId]
		if c == nil {
			return nil
		}
		if sb := c.subs[filterKey{group: ch.ShareGroup, filter: ch.Filter}]; sb != nil && sb.route.gen <= gen {
			s.removeSub(t, sb, out)
		}
		s.dropIfEmpty(t)
	case eventspb.SubscriptionChange_OP_REMOVE_ALL:
		t := s.tenants[env.Tenant]
		if t == nil {
			return nil
		}
		if c := t.clients[env.ClientId]; c != nil {
			for _, sb := range c.subs {
				if sb.route.gen <= gen {
					s.removeSub(t, sb, out)
				}
			}
		}
		// The session ended: its packet identifiers are released too.
		s.endUnreleased(t, env.ClientId, gen, out)
		s.dropIfEmpty(t)
	default:
		return fmt.Errorf("%w: subscription change op %v", ErrMalformed, ch.Op)
	}
	return nil
}

// upsert adds or updates the subscription (group, filter) of clientID. An
// update from an older generation than the entry's is stale and ignored.
// prevGen is the generation of the entry it updated (when existed). The
// strings kept are copies.
func (t *tenant) upsert(clientID, group, filter string, opts *eventspb.SubscriptionOptions, r route) (sb *sub, prevGen uint64, existed, stale bool) {
	c := t.clients[clientID]
	if c == nil {
		c = &client{id: strings.Clone(clientID), subs: make(map[filterKey]*sub)}
		t.clients[c.id] = c
	}
	if sb = c.subs[filterKey{group: group, filter: filter}]; sb != nil {
		if sb.route.gen > r.gen {
			return sb, sb.route.gen, true, true
		}
		existed, prevGen = true, sb.route.gen
	} else {
		fk := filterKey{group: strings.Clone(group), filter: strings.Clone(filter)}
		sb = &sub{client: c, filter: fk.filter, share: fk.group}
		c.subs[fk] = sb
		if fk.group != "" {
			g := t.groups[fk]
			if g == nil {
				g = &shareGroup{}
				t.groups[fk] = g
			}
			g.add(sb)
			sb.group = g
		}
		t.subs.Subscribe(fk.filter, subKey{client: c.id, group: fk.group}, sb)
	}
	sb.setOptions(opts)
	sb.route = r
	if r.gen >= c.learned.gen {
		c.learned = r
	}
	return sb, prevGen, existed, false
}

// removeSub deletes sb and records the deletion in out.
func (s *Shard) removeSub(t *tenant, sb *sub, out *Output) {
	c := sb.client
	fk := filterKey{group: sb.share, filter: sb.filter}
	t.subs.Unsubscribe(sb.filter, subKey{client: c.id, group: fk.group})
	delete(c.subs, fk)
	if sb.group != nil {
		sb.group.remove(sb)
		if len(sb.group.members) == 0 {
			delete(t.groups, fk)
		}
	}
	if len(c.subs) == 0 {
		delete(t.clients, c.id)
	}
	out.Mutations.putSubscription(SubscriptionMutation{
		Subscription: Subscription{SubscriptionKey: SubscriptionKey{Tenant: t.name, Client: c.id, ShareGroup: fk.group, Filter: sb.filter}},
		Delete:       true,
	})
}

// sendRetained sends sb's client the retained messages sb's filter
// matches, with retain set, to the client's newest route.
func (s *Shard) sendRetained(t *tenant, sb *sub, out *Output) {
	c := sb.client
	s.presence.mu.RLock()
	r, online := s.presence.resolve(t.name, c)
	s.presence.mu.RUnlock()
	if !online {
		return
	}
	s.rmatch = t.retained.match(sb.filter, s.rmatch[:0])
	if len(s.rmatch) == 0 {
		return
	}
	// A deterministic order: by topic.
	slices.SortFunc(s.rmatch, func(a, b *retained) int { return cmp.Compare(a.topic, b.topic) })
	now := s.clock()
	nowMs, tsUs := now.UnixMilli(), now.UnixMicro()
	for _, rm := range s.rmatch {
		if rm.expired(nowMs) {
			s.removeRetained(rm, out)
			continue
		}
		msg := rm.message()
		d := out.delivery(r.slot, t.name, rm.env.MessageId, tsUs, msg)
		tg := out.target(d, c.id, r.conn)
		tg.Qos = min(msg.Qos, sb.qos)
		tg.Retain = true
		if sb.id != 0 {
			tg.SubscriptionIds = append(tg.SubscriptionIds, sb.id)
		}
	}
	clear(s.rmatch)
}

// storeRetained makes publish (which the shard now owns) the retained
// message of its topic.
func (s *Shard) storeRetained(t *tenant, publish *eventspb.Envelope) *retained {
	msg := publish.GetPublish().GetMessage()
	r := &retained{env: publish, topic: msg.Topic, expiresMs: msg.ExpiresAtMs, tenant: t, hidx: -1}
	if old := t.retained.set(r.topic, r); old != nil {
		s.expiries.remove(old)
	} else {
		s.met.addRetained(t.name, 1)
	}
	if r.expiresMs != 0 {
		s.expiries.push(r)
	}
	return r
}

// removeRetained deletes r and records the deletion in out.
func (s *Shard) removeRetained(r *retained, out *Output) {
	t := r.tenant
	n := t.retained.n
	t.retained.remove(r)
	s.met.addRetained(t.name, t.retained.n-n)
	s.expiries.remove(r)
	out.Mutations.putRetained(RetainedMutation{Key: RetainedKey{Tenant: t.name, Topic: r.topic}})
	s.dropIfEmpty(t)
}

// ownedCopy returns a copy of env that shares no memory with it. CloneVT
// is not enough: it copies bytes but not strings, which may alias the
// record buffer env was decoded from.
func ownedCopy(env *eventspb.Envelope) (*eventspb.Envelope, error) {
	b, err := env.MarshalVT()
	if err != nil {
		return nil, fmt.Errorf("copy envelope: %w", err)
	}
	c := &eventspb.Envelope{}
	if err := c.UnmarshalVT(b); err != nil {
		return nil, fmt.Errorf("copy envelope: %w", err)
	}
	return c, nil
}
