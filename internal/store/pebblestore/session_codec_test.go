package pebblestore

import (
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/shoal-mqtt/shoal/schemas/eventspb"
	sessionsvc "github.com/shoal-mqtt/shoal/session-svc"
)

func codecSession() *sessionsvc.Session {
	return &sessionsvc.Session{
		Tenant: "t", ClientID: "c", Generation: 1 << 40, Active: true, Online: true,
		Route:   &eventspb.Route{Slot: 3, Connection: 9, Generation: 1 << 40},
		Gateway: "gw", RequestID: 5, ExpiryS: sessionsvc.ExpiryNever, ProtocolVersion: 4, Username: "u",
		Will:           &eventspb.Will{Message: &eventspb.Message{Topic: "w", Payload: []byte("p")}, DelayIntervalS: 3},
		ConnectedAt:    time.UnixMicro(1_700_000_000_000_001).UTC(),
		DisconnectedAt: time.UnixMicro(-5).UTC(), // before 1970 still round-trips
		Subscriptions: []*eventspb.SessionSubscription{
			{Filter: "a"}, {Filter: "b", Options: &eventspb.SubscriptionOptions{Qos: 1}},
		},
	}
}

func TestSessionCodecRoundTrip(t *testing.T) {
	for name, s := range map[string]*sessionsvc.Session{
		"full":           codecSession(),
		"empty":          {Tenant: "t", ClientID: "c"},
		"empty messages": {Tenant: "t", ClientID: "c", Route: &eventspb.Route{}, Will: &eventspb.Will{}},
	} {
		got := &sessionsvc.Session{Tenant: s.Tenant, ClientID: s.ClientID}
		if err := decodeSession(appendSession(nil, s), got); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !got.Equal(s) {
			t.Errorf("%s: decoded\n %+v\nwant %+v", name, got, s)
		}
	}
}

// An older binary reads a value written by a newer one.
func TestSessionCodecSkipsUnknownFields(t *testing.T) {
	s := codecSession()
	b := protowire.AppendTag(nil, 100, protowire.BytesType)
	b = protowire.AppendString(b, "from the future")
	b = appendSession(b, s)
	b = protowire.AppendTag(b, 101, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, 7)
	// A known number with an unexpected wire type is skipped too.
	b = protowire.AppendTag(b, fieldGeneration, protowire.BytesType)
	b = protowire.AppendString(b, "x")
	got := &sessionsvc.Session{Tenant: s.Tenant, ClientID: s.ClientID}
	if err := decodeSession(b, got); err != nil {
		t.Fatal(err)
	}
	if !got.Equal(s) {
		t.Errorf("decoded\n %+v\nwant %+v", got, s)
	}
}

func TestSessionCodecRejectsCorruptValues(t *testing.T) {
	full := appendSession(nil, codecSession())
	over := protowire.AppendTag(nil, fieldExpiry, protowire.VarintType)
	over = protowire.AppendVarint(over, 1<<32)
	badRoute := protowire.AppendTag(nil, fieldRoute, protowire.BytesType)
	badRoute = protowire.AppendBytes(badRoute, []byte{0xff})
	for name, b := range map[string][]byte{
		"truncated":     full[:len(full)-1],
		"bad tag":       {0x80},
		"expiry > 2^32": over,
		"bad route":     badRoute,
	} {
		if err := decodeSession(b, &sessionsvc.Session{}); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

func TestSessionKeyParse(t *testing.T) {
	for _, id := range [][2]string{{"", ""}, {"a/b", "c"}, {"a", "b/c"}, {"日本", "\x00\xff"}} {
		key := sessionKey(nil, 1<<20, id[0], id[1])
		tenant, client, err := parseSessionKey(key)
		if err != nil || tenant != id[0] || client != id[1] {
			t.Errorf("parse(%q) = %q, %q, %v", id, tenant, client, err)
		}
	}
	for _, bad := range [][]byte{{'s', 'c', 0, 0}, append(sessionTablePrefix(nil, tableSessionClients, 0), 5, 'a')} {
		if _, _, err := parseSessionKey(bad); err == nil {
			t.Errorf("parse(%x): no error", bad)
		}
	}
}
