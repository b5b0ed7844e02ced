package packet

// Publish is a PUBLISH packet (spec §3.3). Topic is empty when a 5.0 sender
// uses an established Topic Alias; resolving aliases is the receiver's job.
type Publish struct {
	Dup      bool
	QoS      QoS
	Retain   bool
	Topic    []byte
	PacketID uint16 // QoS 1 and 2 only
	Props    Properties
	Payload  []byte
}

// Type returns PUBLISH.
func (*Publish) Type() Type { return PUBLISH }

// Decode decodes a PUBLISH body; the flags come from h.
func (p *Publish) Decode(h FixedHeader, body []byte, v Version) error {
	p.Dup, p.QoS, p.Retain = h.dup(), h.qos(), h.retain()
	d := decoder{buf: body, pkt: "PUBLISH"}
	p.Topic = d.binary("topic name")
	if d.err == nil {
		switch topicNameCheck(p.Topic) {
		case badUTF8:
			d.fail(CodeMalformedPacket, "topic name: not well-formed UTF-8 or contains U+0000")
		case hasWildcard:
			d.err = errorf(CodeTopicNameInvalid, "PUBLISH: topic name contains a wildcard")
		}
	}
	p.PacketID = 0
	if p.QoS > 0 {
		p.PacketID = d.u16("packet identifier")
		if d.err == nil && p.PacketID == 0 {
			d.fail(CodeProtocolError, "packet identifier 0")
		}
	}
	if v == V5 {
		d.props(&p.Props, publishProps, repeatUser|1<<PropSubscriptionID)
		if d.err == nil && len(p.Topic) == 0 && !p.Props.Present(PropTopicAlias) {
			d.fail(CodeProtocolError, "empty topic name without a topic alias")
		}
	} else {
		p.Props.reset()
		if d.err == nil && len(p.Topic) == 0 {
			d.fail(CodeProtocolError, "empty topic name")
		}
	}
	p.Payload = d.rest()
	return d.result()
}

func (p *Publish) bodyLen(v Version) (n, props int) {
	n = 2 + len(p.Topic) + len(p.Payload)
	if p.QoS > 0 {
		n += 2
	}
	if v == V5 {
		props = p.Props.propsLen(publishProps)
		n += varintLen(props) + props
	}
	return n, props
}

// Size returns the encoded length of p for version v.
func (p *Publish) Size(v Version) int {
	n, _ := p.bodyLen(v)
	return headerLen(n) + n
}

// Append appends p's wire form for version v to dst.
func (p *Publish) Append(dst []byte, v Version) []byte {
	dst = p.AppendHeader(dst, v)
	return append(dst, p.Payload...)
}

// AppendHeader appends everything of p's wire form but the payload, so a
// writer can send a shared payload buffer without copying it.
func (p *Publish) AppendHeader(dst []byte, v Version) []byte {
	n, props := p.bodyLen(v)
	first := byte(PUBLISH)<<4 | p.QoS<<1
	if p.Dup {
		first |= 0x08
	}
	if p.Retain {
		first |= 0x01
	}
	dst = appendBinary(appendHeader(dst, first, n), p.Topic)
	if p.QoS > 0 {
		dst = appendU16(dst, p.PacketID)
	}
	if v == V5 {
		dst = p.Props.appendProps(dst, publishProps, props)
	}
	return dst
}

type nameFault byte

const (
	nameOK nameFault = iota
	badUTF8
	hasWildcard
)

// topicNameCheck checks the bytes of a topic name in one pass: UTF-8 and
// U+0000 first (malformed), then wildcards (topic name invalid).
func topicNameCheck(b []byte) nameFault {
	wild := false
	for i, c := range b {
		switch {
		case c == 0:
			return badUTF8
		case c == '+' || c == '#':
			wild = true
		case c >= 0x80:
			if !ValidUTF8(b[i:]) {
				return badUTF8
			}
			for _, c := range b[i:] {
				if c == '+' || c == '#' {
					wild = true
				}
			}
			if wild {
				return hasWildcard
			}
			return nameOK
		}
	}
	if wild {
		return hasWildcard
	}
	return nameOK
}

// validTopicName reports whether b, already known to be valid UTF-8, is a
// non-empty topic name without wildcards.
func validTopicName(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c == '+' || c == '#' {
			return false
		}
	}
	return true
}
