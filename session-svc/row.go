package sessionsvc

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// A session value is a protobuf message written with protowire (tenant and
// client id are in the key), readable as
//
//	message StoredSession {
//	  uint64 generation = 1;
//	  bool active = 2;
//	  bool online = 3;
//	  shoal.v1.Route route = 4;          // absent when nil
//	  string gateway = 5;
//	  uint64 request_id = 6;
//	  uint32 expiry_s = 7;
//	  uint32 protocol_version = 8;
//	  string username = 9;
//	  shoal.v1.Will will = 10;           // absent when nil
//	  int64 connected_at_us = 11;        // absent when zero time
//	  int64 disconnected_at_us = 12;     // absent when zero time
//	  repeated shoal.v1.SessionSubscription subscriptions = 13;
//	  int64 will_due_at_us = 14;         // absent when zero time
//	  repeated shoal.v1.InboxAppend inbox = 15;
//	  uint32 inbox_dropped = 16;
//	  uint64 inbox_seq = 17;
//	  uint32 last_packet_id = 18;
//	  repeated shoal.v1.Source sources = 19;
//	  uint64 session_generation = 20;
//	}
//
// Fields are only added, never renumbered; unknown fields are skipped, so
// an older binary reads a newer value.
const (
	fieldGeneration       protowire.Number = 1
	fieldActive           protowire.Number = 2
	fieldOnline           protowire.Number = 3
	fieldRoute            protowire.Number = 4
	fieldGateway          protowire.Number = 5
	fieldRequestID        protowire.Number = 6
	fieldExpiry           protowire.Number = 7
	fieldProtocolVersion  protowire.Number = 8
	fieldUsername         protowire.Number = 9
	fieldWill             protowire.Number = 10
	fieldConnectedAtUs    protowire.Number = 11
	fieldDisconnectedAtUs protowire.Number = 12
	fieldSubscriptions    protowire.Number = 13
	fieldWillDueAtUs      protowire.Number = 14
	fieldInbox            protowire.Number = 15
	fieldInboxDropped     protowire.Number = 16
	fieldInboxSeq         protowire.Number = 17
	fieldLastPacketID     protowire.Number = 18
	fieldSources          protowire.Number = 19
	fieldSessionGen       protowire.Number = 20
)

// vtMessage is what the eventspb messages kept in a session have.
type vtMessage interface {
	SizeVT() int
	MarshalToSizedBufferVT([]byte) (int, error)
}

// AppendSessionRow appends the encoding of s (without tenant and client id).
func AppendSessionRow(b []byte, s *Session) []byte {
	b = appendVarint(b, fieldGeneration, s.Generation)
	b = appendBool(b, fieldActive, s.Active)
	b = appendBool(b, fieldOnline, s.Online)
	if s.Route != nil {
		b = appendMessage(b, fieldRoute, s.Route)
	}
	b = appendString(b, fieldGateway, s.Gateway)
	b = appendVarint(b, fieldRequestID, s.RequestID)
	b = appendVarint(b, fieldExpiry, uint64(s.ExpiryS))
	b = appendVarint(b, fieldProtocolVersion, uint64(s.ProtocolVersion))
	b = appendString(b, fieldUsername, s.Username)
	if s.Will != nil {
		b = appendMessage(b, fieldWill, s.Will)
	}
	b = appendTime(b, fieldConnectedAtUs, s.ConnectedAt)
	b = appendTime(b, fieldDisconnectedAtUs, s.DisconnectedAt)
	b = appendTime(b, fieldWillDueAtUs, s.WillDueAt)
	for _, m := range s.Inbox {
		b = appendMessage(b, fieldInbox, m)
	}
	b = appendVarint(b, fieldInboxDropped, uint64(s.InboxDropped))
	b = appendVarint(b, fieldInboxSeq, s.InboxSeq)
	b = appendVarint(b, fieldLastPacketID, uint64(s.LastPacketID))
	b = appendVarint(b, fieldSessionGen, s.SessionGeneration)
	for _, src := range s.Sources {
		b = appendMessage(b, fieldSources, src)
	}
	for _, sub := range s.Subscriptions {
		b = appendMessage(b, fieldSubscriptions, sub)
	}
	return b
}

