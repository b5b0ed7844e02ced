package kafka

import (
	"testing"

	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// TestPublishDecoderReuse: publishes decoded one after the other into the
// reused structs carry only their own fields (decoding merges, so nothing
// of the previous record may be left), other events decode as usual in
// between, and decoding a publish allocates nothing.
func TestPublishDecoderReuse(t *testing.T) {
	full := &eventspb.Envelope{Tenant: "t", ClientId: "c1", MessageId: &eventspb.MessageID{GatewayEpoch: 7, Seq: 1},
		Event: &eventspb.Envelope_Publish{Publish: &eventspb.Publish{Message: &eventspb.Message{
			Topic: "a/b", Payload: []byte("one"), Qos: 1, Retain: true, ContentType: "text/plain", ExpiresAtMs: 99, HasExpiry: true,
			UserProperties: []*eventspb.UserProperty{{Key: "k", Value: "v"}},
		}}}}
	bare := &eventspb.Envelope{Tenant: "u", MessageId: &eventspb.MessageID{Seq: 2},
		Event: &eventspb.Envelope_Publish{Publish: &eventspb.Publish{Message: &eventspb.Message{Topic: "c", Payload: []byte("two")}}}}
	other := &eventspb.Envelope{Tenant: "t", ClientId: "c2", Event: &eventspb.Envelope_Kick{Kick: &eventspb.Kick{Connection: 5}}}

	var d PublishDecoder
	for i, want := range []*eventspb.Envelope{full, bare, other, full, other, bare} {
		got, err := d.Decode(NewRecord(TopicMessages, nil, 0, want))
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if !got.EqualVT(want) {
			t.Fatalf("record %d decoded as %v, want %v", i, got, want)
		}
	}

	rec := NewRecord(TopicMessages, nil, 0, bare)
	if n := testing.AllocsPerRun(100, func() {
		if _, err := d.Decode(rec); err != nil {
			t.Fatal(err)
		}
	}); n > 0 {
		t.Errorf("decoding a publish allocates %.0f times, want 0", n)
	}
}
