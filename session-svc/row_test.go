package sessionsvc

import (
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

func codecSession() *Session {
	return &Session{
		Tenant: "t", ClientID: "c", Generation: 1 << 40, SessionGeneration: 1<<40 - 2, RemoveEverywhere: true, Active: true, Online: true,
		Route:          &eventspb.Route{Slot: 3, Connection: 9, Generation: 1 << 40},
		PendingRemoval: &eventspb.Route{Slot: 2, Connection: 7, Generation: 1<<40 - 2},
		Gateway:        "gw", RequestID: 5, ExpiryS: kafka.SessionExpiryNever, ProtocolVersion: 4, Username: "u",
		Will:           &eventspb.Will{Message: &eventspb.Message{Topic: "w", Payload: []byte("p")}, DelayIntervalS: 3},
		ConnectedAt:    time.UnixMicro(1_700_000_000_000_001).UTC(),
		DisconnectedAt: time.UnixMicro(-5).UTC(), // before 1970 still round-trips
		Subscriptions: []*eventspb.SessionSubscription{
			{Filter: "a"}, {Filter: "b", Options: &eventspb.SubscriptionOptions{Qos: 1}},
		},
	}
}

func TestSessionCodecRoundTrip(t *testing.T) {
	for name, s := range map[string]*Session{
		"full":           codecSession(),
		"empty":          {Tenant: "t", ClientID: "c"},
		"empty messages": {Tenant: "t", ClientID: "c", Route: &eventspb.Route{}, Will: &eventspb.Will{}},
	} {
		got := &Session{Tenant: s.Tenant, ClientID: s.ClientID}
		if err := DecodeSessionRow(AppendSessionRow(nil, s), got); err != nil {
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
	b = AppendSessionRow(b, s)
	b = protowire.AppendTag(b, 101, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, 7)
	got := &Session{Tenant: s.Tenant, ClientID: s.ClientID}
	if err := DecodeSessionRow(b, got); err != nil {
		t.Fatal(err)
	}
	if !got.Equal(s) {
		t.Errorf("decoded\n %+v\nwant %+v", got, s)
	}
}

func TestSessionCodecRejectsCorruptValues(t *testing.T) {
	full := AppendSessionRow(nil, codecSession())
	over := protowire.AppendTag(nil, rowField("last_packet_id"), protowire.VarintType)
	over = protowire.AppendVarint(over, 1<<16)
	badRoute := protowire.AppendTag(nil, rowField("route"), protowire.BytesType)
	badRoute = protowire.AppendBytes(badRoute, []byte{0xff})
	// A field of the schema never changes its type (buf breaking), so a
	// known number with another wire type is corruption.
	wrongType := protowire.AppendTag(nil, rowField("generation"), protowire.BytesType)
	wrongType = protowire.AppendString(wrongType, "x")
	for name, b := range map[string][]byte{
		"truncated":               full[:len(full)-1],
		"bad tag":                 {0x80},
		"last packet id > 65535":  over,
		"bad route":               badRoute,
		"known field, wrong type": wrongType,
	} {
		if err := DecodeSessionRow(b, &Session{}); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

// rowField is the number of a field of the session row.
func rowField(name protoreflect.Name) protowire.Number {
	return (&eventspb.StoredSession{}).ProtoReflect().Descriptor().Fields().ByName(name).Number()
}

// Encoding a session row into a buffer with room allocates nothing: the
// stores encode every row of a commit into one reused buffer.
func TestAppendSessionRowAllocs(t *testing.T) {
	s := codecSession()
	s.DisconnectedAt, s.WillDueAt = s.ConnectedAt, s.ConnectedAt
	s.Inbox = []*eventspb.InboxAppend{{Message: s.Will.GetMessage(), Target: &eventspb.Target{Qos: 1}, Seq: 1, PacketId: 1}}
	s.Sources = []*eventspb.Source{{Partition: 1, Offset: 2}}
	buf := make([]byte, 0, 4096)
	if n := testing.AllocsPerRun(100, func() { buf = AppendSessionRow(buf[:0], s) }); n != 0 {
		t.Errorf("%.0f allocations, want 0", n)
	}
}
