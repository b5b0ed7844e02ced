package sessionsvc

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// A session's row, the value the stores keep for it, is an
// eventspb.StoredSession (schemas/proto/shoal/v1/session_row.proto): the
// Session without its tenant and client id, which are in the row's key.

// AppendSessionRow appends the encoding of s (without tenant and client id).
// It allocates only when b has no room for it.
func AppendSessionRow(b []byte, s *Session) []byte {
	var connectedAt, disconnectedAt, willDueAt int64
	row := eventspb.StoredSession{
		Generation:        s.Generation,
		Active:            s.Active,
		Online:            s.Online,
		Route:             s.Route,
		Gateway:           s.Gateway,
		RequestId:         s.RequestID,
		ExpiryS:           s.ExpiryS,
		ProtocolVersion:   s.ProtocolVersion,
		Username:          s.Username,
		Will:              s.Will,
		ConnectedAtUs:     rowTime(s.ConnectedAt, &connectedAt),
		DisconnectedAtUs:  rowTime(s.DisconnectedAt, &disconnectedAt),
		Subscriptions:     s.Subscriptions,
		WillDueAtUs:       rowTime(s.WillDueAt, &willDueAt),
		Inbox:             s.Inbox,
		InboxDropped:      s.InboxDropped,
		InboxSeq:          s.InboxSeq,
		LastPacketId:      uint32(s.LastPacketID),
		Sources:           s.Sources,
		SessionGeneration: s.SessionGeneration,
		RemoveEverywhere:  s.RemoveEverywhere,
		PendingRemoval:    s.PendingRemoval,
	}
	size := row.SizeVT()
	start := len(b)
	b = slices.Grow(b, size)[:start+size]
	if n, err := row.MarshalToSizedBufferVT(b[start:]); err != nil || n != size {
		// vtprotobuf fails on a sized buffer only on a bug in the
		// generated code.
		panic(fmt.Sprintf("sessionsvc: marshal a session row: wrote %d of %d bytes: %v", n, size, err))
	}
	return b
}

// rowTime returns t in unix microseconds, stored in *us, or nil (the field
// absent) for the zero time.
func rowTime(t time.Time, us *int64) *int64 {
	if t.IsZero() {
		return nil
	}
	*us = t.UnixMicro()
	return us
}

var errRange = errors.New("value out of range")

// DecodeSessionRow decodes a session row into s, replacing every field but
// the tenant and client id (which come from the row's key). Nothing in s
// aliases b.
func DecodeSessionRow(b []byte, s *Session) error {
	var row eventspb.StoredSession
	if err := row.UnmarshalVT(b); err != nil {
		return err
	}
	if row.LastPacketId > math.MaxUint16 {
		return fmt.Errorf("last_packet_id %d: %w", row.LastPacketId, errRange)
	}
	*s = Session{
		Tenant:            s.Tenant,
		ClientID:          s.ClientID,
		Generation:        row.Generation,
		SessionGeneration: row.SessionGeneration,
		Active:            row.Active,
		Online:            row.Online,
		Route:             row.Route,
		Gateway:           row.Gateway,
		RequestID:         row.RequestId,
		ExpiryS:           row.ExpiryS,
		ProtocolVersion:   row.ProtocolVersion,
		Username:          row.Username,
		Will:              row.Will,
		ConnectedAt:       sessionTime(row.ConnectedAtUs),
		DisconnectedAt:    sessionTime(row.DisconnectedAtUs),
		WillDueAt:         sessionTime(row.WillDueAtUs),
		Inbox:             row.Inbox,
		InboxDropped:      row.InboxDropped,
		InboxSeq:          row.InboxSeq,
		LastPacketID:      uint16(row.LastPacketId),
		Sources:           row.Sources,
		Subscriptions:     row.Subscriptions,
		RemoveEverywhere:  row.RemoveEverywhere,
		PendingRemoval:    row.PendingRemoval,
	}
	return nil
}

// sessionTime is the time of a row's time field: the zero time when absent.
func sessionTime(us *int64) time.Time {
	if us == nil {
		return time.Time{}
	}
	return time.UnixMicro(*us).UTC()
}
