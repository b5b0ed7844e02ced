package routersvc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shoal-mqtt/shoal/internal/mqtt/topic"
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
// the offset of the last record applied. See ARCHITECTURE.md, "The router,
// one shard per partition of shoal.messages".
//
// Apply does no I/O: it changes the in-memory state and appends to an
// [Output] the deliveries to produce and the mutations to store. A Shard is
// not safe for concurrent use: one goroutine applies records to it. It
// reads the shared [Presence], which is.
type Shard struct {
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
	subs    map[filterKey]*sub

	// The client's entry in the Presence, cached: nil when it had none
	// while the Presence had seen presenceInserts entries.
	presence        *presenceEntry
	presenceInserts uint64

	// Scratch of one publish: when stamp is the shard's epoch, target is
	// the client's target in the current publish, or nil when the client
	// is offline.
	stamp  uint64
	target *eventspb.Target
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
// SharedRedispatch or a PublishRelease (ARCHITECTURE.md). It appends the deliveries to produce and the state
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

func (s *Shard) publish(env *eventspb.Envelope, pub *eventspb.Publish, out *Output) error {
	msg := pub.GetMessage()
	if msg == nil {
		return fmt.Errorf("%w: publish without a message", ErrMalformed)
	}
	if err := topic.ValidateName(msg.Topic); err != nil {
		return fmt.Errorf("%w: publish topic: %w", ErrMalformed, err)
	}
	if msg.Qos == 2 && pub.PacketId != 0 && !s.receive(env, pub, out) {
		return nil // a repeat of a QoS 2 message routed before (unreleased.go)
	}
	now := s.clock()
	expired := msg.ExpiresAtMs != 0 && msg.ExpiresAtMs < now.UnixMilli()
	t := s.tenants[env.Tenant]
	if msg.Retain {
		if len(msg.Payload) == 0 || expired {
			// An empty payload deletes the retained message; so does an
			// already expired one, which replaces it and is gone.
			if t != nil {
				if r := t.retained.get(msg.Topic); r != nil {
					s.removeRetained(r, out)
				}
			}
		} else {
			owned, err := ownedCopy(env)
			if err != nil {
				return fmt.Errorf("retain %q: %w", msg.Topic, err)
			}
			t = s.tenant(env.Tenant)
			kept := s.storeRetained(t, owned)
			out.Mutations.putRetained(RetainedMutation{Key: RetainedKey{Tenant: t.name, Topic: kept.topic}, Publish: kept.env})
		}
	}
	if expired || t == nil {
		return nil
	}
	s.matches = t.subs.Match(msg.Topic, s.matches[:0])
	if len(s.matches) == 0 {
		return nil
	}
	s.epoch++
	p := plan{s: s, t: t, out: out, first: len(out.Deliveries), env: env, msg: msg, qos: min(msg.Qos, 2), tsUs: now.UnixMicro()}
	s.groups = s.groups[:0]
	s.presence.mu.RLock()
	for i := range s.matches {
		sb := s.matches[i].Val
		if sb.group != nil {
			if sb.group.stamp != s.epoch {
				sb.group.stamp = s.epoch
				s.groups = append(s.groups, sb.group)
			}
			continue
		}
		if sb.noLocal && sb.client.id == env.ClientId {
			continue
		}
		if tg := p.target(sb.client); tg != nil {
			p.merge(tg, sb)
		}
	}
	for _, g := range s.groups {
		p.shared(g)
	}
	s.presence.mu.RUnlock()
	clear(s.matches)
	clear(s.groups)
	return nil
}

// plan is the delivery plan of one publish being built.
type plan struct {
	s     *Shard
	t     *tenant
	out   *Output
	first int // the publish's first delivery in out
	// exclude is a client never chosen (a shared member that left), dup
	// marks the targets as resends (SharedRedispatch).
	exclude string
	dup     bool
	env     *eventspb.Envelope
	msg     *eventspb.Message
	qos     uint32
	tsUs    int64
}

// target returns c's target in this publish, creating it in the delivery
// of c's slot, or nil when c is offline. The caller holds the presence
// lock.
func (p *plan) target(c *client) *eventspb.Target {
	if c.stamp == p.s.epoch {
		return c.target
	}
	c.stamp = p.s.epoch
	r, online, persistent := p.s.presence.resolveFull(p.t.name, c)
	switch {
	case online:
	case persistent:
		// An offline persistent session: its QoS 1/2 messages go to its
		// inbox.
		r = route{slot: InboxSlot}
	default:
		c.target = nil
		return nil
	}
	// A persistent session's QoS 1/2 messages go through its inbox (the
	// router writes them as InboxAppend), which keeps them until the
	// client acknowledges them; QoS 0 goes straight to an online client.
	c.target = p.out.target(p.delivery(r.slot, persistent), c.id, r.conn)
	return c.target
}

// online reports whether c is connected. The caller holds the presence
// lock.
func (p *plan) online(c *client) bool {
	if c.stamp == p.s.epoch {
		return c.target != nil && c.target.Connection != 0
	}
	_, online, _ := p.s.presence.resolveFull(p.t.name, c)
	return online
}

// merge folds subscription sb into its client's target: the highest QoS
// granted (capped by the published QoS), retain if any subscription has
// retain-as-published, every subscription identifier, in ascending order
// (deterministic; clients such as Paho's C test suite expect it).
func (p *plan) merge(tg *eventspb.Target, sb *sub) {
	tg.Qos = max(tg.Qos, min(p.qos, sb.qos))
	if sb.rap && p.msg.Retain {
		tg.Retain = true
	}
	if sb.id != 0 {
		if i, found := slices.BinarySearch(tg.SubscriptionIds, sb.id); !found {
			tg.SubscriptionIds = slices.Insert(tg.SubscriptionIds, i, sb.id)
		}
	}
}

// shared delivers to one online member of g, round robin from the member
// after the last one chosen.
func (p *plan) shared(g *shareGroup) {
	n := len(g.members)
	start := g.next
	if p.s.sharedHash && n > 0 {
		id := p.env.GetMessageId()
		h := (id.GetGatewayEpoch() ^ id.GetSeq()) * 0x9E3779B97F4A7C15 // Fibonacci hashing
		start = int((h >> 32) % uint64(n))
	}
	for k := range n {
		i := (start + k) % n
		m := g.members[i]
		if m.noLocal && m.client.id == p.env.ClientId {
			continue
		}
		if m.client.id == p.exclude || !p.online(m.client) {
			continue // offline members are skipped
		}
		existed := m.client.stamp == p.s.epoch && m.client.target != nil
		if tg := p.target(m.client); tg != nil {
			p.merge(tg, m)
			if !existed {
				// Only this group's pick brings the message to the
				// client: should it leave unacknowledged, the group
				// gets it back (SharedRedispatch).
				tg.ShareGroup, tg.ShareFilter = m.share, m.filter
			}
			tg.Dup = tg.Dup || p.dup
			g.next = i + 1
			return
		}
	}
}

// redispatch gives a message a member of a shared group left
// unacknowledged to another online member, with DUP.
func (s *Shard) redispatch(env *eventspb.Envelope, r *eventspb.SharedRedispatch, out *Output) error {
	msg := r.GetMessage()
	if msg == nil {
		return fmt.Errorf("%w: shared redispatch without a message", ErrMalformed)
	}
	t := s.tenants[env.Tenant]
	if t == nil {
		return nil
	}
	g := t.groups[filterKey{group: r.GetShareGroup(), filter: r.GetFilter()}]
	now := s.clock()
	if g == nil || (msg.ExpiresAtMs != 0 && msg.ExpiresAtMs < now.UnixMilli()) {
		return nil
	}
	s.epoch++
	p := plan{s: s, t: t, out: out, first: len(out.Deliveries), env: env, msg: msg, qos: min(msg.Qos, 2),
		tsUs: now.UnixMicro(), exclude: r.GetExcludeClient(), dup: true}
	s.presence.mu.RLock()
	p.shared(g)
	s.presence.mu.RUnlock()
	return nil
}

// delivery returns the publish's delivery for slot with room for another
// target, creating it.
func (p *plan) delivery(slot int32, inbox bool) *eventspb.Delivery {
	s := p.s
	ds := p.out.Deliveries[p.first:]
	const linear = 8
	if len(ds) < linear {
		// The newest delivery of a slot is the only one that may have room.
		for i := len(ds) - 1; i >= 0; i-- {
			if ds[i].Slot == slot && ds[i].Inbox == inbox {
				if d := ds[i].Envelope.GetDelivery(); len(d.Targets) < s.maxTargets {
					return d
				}
				break
			}
		}
	} else {
		if s.laneMapE != s.epoch {
			clear(s.laneMap)
			for i := range ds {
				s.laneMap[laneOf(ds[i].Slot, ds[i].Inbox)] = ds[i].Envelope.GetDelivery()
			}
			s.laneMapE = s.epoch
		}
		if d := s.laneMap[laneOf(slot, inbox)]; d != nil && len(d.Targets) < s.maxTargets {
			return d
		}
	}
	d := p.out.delivery(slot, p.t.name, p.env.MessageId, p.tsUs, p.msg)
	p.out.Deliveries[len(p.out.Deliveries)-1].Inbox = inbox
	if s.laneMapE == s.epoch {
		s.laneMap[laneOf(slot, inbox)] = d
	}
	return d
}

// lane names one of a publish's deliveries: the gateway slot it goes to
// (InboxSlot for offline persistent sessions) and whether it is for
// persistent sessions, whose QoS 1/2 targets go through their inboxes (a
// slot may have one delivery of each kind). The two are packed into an
// integer, the slot's 32 bits above the inbox bit, rather than kept in a
// struct: a struct key makes each lookup in the shard's map of lanes about
// twice as slow (a generated hash function instead of the 64-bit fast
// path), and a publish to many slots looks up once per target.
type lane uint64

// laneOf returns the lane of slot's delivery for persistent sessions
// (inbox) or for the others.
func laneOf(slot int32, inbox bool) lane {
	l := lane(uint32(slot)) << 1
	if inbox {
		l |= 1
	}
	return l
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
		sb, existed, stale := t.upsert(env.ClientId, ch.ShareGroup, ch.Filter, ch.Options, routeOf(ch.Route))
		if stale {
			return nil
		}
		out.Mutations.putSubscription(SubscriptionMutation{Subscription: Subscription{
			SubscriptionKey: SubscriptionKey{Tenant: t.name, Client: sb.client.id, ShareGroup: sb.share, Filter: sb.filter},
			Options:         sb.options(),
			Route:           sb.route.proto(),
		}})
		if sb.group == nil && !ch.GetResume() && (sb.rh == 0 || (sb.rh == 1 && !existed)) {
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
// The strings kept are copies.
func (t *tenant) upsert(clientID, group, filter string, opts *eventspb.SubscriptionOptions, r route) (sb *sub, existed, stale bool) {
	c := t.clients[clientID]
	if c == nil {
		c = &client{id: strings.Clone(clientID), subs: make(map[filterKey]*sub)}
		t.clients[c.id] = c
	}
	if sb = c.subs[filterKey{group: group, filter: filter}]; sb != nil {
		if sb.route.gen > r.gen {
			return sb, true, true
		}
		existed = true
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
	return sb, existed, false
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
	}
	if r.expiresMs != 0 {
		s.expiries.push(r)
	}
	return r
}

// removeRetained deletes r and records the deletion in out.
func (s *Shard) removeRetained(r *retained, out *Output) {
	t := r.tenant
	t.retained.remove(r)
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
