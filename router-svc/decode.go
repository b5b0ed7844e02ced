package routersvc

import (
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// envDecoder decodes the records of shoal.messages for the router: a
// Publish, nearly every record under load, into structs it reuses from
// record to record; other events into new ones. Nothing outlives a record
// but bytes: apply marshals a publish's deliveries before it decodes the
// next record, and a shard keeps a retained message as its own copy
// (ownedCopy). Strings and bytes alias the record (UnmarshalVTUnsafe),
// whose bytes are never reused. Handler goroutine only.
type envDecoder struct {
	env eventspb.Envelope
	ev  eventspb.Envelope_Publish
	pub eventspb.Publish
	msg eventspb.Message
	id  eventspb.MessageID
}

// decode decodes r's envelope, valid until the next decode.
func (d *envDecoder) decode(r *kafka.Record) (*eventspb.Envelope, error) {
	// Decoding merges into what is there: start from zero values, linked
	// up for a Publish (a record of another event replaces Event).
	d.msg = eventspb.Message{}
	d.pub = eventspb.Publish{Message: &d.msg}
	d.ev.Publish = &d.pub
	d.id = eventspb.MessageID{}
	d.env = eventspb.Envelope{MessageId: &d.id, Event: &d.ev}
	if err := kafka.DecodeEnvelopeInto(r, &d.env); err != nil {
		return nil, err
	}
	if d.id.GatewayEpoch == 0 && d.id.Seq == 0 {
		d.env.MessageId = nil // none (a zero id is no id: gateways count from 1)
	}
	return &d.env, nil
}
