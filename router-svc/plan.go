package routersvc

import (
	"fmt"
	"slices"

	"github.com/shoal-mqtt/shoal/internal/mqtt/topic"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// publish routes a message: the retained store first, then a plan of
// deliveries, one per gateway slot (and one per inbox), for every
// matching subscription of the tenant (plan).
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
		} else if !s.retainRefused(t, env.Tenant, msg.Topic) { // beyond max_retained: delivered, not kept (quota.go)
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
		s.notePublish(expired, 0)
		return nil
	}
	s.matches = t.subs.Match(msg.Topic, s.matches[:0])
	s.notePublish(false, len(s.matches))
	if len(s.matches) == 0 {
		return nil
	}
	s.epoch++
	p := plan{s: s, t: t, out: out, first: len(out.Deliveries), env: env, msg: msg, qos: min(msg.Qos, 2), tsUs: now.UnixMicro(),
		publishedUs: env.TimestampUs}
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
		if tg := p.target(sb); tg != nil {
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
	// publishedUs is the publish's time for its deliveries
	// (Delivery.published_us); 0 for a redispatch.
	publishedUs int64
}

// target returns the target of sb's client in this publish, creating it
// in the delivery of the client's slot, or nil when the client is offline
// or sb is left from a session that has ended: its generation is older
// than the one the client's session began with (an ADD that reached the
// shard after the REMOVE_ALL of its session). The caller holds the
// presence lock.
func (p *plan) target(sb *sub) *eventspb.Target {
	c := sb.client
	if c.stamp == p.s.epoch {
		if sb.route.gen < c.sessionGen {
			return nil
		}
		return c.target
	}
	r, online, persistent, sessionGen := p.s.presence.resolveFull(p.t.name, c)
	if sb.route.gen < sessionGen {
		// Not stamped: a live subscription of the client resolves again
		// (a rare case: a late ADD).
		return nil
	}
	c.stamp, c.sessionGen = p.s.epoch, sessionGen
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
	_, online, _, _ := p.s.presence.resolveFull(p.t.name, c)
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
		if tg := p.target(m); tg != nil {
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
	d.PublishedUs = p.publishedUs
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
