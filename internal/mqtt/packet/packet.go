package packet

// Packet is any decoded or encodable control packet.
type Packet interface {
	// Type returns the control packet type.
	Type() Type
	// Decode decodes the body of a packet with fixed header h, sent at
	// protocol version v, into the receiver. Byte slices of the result alias
	// body.
	Decode(h FixedHeader, body []byte, v Version) error
	// Size returns the encoded length for version v.
	Size(v Version) int
	// Append appends the wire form for version v to dst.
	Append(dst []byte, v Version) []byte
}

// New returns a new, empty packet of type t, or nil for the reserved type 0
// and values above 15.
func New(t Type) Packet {
	switch t {
	case CONNECT:
		return &Connect{}
	case CONNACK:
		return &Connack{}
	case PUBLISH:
		return &Publish{}
	case PUBACK, PUBREC, PUBREL, PUBCOMP:
		return &Ack{Kind: t}
	case SUBSCRIBE:
		return &Subscribe{}
	case SUBACK:
		return &Suback{}
	case UNSUBSCRIBE:
		return &Unsubscribe{}
	case UNSUBACK:
		return &Unsuback{}
	case PINGREQ:
		return &Pingreq{}
	case PINGRESP:
		return &Pingresp{}
	case DISCONNECT:
		return &Disconnect{}
	case AUTH:
		return &Auth{}
	}
	return nil
}

// Decode decodes a packet body into a new packet of type h.Type. The fixed
// header must come from ParseHeader or Reader.ReadPacket, which have
// validated the type and flags. Hot paths decode into a reused packet with
// its Decode method instead; both take the same path.
func Decode(h FixedHeader, body []byte, v Version) (Packet, error) {
	p := New(h.Type)
	if p == nil {
		return nil, errorf(CodeMalformedPacket, "fixed header: reserved packet type")
	}
	if err := p.Decode(h, body, v); err != nil {
		return nil, err
	}
	return p, nil
}

// Compile-time checks that every packet type implements Packet.
var (
	_ Packet = (*Connect)(nil)
	_ Packet = (*Connack)(nil)
	_ Packet = (*Publish)(nil)
	_ Packet = (*Ack)(nil)
	_ Packet = (*Subscribe)(nil)
	_ Packet = (*Suback)(nil)
	_ Packet = (*Unsubscribe)(nil)
	_ Packet = (*Unsuback)(nil)
	_ Packet = (*Pingreq)(nil)
	_ Packet = (*Pingresp)(nil)
	_ Packet = (*Disconnect)(nil)
	_ Packet = (*Auth)(nil)
)
