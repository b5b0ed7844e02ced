package kafka

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// testEnvelopes has one envelope of every event type.
func testEnvelopes() map[string]*eventspb.Envelope {
	base := func(ev func(*eventspb.Envelope)) *eventspb.Envelope {
		env := &eventspb.Envelope{
			SchemaVersion: 1,
			Tenant:        "acme",
			ClientId:      "acme-sensor-1",
			Gateway:       "gw-0",
			TimestampUs:   1_700_000_000_000_000,
			MessageId:     &eventspb.MessageID{GatewayEpoch: 42, Seq: 7},
		}
		ev(env)
		return env
	}
	msg := &eventspb.Message{
		Topic: "sensors/1/temp", Payload: []byte("21.5"), Qos: 1, Retain: true,
		UserProperties: []*eventspb.UserProperty{{Key: "unit", Value: "C"}},
	}
	return map[string]*eventspb.Envelope{
		EventPublish: base(func(e *eventspb.Envelope) {
			e.Event = &eventspb.Envelope_Publish{Publish: &eventspb.Publish{Message: msg, Connection: 9}}
		}),
		EventSubscriptionChange: base(func(e *eventspb.Envelope) {
			e.Event = &eventspb.Envelope_SubscriptionChange{SubscriptionChange: &eventspb.SubscriptionChange{
				Op: eventspb.SubscriptionChange_OP_ADD, Filter: "sensors/+/temp",
				Options: &eventspb.SubscriptionOptions{Qos: 1, SubscriptionId: 3},
				Route:   &eventspb.Route{Slot: 2, Connection: 9, Generation: 4},
			}}
		}),
		EventConnect: base(func(e *eventspb.Envelope) {
			e.Event = &eventspb.Envelope_Connect{Connect: &eventspb.Connect{
				Route: &eventspb.Route{Slot: 2}, CleanStart: true, SessionExpiryS: 60, ProtocolVersion: 5, RequestId: 11,
			}}
		}),
		EventConnectResult: base(func(e *eventspb.Envelope) {
			e.Event = &eventspb.Envelope_ConnectResult{ConnectResult: &eventspb.ConnectResult{RequestId: 11, SessionPresent: true, Generation: 4}}
		}),
		EventPresence: base(func(e *eventspb.Envelope) {
			e.Event = &eventspb.Envelope_Presence{Presence: &eventspb.Presence{Online: true, Route: &eventspb.Route{Slot: 2}}}
		}),
		EventDisconnect: base(func(e *eventspb.Envelope) {
			expiry := uint32(0)
			e.Event = &eventspb.Envelope_Disconnect{Disconnect: &eventspb.Disconnect{Connection: 9, PublishWill: true, SessionExpiryS: &expiry}}
		}),
		EventKick: base(func(e *eventspb.Envelope) {
			e.Event = &eventspb.Envelope_Kick{Kick: &eventspb.Kick{Connection: 9, ReasonCode: 0x8E}}
		}),
		EventDelivery: base(func(e *eventspb.Envelope) {
			e.Event = &eventspb.Envelope_Delivery{Delivery: &eventspb.Delivery{Message: msg, Targets: []*eventspb.Target{
				{ClientId: "acme-a", Connection: 1, Qos: 1, SubscriptionIds: []uint32{3}},
				{ClientId: "acme-b", Connection: 2},
			}}}
		}),
		EventSessionSubscriptions: base(func(e *eventspb.Envelope) {
			e.Event = &eventspb.Envelope_SessionSubscriptions{SessionSubscriptions: &eventspb.SessionSubscriptions{
				Added: []*eventspb.SessionSubscription{{Filter: "$share/g/a/#"}}, Removed: []string{"b"}, Generation: 4,
			}}
		}),
		EventInboxAppend: base(func(e *eventspb.Envelope) {
			e.Event = &eventspb.Envelope_InboxAppend{InboxAppend: &eventspb.InboxAppend{
				Message: &eventspb.Message{Topic: "t", Payload: []byte("p"), Qos: 1}, Target: &eventspb.Target{Qos: 1},
			}}
		}),
		EventSharedRedispatch: base(func(e *eventspb.Envelope) {
			e.Event = &eventspb.Envelope_SharedRedispatch{SharedRedispatch: &eventspb.SharedRedispatch{
				Message: &eventspb.Message{Topic: "t", Payload: []byte("p"), Qos: 1}, ShareGroup: "g", Filter: "t", ExcludeClient: "c",
			}}
		}),
		EventInboxAck: base(func(e *eventspb.Envelope) {
			e.Event = &eventspb.Envelope_InboxAck{InboxAck: &eventspb.InboxAck{Seq: 9, Received: true, Generation: 2}}
		}),
		EventPublishRelease: base(func(e *eventspb.Envelope) {
			e.Event = &eventspb.Envelope_PublishRelease{PublishRelease: &eventspb.PublishRelease{PacketId: 7, SessionGeneration: 3}}
		}),
		EventQuotaReport: base(func(e *eventspb.Envelope) {
			e.Event = &eventspb.Envelope_QuotaReport{QuotaReport: &eventspb.QuotaReport{
				IntervalMs: 1000, Connections: 3, Messages: &eventspb.QuotaUsage{PerSecond: 12.5, Saturated: true},
			}}
		}),
		EventSessionCommand: base(func(e *eventspb.Envelope) {
			e.Event = &eventspb.Envelope_SessionCommand{SessionCommand: &eventspb.SessionCommand{Op: eventspb.SessionCommand_OP_KICK, Reason: "ctl"}}
		}),
		EventDeliveryAck: base(func(e *eventspb.Envelope) {
			e.Event = &eventspb.Envelope_DeliveryAck{DeliveryAck: &eventspb.DeliveryAck{PacketId: 3, Qos: 1, Connection: 9}}
		}),
		EventSessionTick: base(func(e *eventspb.Envelope) {
			e.Event = &eventspb.Envelope_SessionTick{SessionTick: &eventspb.SessionTick{}}
		}),
		EventGatewayHeartbeat: base(func(e *eventspb.Envelope) {
			e.Event = &eventspb.Envelope_GatewayHeartbeat{GatewayHeartbeat: &eventspb.GatewayHeartbeat{Slot: 2, IntervalMs: 1000}}
		}),
	}
}

