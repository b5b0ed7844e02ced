package routersvc

import (
	"fmt"
	"strings"

	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// The receiving side of QoS 2 for persistent sessions (MQTT-4.3.3-8..10,
// MQTT-4.4.0-1). A client may send a QoS 2 PUBLISH again, with the same
// packet identifier, until it gets PUBREC; after a reconnect it must. The
// message must still reach its subscribers once. A gateway knows the
// identifiers its own connection received, but the session outlives the
// connection (a reconnect, a takeover on another gateway, a restart of any
// process), so the identifiers awaiting PUBREL are kept where the message
// itself goes: by the shard of the message's topic, in the same record.
//
// A Publish with a packet identifier (set by the gateway for QoS 2 from a
// persistent session) whose identifier the shard keeps for the same
// session is a repeat: dropped, nothing routed or retained. Otherwise the
// shard keeps the identifier, with the session's generation, and routes
// the message. Keeping it and routing it are one record, applied once and
// stored with the shard's offset (invariant 3): no crash can separate
// them. A PublishRelease (the client's PUBREL, written by a gateway before
// its PUBCOMP) or the session's end (SubscriptionChange REMOVE_ALL, which
// the session service writes to every partition in which the session may
// have left state, this message's among them) forgets it.
//
// The session generation (the generation of the connection that began the
// session) tells sessions apart: an identifier kept for an earlier session
// never makes a new session's message a repeat, even when a late record of
// the old session's connection arrives after the REMOVE_ALL that ended it.

// UnreleasedKey names a packet identifier a client's QoS 2 PUBLISH took
// and has not released: the shard that routed the message keeps it.
type UnreleasedKey struct {
	Tenant   string
	Client   string
	PacketID uint16
}

// Unreleased is a kept packet identifier as stored: its key and the
// generation of the session that sent it.
type Unreleased struct {
	UnreleasedKey
	SessionGeneration uint64
}

// UnreleasedMutation stores Unreleased, or deletes its key when Delete is
// set.
type UnreleasedMutation struct {
	Unreleased
	Delete bool
}

// Envelope returns the stored form of u: an Envelope of the tenant and
// client holding a Publish without a message, with the packet identifier
// and the session's generation (the fields of the Publish that took it).
func (u *Unreleased) Envelope() *eventspb.Envelope {
	return &eventspb.Envelope{
		Tenant:   u.Tenant,
		ClientId: u.Client,
		Event: &eventspb.Envelope_Publish{Publish: &eventspb.Publish{
			PacketId:          uint32(u.PacketID),
			SessionGeneration: u.SessionGeneration,
		}},
	}
}

// UnreleasedOf reads the stored form of a kept packet identifier
// ([Unreleased.Envelope]).
func UnreleasedOf(env *eventspb.Envelope) (Unreleased, error) {
	pub := env.GetPublish()
	if pub == nil || env.ClientId == "" || pub.PacketId == 0 || pub.PacketId > 0xFFFF {
		return Unreleased{}, fmt.Errorf("%w: unreleased packet identifier: no client, publish or identifier", ErrMalformed)
	}
	return Unreleased{
		UnreleasedKey:     UnreleasedKey{Tenant: env.Tenant, Client: env.ClientId, PacketID: uint16(pub.PacketId)},
		SessionGeneration: pub.SessionGeneration,
	}, nil
}

// LoadUnreleased adds a stored packet identifier, without output; it
// implements [ShardLoader].
func (s *Shard) LoadUnreleased(u Unreleased) error {
	if u.Client == "" || u.PacketID == 0 {
		return fmt.Errorf("%w: unreleased packet identifier without client or identifier", ErrMalformed)
	}
	s.tenant(u.Tenant).keepUnreleased(u.Client, u.PacketID, u.SessionGeneration)
	return nil
}

// UnreleasedCount returns the number of packet identifiers kept.
func (s *Shard) UnreleasedCount() int {
	n := 0
	for _, t := range s.tenants {
		for _, u := range t.unreleased {
			n += len(u.ids)
		}
	}
	return n
}

// unreleasedIDs are the packet identifiers a client has not released, each
// with the generation of the session that sent it.
type unreleasedIDs struct {
	client string // owned copy
	ids    map[uint16]uint64
}

// receive takes in the packet identifier of a QoS 2 Publish of a
// persistent session and reports whether the message is new (to be
// routed) rather than a repeat of one the shard routed for the same
// session. It keeps the identifier for a new message of the session.
func (s *Shard) receive(env *eventspb.Envelope, pub *eventspb.Publish, out *Output) bool {
	if pub.PacketId == 0 || pub.PacketId > 0xFFFF || env.ClientId == "" {
		return true
	}
	id, gen := uint16(pub.PacketId), pub.SessionGeneration
	t := s.tenant(env.Tenant)
	if u := t.unreleased[env.ClientId]; u != nil {
		if kept, ok := u.ids[id]; ok {
			switch {
			case kept == gen:
				return false // a repeat: routed when it came first
			case kept > gen:
				// A late message of an earlier session: routed, but its
				// identifier is not the newer session's to keep.
				return true
			}
		}
	}
	u := t.keepUnreleased(env.ClientId, id, gen)
	out.Mutations.putUnreleased(UnreleasedMutation{Unreleased: Unreleased{
		UnreleasedKey:     UnreleasedKey{Tenant: t.name, Client: u.client, PacketID: id},
		SessionGeneration: gen,
	}})
	return true
}

// release forgets a packet identifier the client released (PUBREL), when
// it was kept for that session or an earlier one.
func (s *Shard) release(env *eventspb.Envelope, r *eventspb.PublishRelease, out *Output) error {
	if env.ClientId == "" || r.PacketId == 0 || r.PacketId > 0xFFFF {
		return fmt.Errorf("%w: publish release without client or packet identifier", ErrMalformed)
	}
	t := s.tenants[env.Tenant]
	if t == nil {
		return nil
	}
	u := t.unreleased[env.ClientId]
	if u == nil {
		return nil
	}
	id := uint16(r.PacketId)
	if kept, ok := u.ids[id]; ok && kept <= r.SessionGeneration {
		s.forgetUnreleased(t, u, id, out)
		s.dropIfEmpty(t)
	}
	return nil
}

// endUnreleased forgets every packet identifier of client kept for a
// session that began at or before gen (a session that ended: REMOVE_ALL).
func (s *Shard) endUnreleased(t *tenant, client string, gen uint64, out *Output) {
	u := t.unreleased[client]
	if u == nil {
		return
	}
	for id, kept := range u.ids {
		if kept <= gen {
			s.forgetUnreleased(t, u, id, out)
		}
	}
}

func (s *Shard) forgetUnreleased(t *tenant, u *unreleasedIDs, id uint16, out *Output) {
	delete(u.ids, id)
	if len(u.ids) == 0 {
		delete(t.unreleased, u.client)
	}
	out.Mutations.putUnreleased(UnreleasedMutation{
		Unreleased: Unreleased{UnreleasedKey: UnreleasedKey{Tenant: t.name, Client: u.client, PacketID: id}},
		Delete:     true,
	})
}

// keepUnreleased records id for client's session gen.
func (t *tenant) keepUnreleased(client string, id uint16, gen uint64) *unreleasedIDs {
	if t.unreleased == nil {
		t.unreleased = make(map[string]*unreleasedIDs)
	}
	u := t.unreleased[client]
	if u == nil {
		u = &unreleasedIDs{client: strings.Clone(client), ids: make(map[uint16]uint64)}
		t.unreleased[u.client] = u
	}
	u.ids[id] = gen
	return u
}
