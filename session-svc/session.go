package sessionsvc

import (
	"cmp"
	"slices"
	"time"

	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// Session is everything the session service keeps about one client id of
// one tenant. The record outlives the session itself: Generation must keep
// growing across sessions, so a client that was ever seen keeps a record
// (Active false once its session ended), in the store; the service's memory
// lets it go (dormant).
//
// Times have microsecond precision in every store.
type Session struct {
	Tenant   string
	ClientID string
	// Generation is the generation of the client's newest accepted
	// connection: 1 for the first, raised by one at every accepted Connect,
	// never lowered.
	Generation uint64
	// SessionGeneration is the generation of the connection that began
	// the current (or last) session; resumed connections keep it. The
	// gateway stamps it on the session's QoS 2 Publishes, so that a router
	// tells the packet identifiers of this session from those of an
	// earlier one (ConnectResult.session_generation).
	SessionGeneration uint64
	// RemoveEverywhere says that the routers may hold entries of the
	// client that no connection reported: a session of it ended while its
	// connection could still write (taken over, its gateway gone), and a
	// subscription change of that connection may reach a router after the
	// REMOVE_ALL that ended the session. The client's next session end
	// then removes from every partition, whatever its connection reports
	// (Disconnect.router_partitions), which clears it.
	RemoveEverywhere bool
	// PendingRemoval is the route of a connection taken over whose end has
	// not come yet, when the session it ended began with it: that
	// connection's Disconnect names the partitions where it left entries,
	// and the session's REMOVE_ALL goes there then, not to every partition
	// at the takeover (machine.connect). Until then the routers route
	// nothing to those entries: they are older than the generation the
	// client's session began with (Presence.session_generation). Nil when
	// none is pending. Should that Disconnect never come, the removal goes
	// to every partition when that connection's gateway is found gone, or
	// at the client's next session end, whichever comes first.
	PendingRemoval *eventspb.Route
	// Active says a session exists: the client is connected, or its
	// persistent session outlives its last connection. False before the
	// first connection and after the session ended (its subscriptions were
	// removed from the routers).
	Active bool
	// Online says the connection in Route is connected.
	Online bool
	// Route is where the newest connection is (or was); Route.Generation is
	// Generation. Nil before the first connection.
	Route *eventspb.Route
	// Gateway is the instance id of the gateway that owns Route.Slot.
	Gateway string
	// RequestID is the request id of the Connect that opened Route, so that a
	// duplicated Connect is answered again instead of taking over itself.
	RequestID uint64
	// ExpiryS is the Session Expiry Interval in seconds; 0 ends the session
	// with its connection, kafka.SessionExpiryNever keeps it forever.
	ExpiryS         uint32
	ProtocolVersion uint32
	Username        string
	// Will is the will of the current connection, nil when it has none or
	// it was published or discarded.
	Will *eventspb.Will
	// ConnectedAt is when the newest connection was accepted.
	ConnectedAt time.Time
	// DisconnectedAt is when the newest connection ended; zero while online.
	// The expiry of a persistent session counts from it.
	DisconnectedAt time.Time
	// WillDueAt is when the delayed will of the ended connection (kept in
	// Will) is published, unless a new connection resumes the session
	// first; zero when no will is pending (MQTT 5.0 §3.1.3.2.2).
	WillDueAt time.Time
	// Inbox holds the session's QoS 1 and 2 messages that the client has
	// not acknowledged yet, oldest first: queued while it was offline,
	// forwarded (Sent) while it is online, PUBREC'd (Received) for QoS 2.
	// Every entry is sent again when the session resumes.
	Inbox []*eventspb.InboxAppend
	// InboxDropped counts the messages dropped since the session went
	// offline because Inbox was full; reported when it resumes.
	InboxDropped uint32
	// InboxSeq is the sequence number of the newest inbox entry; it keeps
	// growing across sessions, so an acknowledgement of an entry of an
	// ended session matches nothing.
	InboxSeq uint64
	// LastPacketID is the packet identifier given to the newest inbox entry
	// (1–kafka.MaxInboxPacketID, then around again, skipping those in use).
	LastPacketID uint16
	// Sources holds, per partition of shoal.messages, the offset of the
	// newest record an InboxAppend of the client came from, sorted by
	// partition: a router that takes a partition over repeats the appends
	// after its stored offset, and those are dropped. Kept across sessions.
	Sources []*eventspb.Source
	// Subscriptions are the session's subscriptions (from
	// SessionSubscriptions events), sorted by filter, one per filter.
	Subscriptions []*eventspb.SessionSubscription
}

// Persistent reports whether the session outlives its connection.
func (s *Session) Persistent() bool { return s.ExpiryS > 0 }

// Expired reports whether a persistent session that is offline has outlived
// its expiry interval at now. An online session, one that never expires and
// one that already ended do not expire.
func (s *Session) Expired(now time.Time) bool {
	at := s.expiresAt()
	return !at.IsZero() && !now.Before(at)
}

// expiresAt is when the session expires if it stays offline; zero when it
// cannot (online, ended, or never expiring).
func (s *Session) expiresAt() time.Time {
	if !s.Active || s.Online || s.ExpiryS == kafka.SessionExpiryNever || s.DisconnectedAt.IsZero() {
		return time.Time{}
	}
	return s.DisconnectedAt.Add(time.Duration(s.ExpiryS) * time.Second)
}

// tickDueUs is the timestamp (unix microseconds) of the first SessionTick
// that changes s by itself: its delayed will comes due or it expires,
// whichever is first; 0 when neither is pending. A tick's timestamp is
// whole microseconds, so a deadline between two is rounded up: a tick at
// tickDueUs or later changes s (delayedWillDue, Expired), one before it
// does not.
func (s *Session) tickDueUs() int64 {
	at := s.expiresAt()
	if !s.Online && !s.WillDueAt.IsZero() && (at.IsZero() || s.WillDueAt.Before(at)) {
		at = s.WillDueAt
	}
	if at.IsZero() {
		return 0
	}
	us := at.UnixMicro()
	if at.Nanosecond()%1000 != 0 {
		us++
	}
	return us
}

// dormant reports whether s is the record of a client without a session
// that nothing but an event of the client can change: no session, no
// connection, no will or expiry to wait for. The service keeps a dormant
// session in its store alone (Store.LoadClients brings it back), so that
// its memory holds the clients with a session, not every client ever seen.
func (s *Session) dormant() bool {
	return !s.Active && !s.Online && s.Will == nil && s.WillDueAt.IsZero() && len(s.Inbox) == 0
}

// Clone returns a deep copy of s.
func (s *Session) Clone() *Session {
	if s == nil {
		return nil
	}
	c := *s
	c.Route = s.Route.CloneVT()
	c.PendingRemoval = s.PendingRemoval.CloneVT()
	c.Will = s.Will.CloneVT()
	if s.Inbox != nil {
		c.Inbox = make([]*eventspb.InboxAppend, len(s.Inbox))
		for i, m := range s.Inbox {
			c.Inbox[i] = m.CloneVT()
		}
	}
	if s.Sources != nil {
		c.Sources = make([]*eventspb.Source, len(s.Sources))
		for i, src := range s.Sources {
			c.Sources[i] = src.CloneVT()
		}
	}
	if s.Subscriptions != nil {
		c.Subscriptions = make([]*eventspb.SessionSubscription, len(s.Subscriptions))
		for i, sub := range s.Subscriptions {
			c.Subscriptions[i] = sub.CloneVT()
		}
	}
	return &c
}

// Equal reports whether s and o hold the same state (times compared with
// time.Time.Equal, nil and empty subscription lists alike).
func (s *Session) Equal(o *Session) bool {
	if s == nil || o == nil {
		return s == o
	}
	return s.Tenant == o.Tenant && s.ClientID == o.ClientID &&
		s.Generation == o.Generation && s.SessionGeneration == o.SessionGeneration && s.Active == o.Active && s.Online == o.Online &&
		s.RemoveEverywhere == o.RemoveEverywhere && s.PendingRemoval.EqualVT(o.PendingRemoval) &&
		s.Route.EqualVT(o.Route) && s.Gateway == o.Gateway && s.RequestID == o.RequestID &&
		s.ExpiryS == o.ExpiryS && s.ProtocolVersion == o.ProtocolVersion &&
		s.Username == o.Username && s.Will.EqualVT(o.Will) &&
		s.ConnectedAt.Equal(o.ConnectedAt) && s.DisconnectedAt.Equal(o.DisconnectedAt) &&
		s.WillDueAt.Equal(o.WillDueAt) &&
		slices.EqualFunc(s.Inbox, o.Inbox, (*eventspb.InboxAppend).EqualVT) && s.InboxDropped == o.InboxDropped &&
		s.InboxSeq == o.InboxSeq && s.LastPacketID == o.LastPacketID &&
		slices.EqualFunc(s.Sources, o.Sources, (*eventspb.Source).EqualVT) &&
		slices.EqualFunc(s.Subscriptions, o.Subscriptions, (*eventspb.SessionSubscription).EqualVT)
}

// noteSource records that an InboxAppend came from src and reports
// whether it is new: false when an append of the same partition at src's
// offset or later was seen already (a router's repeat).
func (s *Session) noteSource(src *eventspb.Source) bool {
	i, found := slices.BinarySearchFunc(s.Sources, src.GetPartition(), func(e *eventspb.Source, p int32) int {
		return cmp.Compare(e.GetPartition(), p)
	})
	if !found {
		s.Sources = slices.Insert(s.Sources, i, &eventspb.Source{Partition: src.GetPartition(), Offset: src.GetOffset()})
		return true
	}
	if src.GetOffset() <= s.Sources[i].GetOffset() {
		return false
	}
	s.Sources[i].Offset = src.GetOffset()
	return true
}

// setSubscription adds sub, replacing the subscription with the same filter.
func (s *Session) setSubscription(sub *eventspb.SessionSubscription) {
	i, found := slices.BinarySearchFunc(s.Subscriptions, sub.GetFilter(), compareFilter)
	if found {
		if s.Subscriptions[i].GetGeneration() > sub.GetGeneration() {
			return // set by a newer connection: as the router's entry
		}
		s.Subscriptions[i] = sub
		return
	}
	s.Subscriptions = slices.Insert(s.Subscriptions, i, sub)
}

// removeSubscription removes the subscription with this filter, if any,
// unless a connection newer than generation gen set it (as a router keeps
// an entry newer than a REMOVE).
func (s *Session) removeSubscription(filter string, gen uint64) {
	if i, found := slices.BinarySearchFunc(s.Subscriptions, filter, compareFilter); found && s.Subscriptions[i].GetGeneration() <= gen {
		s.Subscriptions = slices.Delete(s.Subscriptions, i, i+1)
	}
}

func compareFilter(sub *eventspb.SessionSubscription, filter string) int {
	return cmp.Compare(sub.GetFilter(), filter)
}

// clientKey identifies a client: its tenant and client id.
type clientKey struct {
	tenant, client string
}

// recordKey is the Kafka record key of a client's events on shoal.sessions
// and shoal.presence (kafka.Key).
func (k clientKey) recordKey() []byte {
	return kafka.Key(k.tenant, k.client)
}