// Every case of the Envelope's event oneof has a type name, the oneof
// field's, read without allocating; each Event constant (the keys of
// testEnvelopes) is one. A new event in the schema fails here until
// testEnvelopes has one.
func TestEventTypesCoverTheOneof(t *testing.T) {
	fields := (&eventspb.Envelope{}).ProtoReflect().Descriptor().Oneofs().ByName("event").Fields()
	envs := testEnvelopes()
	if fields.Len() != len(envs) {
		t.Errorf("the event oneof has %d cases, testEnvelopes %d", fields.Len(), len(envs))
	}
	for i := range fields.Len() {
		name := string(fields.Get(i).Name())
		env, ok := envs[name]
		if !ok {
			t.Errorf("event %q: no test envelope (and maybe no case in EnvelopeType)", name)
			continue
		}
		if got := EnvelopeType(env); got != name {
			t.Errorf("EnvelopeType of a %s = %q", name, got)
		}
		r := &Record{Headers: []Header{{Key: HeaderType, Value: []byte(name)}}}
		if got := EventType(r); got != name {
			t.Errorf("EventType of a %s header = %q", name, got)
		}
		if EventBody(env) == nil {
			t.Errorf("EventBody of a %s: nil", name)
		}
		if n := testing.AllocsPerRun(100, func() { _, _ = EnvelopeType(env), EventType(r) }); n != 0 {
			t.Errorf("%s: EnvelopeType and EventType allocate %.0f times", name, n)
		}
	}
	if !slices.Equal(EventTypes(), func() []string {
		var names []string
		for i := range fields.Len() {
			names = append(names, string(fields.Get(i).Name()))
		}
		return names
	}()) {
		t.Errorf("EventTypes() = %q, want the oneof's cases in order", EventTypes())
	}
	if EnvelopeType(&eventspb.Envelope{}) != "" || EventBody(&eventspb.Envelope{}) != nil || EnvelopeType(nil) != "" || EventBody(nil) != nil {
		t.Error("an envelope without an event, or none, has a type or a body")
	}
}

