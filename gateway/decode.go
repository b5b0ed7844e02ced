package gateway

import (
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// slotDecoder decodes the records of the gateway's slot into structs it
// reuses from record to record, so that a delivery, whatever its number of
// targets, costs no allocation in steady state: the envelope, its Delivery
// (whose Targets keep their elements: vtprotobuf's pool feature, see
// schemas/buf.gen.yaml) and the Message, linked up before
// kafka.DecodeEnvelopeInto merges the record into them. Strings and bytes
// alias the record, which is never reused.
//
// Ownership: what decode returns is valid until the next decode. A
// connection that keeps the Message (a QoS 1/2 message in flight, a
// delivery held until CONNACK) makes the caller call keepMessage, and the
// next record is decoded into a new Message. Targets are never kept (the
// connection copies what it needs). Slot consumer goroutine only.
type slotDecoder struct {
	env eventspb.Envelope
	ev  eventspb.Envelope_Delivery
	del eventspb.Delivery
	id  eventspb.MessageID
	msg *eventspb.Message
	// targets backs del.Targets' elements in one array once a delivery
	// has grown them, so that decoding a large fan-out walks contiguous
	// memory.
	targets []eventspb.Target
}

// decode decodes r's envelope. A delivery record is decoded into the
// reused structs; other events are decoded as usual.
func (d *slotDecoder) decode(r *kafka.Record) (*eventspb.Envelope, error) {
	// Empty the delivery, keeping its Targets for the decoder to fill again
	// (ResetVT would too, through each message's Reset, which costs an
	// atomic store per target).
	for _, t := range d.del.Targets {
		ids := t.SubscriptionIds[:0]
		*t = eventspb.Target{}
		t.SubscriptionIds = ids
	}
	if n := len(d.del.Targets); n > len(d.targets) {
		// The last delivery had more targets than the array holds (the
		// decoder allocated the extra ones): a larger array, for them all.
		d.targets = make([]eventspb.Target, n+n/4)
		ts := d.del.Targets[:cap(d.del.Targets)]
		for i := range ts {
			if i < len(d.targets) {
				ts[i] = &d.targets[i]
			} else {
				ts[i] = nil
			}
		}
	}
	d.del.Source.ReturnToVTPool()
	d.del = eventspb.Delivery{Targets: d.del.Targets[:0]}
	if d.msg == nil {
		d.msg = new(eventspb.Message)
	} else {
		d.msg.Reset()
	}
	d.del.Message = d.msg
	d.ev.Delivery = &d.del
	d.id = eventspb.MessageID{}
	d.env = eventspb.Envelope{MessageId: &d.id, Event: &d.ev}
	if err := kafka.DecodeEnvelopeInto(r, &d.env); err != nil {
		return nil, err
	}
	return &d.env, nil
}

// keepMessage gives the last decoded Message away: the next record is
// decoded into a new one.
func (d *slotDecoder) keepMessage() {
	d.del.Message = nil
	d.msg = nil
}
