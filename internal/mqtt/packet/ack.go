package packet

// Ack is a PUBACK, PUBREC, PUBREL or PUBCOMP packet (spec §3.4–3.7): a
// packet identifier and, in 5.0, a reason code and properties.
type Ack struct {
	Kind     Type // PUBACK, PUBREC, PUBREL or PUBCOMP
	PacketID uint16
	Code     ReasonCode
	Props    Properties
}

// Type returns a.Kind.
func (a *Ack) Type() Type { return a.Kind }

func (a *Ack) codes() *codeSet {
	if a.Kind == PUBREL || a.Kind == PUBCOMP {
		return &pubrelCodes
	}
	return &pubackCodes
}

// Decode decodes an acknowledgement body of type h.Type.
func (a *Ack) Decode(h FixedHeader, body []byte, v Version) error {
	a.Kind = h.Type
	d := decoder{buf: body, pkt: h.Type.String()}
	a.PacketID = d.u16("packet identifier")
	if d.err == nil && a.PacketID == 0 {
		d.fail(CodeProtocolError, "packet identifier 0")
	}
	a.Code = CodeSuccess
	a.Props.reset()
	if v == V5 && d.left() > 0 {
		a.Code = ReasonCode(d.u8("reason code"))
		if d.err == nil && !a.codes().has(a.Code) {
			d.fail(CodeProtocolError, "invalid reason code")
		}
		if d.left() > 0 {
			d.props(&a.Props, ackProps, repeatUser)
		}
	}
	d.end()
	return d.result()
}

func (a *Ack) bodyLen(v Version) (n, props int) {
	if v != V5 {
		return 2, 0
	}
	props = a.Props.propsLen(ackProps)
	switch {
	case props > 0:
		return 3 + varintLen(props) + props, props
	case a.Code != CodeSuccess:
		return 3, 0
	}
	return 2, 0
}

// Size returns the encoded length of a for version v.
func (a *Ack) Size(v Version) int {
	n, _ := a.bodyLen(v)
	return headerLen(n) + n
}

// Append appends a's wire form for version v to dst, in the shortest form
// the specification allows (no reason code when it is Success and there are
// no properties).
func (a *Ack) Append(dst []byte, v Version) []byte {
	n, props := a.bodyLen(v)
	first := byte(a.Kind) << 4
	if a.Kind == PUBREL {
		first |= 0x02
	}
	dst = appendU16(appendHeader(dst, first, n), a.PacketID)
	if n > 2 {
		dst = append(dst, byte(a.Code))
	}
	if n > 3 {
		dst = a.Props.appendProps(dst, ackProps, props)
	}
	return dst
}

// Subscription is one topic filter of a SUBSCRIBE with its options.
type Subscription struct {
	Filter            []byte
	QoS               QoS  // maximum QoS
	NoLocal           bool // 5.0
	RetainAsPublished bool // 5.0
	RetainHandling    byte // 5.0: 0 send retained, 1 only if new, 2 never
}

// Subscribe is a SUBSCRIBE packet (spec §3.8). Filter syntax is checked by
// the receiver per filter (package topic), not by the decoder.
type Subscribe struct {
	PacketID uint16
	Props    Properties // Subscription Identifier (at most one) and User Properties
	Filters  []Subscription
}

// Type returns SUBSCRIBE.
func (*Subscribe) Type() Type { return SUBSCRIBE }

// Decode decodes a SUBSCRIBE body.
func (p *Subscribe) Decode(h FixedHeader, body []byte, v Version) error {
	d := decoder{buf: body, pkt: "SUBSCRIBE"}
	p.PacketID = d.u16("packet identifier")
	if d.err == nil && p.PacketID == 0 {
		d.fail(CodeProtocolError, "packet identifier 0")
	}
	if v == V5 {
		d.props(&p.Props, subscribeProps, repeatUser)
	} else {
		p.Props.reset()
	}
	p.Filters = p.Filters[:0]
	for d.err == nil && d.left() > 0 {
		f := d.str("topic filter")
		o := d.u8("subscription options")
		if d.err != nil {
			break
		}
		s := Subscription{Filter: f, QoS: o & 3}
		if v == V5 {
			s.NoLocal = o&0x04 != 0
			s.RetainAsPublished = o&0x08 != 0
			s.RetainHandling = (o >> 4) & 3
			switch {
			case o&0xc0 != 0:
				d.fail(CodeMalformedPacket, "reserved subscription option bits set")
			case s.RetainHandling == 3:
				d.fail(CodeProtocolError, "retain handling 3")
			case s.QoS == 3: // a Protocol Error in 5.0 (spec §3.8.3.1)
				d.fail(CodeProtocolError, "maximum QoS 3")
			}
		} else if o&0xfc != 0 {
			d.fail(CodeMalformedPacket, "reserved subscription option bits set")
		} else if s.QoS == 3 { // malformed in 3.1.1 [MQTT-3-8.3-4]
			d.fail(CodeMalformedPacket, "maximum QoS 3")
		}
		p.Filters = append(p.Filters, s)
	}
	if d.err == nil && len(p.Filters) == 0 {
		d.fail(CodeProtocolError, "no topic filters")
	}
	return d.result()
}

