package routersvc

import (
	"slices"
	"testing"

	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// TestSetSourceNumbersPerSlot: a record's deliveries are numbered per
// slot, so the one delivery a gateway gets of a publish is index 0 in
// whatever order the slots were planned, and several deliveries to one
// slot (retained messages for a new subscription) count up.
func TestSetSourceNumbersPerSlot(t *testing.T) {
	o := NewOutput()
	msg := &eventspb.Message{Topic: "t"}
	o.delivery(0, "acme", nil, 1, msg) // an earlier record's, left alone
	o.SetSource(0, 2, 6)
	first := len(o.Deliveries)
	for _, slot := range []int32{3, 1, 3, 0, 3} {
		o.delivery(slot, "acme", nil, 1, msg)
	}
	o.SetSource(first, 2, 7)
	var got []uint32
	for _, d := range o.Deliveries {
		got = append(got, d.Envelope.GetDelivery().GetSource().GetIndex())
		if src := d.Envelope.GetDelivery().GetSource(); src.GetPartition() != 2 {
			t.Errorf("source %v", src)
		}
	}
	if want := []uint32{0, 0, 0, 1, 0, 2}; !slices.Equal(got, want) {
		t.Errorf("indexes %v, want %v", got, want)
	}
	if o.Deliveries[0].Envelope.GetDelivery().GetSource().GetOffset() != 6 {
		t.Error("an earlier record's delivery was renumbered")
	}
}