func TestNewRecordAndDecode(t *testing.T) {
	envs := testEnvelopes()
	var got eventspb.Envelope // reused: DecodeEnvelope must reset it
	for typ, env := range envs {
		r := NewRecord(TopicMessages, []byte("acme/k"), 3, env)
		if r.Topic != TopicMessages || string(r.Key) != "acme/k" || r.Partition != 3 {
			t.Errorf("%s: record %s %q %d", typ, r.Topic, r.Key, r.Partition)
		}
		if EnvelopeType(env) != typ || EventType(r) != typ {
			t.Errorf("EnvelopeType = %q, EventType = %q, want %q", EnvelopeType(env), EventType(r), typ)
		}
		want, err := env.MarshalVT()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(r.Value, want) {
			t.Errorf("%s: value differs from MarshalVT", typ)
		}
		if cap(r.Value) != len(r.Value) {
			t.Errorf("%s: value has spare capacity %d: appending would overwrite the header", typ, cap(r.Value)-len(r.Value))
		}
		if err := DecodeEnvelope(r, &got); err != nil {
			t.Fatalf("%s: DecodeEnvelope: %v", typ, err)
		}
		if !got.EqualVT(env) {
			t.Errorf("%s: decoded %v, want %v", typ, &got, env)
		}
	}
}

func TestDecodeEnvelopeAliasesValue(t *testing.T) {
	env := testEnvelopes()[EventPublish]
	r := NewRecord(TopicMessages, []byte("k"), PartitionByKey, env)
	var got eventspb.Envelope
	if err := DecodeEnvelope(r, &got); err != nil {
		t.Fatal(err)
	}
	payload := got.GetPublish().GetMessage().GetPayload()
	i := bytes.Index(r.Value, []byte("21.5"))
	if i < 0 || &payload[0] != &r.Value[i] {
		t.Fatal("the decoded payload does not alias the record's value")
	}
}

// DecodeEnvelopeCopy decodes what DecodeEnvelope does, into a reset
// envelope, but nothing of it refers to the record.
func TestDecodeEnvelopeCopy(t *testing.T) {
	want := testEnvelopes()[EventPublish]
	r := NewRecord(TopicMessages, []byte("k"), PartitionByKey, want)
	got := &eventspb.Envelope{Tenant: "stale", Event: &eventspb.Envelope_Kick{Kick: &eventspb.Kick{}}}
	if err := DecodeEnvelopeCopy(r, got); err != nil {
		t.Fatal(err)
	}
	if !got.EqualVT(want) {
		t.Fatalf("decoded %v, want %v", got, want)
	}
	clear(r.Value)
	if !got.EqualVT(want) {
		t.Fatalf("after the record's value was overwritten: %v, want %v", got, want)
	}
}

func TestDecodeEnvelopeError(t *testing.T) {
	r := &Record{Topic: TopicMessages, Partition: 2, Offset: 7, Value: []byte{0x0a, 0xff}}
	for name, decode := range map[string]func(*Record, *eventspb.Envelope) error{
		"DecodeEnvelope": DecodeEnvelope, "DecodeEnvelopeInto": DecodeEnvelopeInto, "DecodeEnvelopeCopy": DecodeEnvelopeCopy,
	} {
		var env eventspb.Envelope
		err := decode(r, &env)
		if err == nil || !strings.Contains(err.Error(), "shoal.messages/2 at offset 7") {
			t.Fatalf("%s(garbage) = %v", name, err)
		}
	}
}

func TestHeaders(t *testing.T) {
	r := NewRecord(TopicDeliveries, nil, 1, testEnvelopes()[EventDelivery])
	if Traceparent(r) != "" {
		t.Errorf("Traceparent of a new record = %q", Traceparent(r))
	}
	const tp1 = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	const tp2 = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	WithTraceparent(r, tp1)
	WithTraceparent(r, tp2)
	if Traceparent(r) != tp2 || len(r.Headers) != 2 {
		t.Errorf("after two WithTraceparent: %q, %d headers", Traceparent(r), len(r.Headers))
	}
	if EventType(r) != EventDelivery {
		t.Errorf("EventType = %q", EventType(r))
	}
	unknown := &Record{Headers: []Header{{Key: HeaderType, Value: []byte("future_event")}}}
	if EventType(unknown) != "future_event" {
		t.Errorf("EventType(unknown) = %q", EventType(unknown))
	}
	if EventType(&Record{}) != "" || EnvelopeType(&eventspb.Envelope{}) != "" {
		t.Error("a record or envelope without event has a type")
	}
	if r := NewRecord(TopicMessages, []byte("k"), PartitionByKey, &eventspb.Envelope{Tenant: "x"}); len(r.Headers) != 0 {
		t.Errorf("an envelope without event got headers %v", r.Headers)
	}
	// Header: the first of its name, nil without one, without allocating.
	two := &Record{Headers: []Header{{Key: "a", Value: []byte("1")}, {Key: HeaderTraceparent, Value: []byte(tp1)}, {Key: HeaderTraceparent, Value: []byte(tp2)}}}
	if got := two.Header(HeaderTraceparent); string(got) != tp1 {
		t.Errorf("Header of a record with two traceparents = %q, want the first", got)
	}
	if got := two.Header("missing"); got != nil {
		t.Errorf("Header(missing) = %q, want nil", got)
	}
	if n := testing.AllocsPerRun(100, func() { _ = two.Header(HeaderTraceparent) }); n != 0 {
		t.Errorf("Header allocates %.0f times", n)
	}
}