func (p *Subscribe) bodyLen(v Version) (n, props int) {
	n = 2
	if v == V5 {
		props = p.Props.propsLen(subscribeProps)
		n += varintLen(props) + props
	}
	for _, s := range p.Filters {
		n += 3 + len(s.Filter)
	}
	return n, props
}

// Size returns the encoded length of p for version v.
func (p *Subscribe) Size(v Version) int {
	n, _ := p.bodyLen(v)
	return headerLen(n) + n
}

// Append appends p's wire form for version v to dst.
func (p *Subscribe) Append(dst []byte, v Version) []byte {
	n, props := p.bodyLen(v)
	dst = appendU16(appendHeader(dst, byte(SUBSCRIBE)<<4|0x02, n), p.PacketID)
	if v == V5 {
		dst = p.Props.appendProps(dst, subscribeProps, props)
	}
	for _, s := range p.Filters {
		o := s.QoS
		if v == V5 {
			if s.NoLocal {
				o |= 0x04
			}
			if s.RetainAsPublished {
				o |= 0x08
			}
			o |= s.RetainHandling << 4
		}
		dst = append(appendBinary(dst, s.Filter), o)
	}
	return dst
}

// Suback is a SUBACK packet (spec §3.9): one reason code per filter, in
// order. For 3.1.1 the codes are 0x00–0x02 and 0x80 (failure); Append maps
// any 5.0 failure code to 0x80.
type Suback struct {
	PacketID uint16
	Props    Properties
	Codes    []ReasonCode
}

// Type returns SUBACK.
func (*Suback) Type() Type { return SUBACK }

// Decode decodes a SUBACK body.
func (p *Suback) Decode(h FixedHeader, body []byte, v Version) error {
	return decodeCodeList(body, v, "SUBACK", &p.PacketID, &p.Props, &p.Codes, &subackCodes, true)
}

// Size returns the encoded length of p for version v.
func (p *Suback) Size(v Version) int { return codeListSize(v, &p.Props, len(p.Codes), true) }

// Append appends p's wire form for version v to dst.
func (p *Suback) Append(dst []byte, v Version) []byte {
	return appendCodeList(dst, v, byte(SUBACK)<<4, p.PacketID, &p.Props, p.Codes, true)
}

// Unsubscribe is an UNSUBSCRIBE packet (spec §3.10).
type Unsubscribe struct {
	PacketID uint16
	Props    Properties // User Properties only
	Filters  [][]byte
}

// Type returns UNSUBSCRIBE.
func (*Unsubscribe) Type() Type { return UNSUBSCRIBE }

// Decode decodes an UNSUBSCRIBE body.
func (p *Unsubscribe) Decode(h FixedHeader, body []byte, v Version) error {
	d := decoder{buf: body, pkt: "UNSUBSCRIBE"}
	p.PacketID = d.u16("packet identifier")
	if d.err == nil && p.PacketID == 0 {
		d.fail(CodeProtocolError, "packet identifier 0")
	}
	if v == V5 {
		d.props(&p.Props, unsubscribeProps, repeatUser)
	} else {
		p.Props.reset()
	}
	p.Filters = p.Filters[:0]
	for d.err == nil && d.left() > 0 {
		f := d.str("topic filter")
		if d.err == nil {
			p.Filters = append(p.Filters, f)
		}
	}
	if d.err == nil && len(p.Filters) == 0 {
		d.fail(CodeProtocolError, "no topic filters")
	}
	return d.result()
}

