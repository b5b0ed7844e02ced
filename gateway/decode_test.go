package gateway

import (
	"testing"

	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// TestSlotDecoderAllocations is the allocation budget of decoding the
// slot's deliveries: none in steady state, whatever the number of targets,
// and the decoded delivery is the record's.
func TestSlotDecoderAllocations(t *testing.T) {
	for _, n := range []int{1, 100} {
		del := &eventspb.Delivery{Message: &eventspb.Message{Topic: "a/b", Payload: []byte("x"), Qos: 1}}
		for i := range n {
			del.Targets = append(del.Targets, &eventspb.Target{Connection: uint64(i + 1), Qos: 1, SubscriptionIds: []uint32{7}})
		}
		want := &eventspb.Envelope{Tenant: "t", MessageId: &eventspb.MessageID{GatewayEpoch: 1, Seq: 2},
			Event: &eventspb.Envelope_Delivery{Delivery: del}}
		r := kafka.NewRecord(kafka.TopicDeliveries, nil, 0, want)
		var d slotDecoder
		for range 2 { // the first decodes grow the reused targets
			if _, err := d.decode(r); err != nil {
				t.Fatal(err)
			}
		}
		if allocs := testing.AllocsPerRun(100, func() {
			if _, err := d.decode(r); err != nil {
				t.Fatal(err)
			}
		}); allocs != 0 {
			t.Errorf("decoding a delivery to %d targets: %.1f allocations, want 0", n, allocs)
		}
		got, err := d.decode(r)
		if err != nil || !got.EqualVT(want) {
			t.Errorf("decoded %v, %v; want %v", got, err, want)
		}
	}
}