// Allocation budgets of the hot path.
func TestEnvelopeAllocs(t *testing.T) {
	env := testEnvelopes()[EventPublish]
	key := []byte("acme/sensors/1/temp")
	if n := testing.AllocsPerRun(200, func() {
		r := NewRecord(TopicMessages, key, PartitionByKey, env)
		WithTraceparent(r, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	}); n > 3 {
		t.Errorf("NewRecord + WithTraceparent: %.0f allocations, want ≤ 3 (record, value, traceparent)", n)
	}
	if n := testing.AllocsPerRun(200, func() { NewRecord(TopicMessages, key, PartitionByKey, env) }); n > 2 {
		t.Errorf("NewRecord: %.0f allocations, want ≤ 2", n)
	}
	r := NewRecord(TopicMessages, key, PartitionByKey, env)
	if n := testing.AllocsPerRun(200, func() { _ = EventType(r) }); n != 0 {
		t.Errorf("EventType: %.0f allocations, want 0", n)
	}
}

// TestFillReusesRecords checks that a refilled pooled record carries
// exactly what a new one does, with its key and traceparent in its own
// buffer, and that refilling allocates nothing.
func TestFillReusesRecords(t *testing.T) {
	envs := testEnvelopes()
	var pool RecordPool
	parent := []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	for _, typ := range []string{EventPublish, EventDelivery, EventConnect, EventPublish} {
		env := envs[typ]
		r := pool.Get()
		r.Fill(TopicMessages, nil, PartitionByKey, env)
		r.SetKey("acme", "sensors/1/temp")
		r.AddTraceChild(parent)
		want := NewRecord(TopicMessages, []byte("acme/sensors/1/temp"), PartitionByKey, env)
		if !bytes.Equal(r.Value, want.Value) || string(r.Key) != "acme/sensors/1/temp" || r.Partition != PartitionByKey || r.Topic != TopicMessages {
			t.Fatalf("%s: filled record %q key %q differs from NewRecord's %q", typ, r.Value, r.Key, want.Value)
		}
		if EventType(r) != typ {
			t.Errorf("%s: type header %q", typ, EventType(r))
		}
		tp := Traceparent(r)
		if len(tp) != 55 || tp[3:35] != string(parent[3:35]) || tp[36:52] == string(parent[36:52]) {
			t.Errorf("%s: traceparent %q is not a child of %q", typ, tp, parent)
		}
		if len(r.Headers) != 2 {
			t.Errorf("%s: %d headers, want type and traceparent", typ, len(r.Headers))
		}
		var got eventspb.Envelope
		if err := DecodeEnvelope(r, &got); err != nil || EnvelopeType(&got) != typ {
			t.Fatalf("%s: decode filled record: %v", typ, err)
		}
		pool.Put(r)
	}
	r := pool.Get()
	env := envs[EventPublish]
	r.Fill(TopicMessages, nil, PartitionByKey, env)
	if n := testing.AllocsPerRun(200, func() {
		r.Fill(TopicMessages, nil, PartitionByKey, env)
		r.SetKey("acme", "sensors/1/temp")
		r.AddTraceChild(parent)
	}); n != 0 {
		t.Errorf("refilling a record allocates %.1f times, want 0", n)
	}
	// A record whose buffer grew large gives it up when put back.
	big := &eventspb.Envelope{Event: &eventspb.Envelope_Publish{Publish: &eventspb.Publish{Message: &eventspb.Message{Payload: make([]byte, 2*maxPooledBuffer)}}}}
	r.Fill(TopicMessages, []byte("k"), PartitionByKey, big)
	pool.Put(r)
	if r.fs.buf != nil || r.Value != nil || r.Headers != nil {
		t.Error("a record put back keeps its large buffer or its fields")
	}
}