func (p *Unsubscribe) bodyLen(v Version) (n, props int) {
	n = 2
	if v == V5 {
		props = p.Props.propsLen(unsubscribeProps)
		n += varintLen(props) + props
	}
	for _, f := range p.Filters {
		n += 2 + len(f)
	}
	return n, props
}

// Size returns the encoded length of p for version v.
func (p *Unsubscribe) Size(v Version) int {
	n, _ := p.bodyLen(v)
	return headerLen(n) + n
}

// Append appends p's wire form for version v to dst.
func (p *Unsubscribe) Append(dst []byte, v Version) []byte {
	n, props := p.bodyLen(v)
	dst = appendU16(appendHeader(dst, byte(UNSUBSCRIBE)<<4|0x02, n), p.PacketID)
	if v == V5 {
		dst = p.Props.appendProps(dst, unsubscribeProps, props)
	}
	for _, f := range p.Filters {
		dst = appendBinary(dst, f)
	}
	return dst
}

// Unsuback is an UNSUBACK packet (spec §3.11). 3.1.1 UNSUBACK has neither
// codes nor properties.
type Unsuback struct {
	PacketID uint16
	Props    Properties
	Codes    []ReasonCode // 5.0 only
}

// Type returns UNSUBACK.
func (*Unsuback) Type() Type { return UNSUBACK }

// Decode decodes an UNSUBACK body.
func (p *Unsuback) Decode(h FixedHeader, body []byte, v Version) error {
	return decodeCodeList(body, v, "UNSUBACK", &p.PacketID, &p.Props, &p.Codes, &unsubackCodes, false)
}

// Size returns the encoded length of p for version v.
func (p *Unsuback) Size(v Version) int { return codeListSize(v, &p.Props, len(p.Codes), false) }

// Append appends p's wire form for version v to dst.
func (p *Unsuback) Append(dst []byte, v Version) []byte {
	return appendCodeList(dst, v, byte(UNSUBACK)<<4, p.PacketID, &p.Props, p.Codes, false)
}

// decodeCodeList decodes SUBACK and UNSUBACK bodies: packet identifier,
// properties (5.0) and one reason code per filter. v311Codes says whether
// 3.1.1 carries codes (SUBACK) or nothing (UNSUBACK).
func decodeCodeList(body []byte, v Version, name string, id *uint16, props *Properties,
	codes *[]ReasonCode, valid *codeSet, v311Codes bool) error {
	d := decoder{buf: body, pkt: name}
	*id = d.u16("packet identifier")
	if d.err == nil && *id == 0 {
		d.fail(CodeProtocolError, "packet identifier 0")
	}
	*codes = (*codes)[:0]
	if v == V5 {
		d.props(props, ackProps, repeatUser)
	} else {
		props.reset()
		if !v311Codes {
			d.end()
			return d.result()
		}
	}
	for d.err == nil && d.left() > 0 {
		c := ReasonCode(d.u8("reason code"))
		ok := valid.has(c)
		if v != V5 {
			ok = c <= 2 || c == 0x80
		}
		if !ok {
			d.fail(CodeProtocolError, "invalid reason code")
		}
		*codes = append(*codes, c)
	}
	if d.err == nil && len(*codes) == 0 {
		d.fail(CodeProtocolError, "no reason codes")
	}
	return d.result()
}

func codeListLen(v Version, props *Properties, codes int, v311Codes bool) (n, plen int) {
	if v != V5 {
		if v311Codes {
			return 2 + codes, 0
		}
		return 2, 0
	}
	plen = props.propsLen(ackProps)
	return 2 + varintLen(plen) + plen + codes, plen
}

func codeListSize(v Version, props *Properties, codes int, v311Codes bool) int {
	n, _ := codeListLen(v, props, codes, v311Codes)
	return headerLen(n) + n
}

func appendCodeList(dst []byte, v Version, first byte, id uint16, props *Properties,
	codes []ReasonCode, v311Codes bool) []byte {
	n, plen := codeListLen(v, props, len(codes), v311Codes)
	dst = appendU16(appendHeader(dst, first, n), id)
	if v != V5 {
		if !v311Codes {
			return dst
		}
		for _, c := range codes {
			if c.IsError() {
				c = 0x80
			}
			dst = append(dst, byte(c))
		}
		return dst
	}
	dst = props.appendProps(dst, ackProps, plen)
	for _, c := range codes {
		dst = append(dst, byte(c))
	}
	return dst
}