func appendVarint(b []byte, n protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, n, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendBool(b []byte, n protowire.Number, v bool) []byte {
	if !v {
		return b
	}
	return appendVarint(b, n, 1)
}

func appendString(b []byte, n protowire.Number, v string) []byte {
	if v == "" {
		return b
	}
	b = protowire.AppendTag(b, n, protowire.BytesType)
	return protowire.AppendString(b, v)
}

func appendTime(b []byte, n protowire.Number, t time.Time) []byte {
	if t.IsZero() {
		return b
	}
	b = protowire.AppendTag(b, n, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(t.UnixMicro()))
}

// appendMessage appends m as an embedded message (present even when empty).
func appendMessage(b []byte, n protowire.Number, m vtMessage) []byte {
	b = protowire.AppendTag(b, n, protowire.BytesType)
	size := m.SizeVT()
	b = protowire.AppendVarint(b, uint64(size))
	start := len(b)
	b = append(b, make([]byte, size)...)
	if w, err := m.MarshalToSizedBufferVT(b[start:]); err != nil || w != size {
		// vtprotobuf fails on a sized buffer only on a bug in the
		// generated code.
		panic(fmt.Sprintf("sessionsvc: marshal %T: wrote %d of %d bytes: %v", m, w, size, err))
	}
	return b
}

// DecodeSessionRow decodes a session value into s (whose tenant and client id
// come from the key). Nothing in s aliases b.
func DecodeSessionRow(b []byte, s *Session) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("tag: %w", protowire.ParseError(n))
		}
		b = b[n:]
		var err error
		switch {
		case typ == protowire.VarintType && isVarintField(num):
			var v uint64
			v, n = protowire.ConsumeVarint(b)
			if n >= 0 {
				err = setVarint(s, num, v)
			}
		case typ == protowire.BytesType && isBytesField(num):
			var v []byte
			v, n = protowire.ConsumeBytes(b)
			if n >= 0 {
				err = setBytes(s, num, v)
			}
		default:
			n = protowire.ConsumeFieldValue(num, typ, b) // unknown: skipped
		}
		if n < 0 {
			return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
		}
		if err != nil {
			return fmt.Errorf("field %d: %w", num, err)
		}
		b = b[n:]
	}
	return nil
}

func isVarintField(n protowire.Number) bool {
	switch n {
	case fieldGeneration, fieldActive, fieldOnline, fieldRequestID, fieldExpiry, fieldProtocolVersion,
		fieldConnectedAtUs, fieldDisconnectedAtUs, fieldWillDueAtUs, fieldInboxDropped, fieldInboxSeq, fieldLastPacketID,
		fieldSessionGen:
		return true
	}
	return false
}

func isBytesField(n protowire.Number) bool {
	switch n {
	case fieldRoute, fieldGateway, fieldUsername, fieldWill, fieldSubscriptions, fieldInbox, fieldSources:
		return true
	}
	return false
}

var errRange = errors.New("value out of range")

func setVarint(s *Session, n protowire.Number, v uint64) error {
	switch n {
	case fieldGeneration:
		s.Generation = v
	case fieldActive:
		s.Active = v != 0
	case fieldOnline:
		s.Online = v != 0
	case fieldRequestID:
		s.RequestID = v
	case fieldInboxSeq:
		s.InboxSeq = v
	case fieldSessionGen:
		s.SessionGeneration = v
	case fieldLastPacketID:
		if v > 0xFFFF {
			return errRange
		}
		s.LastPacketID = uint16(v)
	case fieldInboxDropped:
		if v > 0xFFFFFFFF {
			return errRange
		}
		s.InboxDropped = uint32(v)
	case fieldExpiry, fieldProtocolVersion:
		if v > 0xFFFFFFFF {
			return errRange
		}
		if n == fieldExpiry {
			s.ExpiryS = uint32(v)
		} else {
			s.ProtocolVersion = uint32(v)
		}
	case fieldConnectedAtUs:
		s.ConnectedAt = time.UnixMicro(int64(v)).UTC()
	case fieldDisconnectedAtUs:
		s.DisconnectedAt = time.UnixMicro(int64(v)).UTC()
	case fieldWillDueAtUs:
		s.WillDueAt = time.UnixMicro(int64(v)).UTC()
	}
	return nil
}

func setBytes(s *Session, n protowire.Number, v []byte) error {
	switch n {
	case fieldGateway:
		s.Gateway = string(v)
	case fieldUsername:
		s.Username = string(v)
	case fieldRoute:
		s.Route = &eventspb.Route{}
		return s.Route.UnmarshalVT(v)
	case fieldWill:
		s.Will = &eventspb.Will{}
		return s.Will.UnmarshalVT(v)
	case fieldInbox:
		m := &eventspb.InboxAppend{}
		if err := m.UnmarshalVT(v); err != nil {
			return err
		}
		s.Inbox = append(s.Inbox, m)
	case fieldSources:
		src := &eventspb.Source{}
		if err := src.UnmarshalVT(v); err != nil {
			return err
		}
		s.Sources = append(s.Sources, src)
	case fieldSubscriptions:
		sub := &eventspb.SessionSubscription{}
		if err := sub.UnmarshalVT(v); err != nil {
			return err
		}
		s.Subscriptions = append(s.Subscriptions, sub)
	}
	return nil
}
