package kafka

import "github.com/shoal-mqtt/shoal/schemas/eventspb"

// PublishDecoder decodes records of shoal.messages for their consumers (the
// routers, the bridge): a Publish, nearly every record under load, into
// structs it reuses from record to record; other events into new ones.
// Strings and bytes alias the record (DecodeEnvelopeInto), whose bytes are
// never reused; the structs are valid until the next Decode, so a caller
// keeps only bytes and strings of a record, or copies. Not safe for
// concurrent use.
type PublishDecoder struct {
	env eventspb.Envelope
	ev  eventspb.Envelope_Publish
	pub eventspb.Publish
	msg eventspb.Message
	id  eventspb.MessageID
}

// Decode decodes r's envelope, valid until the next Decode.
func (d *PublishDecoder) Decode(r *Record) (*eventspb.Envelope, error) {
	// Decoding merges into what is there: start from zero values, linked
	// up for a Publish (a record of another event replaces Event).
	d.msg = eventspb.Message{}
	d.pub = eventspb.Publish{Message: &d.msg}
	d.ev.Publish = &d.pub
	d.id = eventspb.MessageID{}
	d.env = eventspb.Envelope{MessageId: &d.id, Event: &d.ev}
	if err := DecodeEnvelopeInto(r, &d.env); err != nil {
		return nil, err
	}
	if d.id.GatewayEpoch == 0 && d.id.Seq == 0 {
		d.env.MessageId = nil // none (a zero id is no id: gateways count from 1)
	}
	return &d.env, nil
}
