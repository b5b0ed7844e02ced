package packet

import "bytes"

// Connect is a CONNECT packet (spec §3.1).
type Connect struct {
	ProtocolName []byte // "MQTT", or "MQIsdp" for 3.1; Append fills it in when empty
	Version      Version
	CleanStart   bool // Clean Session in 3.1.1
	KeepAlive    uint16
	Props        Properties
	ClientID     []byte

	WillFlag    bool
	WillQoS     QoS
	WillRetain  bool
	WillProps   Properties
	WillTopic   []byte
	WillPayload []byte

	UsernameFlag bool
	Username     []byte
	PasswordFlag bool
	Password     []byte
}

// Type returns CONNECT.
func (*Connect) Type() Type { return CONNECT }

var (
	nameMQTT   = []byte("MQTT")
	nameMQIsdp = []byte("MQIsdp")
)

// Decode decodes a CONNECT body. The version argument is ignored: CONNECT
// carries its own, left in p.Version. An unknown protocol name or level is
// CodeUnsupportedProtocolVersion, and p.Version then holds the level read
// so the gateway can choose how to answer.
func (p *Connect) Decode(h FixedHeader, body []byte, _ Version) error {
	d := decoder{buf: body, pkt: "CONNECT"}
	p.ProtocolName = d.str("protocol name")
	p.Version = Version(d.u8("protocol level"))
	if d.err != nil {
		return d.err
	}
	switch {
	case p.Version == V31 && bytes.Equal(p.ProtocolName, nameMQIsdp),
		(p.Version == V311 || p.Version == V5) && bytes.Equal(p.ProtocolName, nameMQTT):
	default:
		return errorf(CodeUnsupportedProtocolVersion, "CONNECT: unsupported protocol name or level")
	}
	flags := d.u8("connect flags")
	if flags&0x01 != 0 {
		d.fail(CodeMalformedPacket, "reserved connect flag set")
	}
	p.CleanStart = flags&0x02 != 0
	p.WillFlag = flags&0x04 != 0
	p.WillQoS = (flags >> 3) & 3
	p.WillRetain = flags&0x20 != 0
	p.PasswordFlag = flags&0x40 != 0
	p.UsernameFlag = flags&0x80 != 0
	switch {
	case p.WillQoS == 3:
		d.fail(CodeMalformedPacket, "will QoS 3")
	case !p.WillFlag && (p.WillQoS != 0 || p.WillRetain):
		d.fail(CodeMalformedPacket, "will QoS or will retain set without the will flag")
	case p.Version != V5 && p.PasswordFlag && !p.UsernameFlag:
		d.fail(CodeMalformedPacket, "password flag set without the user name flag")
	}
	p.KeepAlive = d.u16("keep alive")
	if p.Version == V5 {
		d.props(&p.Props, connectProps, repeatUser)
		if d.err == nil && p.Props.Present(PropAuthData) && !p.Props.Present(PropAuthMethod) {
			d.fail(CodeProtocolError, "authentication data without authentication method")
		}
	} else {
		p.Props.reset()
	}
	p.ClientID = d.str("client identifier")
	p.WillProps.reset()
	p.WillTopic, p.WillPayload = nil, nil
	if p.WillFlag {
		if p.Version == V5 {
			d.props(&p.WillProps, willProps, repeatUser)
		}
		p.WillTopic = d.str("will topic")
		if d.err == nil && !validTopicName(p.WillTopic) {
			d.err = errorf(CodeTopicNameInvalid, "CONNECT: will topic is not a valid topic name")
		}
		p.WillPayload = d.binary("will payload")
	}
	p.Username, p.Password = nil, nil
	if p.UsernameFlag {
		p.Username = d.str("user name")
	}
	if p.PasswordFlag {
		p.Password = d.binary("password")
	}
	d.end()
	return d.result()
}

func (p *Connect) name() []byte {
	switch {
	case len(p.ProtocolName) > 0:
		return p.ProtocolName
	case p.Version == V31:
		return nameMQIsdp
	}
	return nameMQTT
}

func (p *Connect) bodyLen() (n, props, wprops int) {
	n = 2 + len(p.name()) + 1 + 1 + 2 + 2 + len(p.ClientID)
	if p.Version == V5 {
		props = p.Props.propsLen(connectProps)
		n += varintLen(props) + props
	}
	if p.WillFlag {
		if p.Version == V5 {
			wprops = p.WillProps.propsLen(willProps)
			n += varintLen(wprops) + wprops
		}
		n += 2 + len(p.WillTopic) + 2 + len(p.WillPayload)
	}
	if p.UsernameFlag {
		n += 2 + len(p.Username)
	}
	if p.PasswordFlag {
		n += 2 + len(p.Password)
	}
	return n, props, wprops
}

// Size returns the encoded length of p. The version argument is ignored.
func (p *Connect) Size(Version) int {
	n, _, _ := p.bodyLen()
	return headerLen(n) + n
}

// Append appends p's wire form to dst. The version argument is ignored:
// p.Version decides.
func (p *Connect) Append(dst []byte, _ Version) []byte {
	n, props, wprops := p.bodyLen()
	dst = appendHeader(dst, byte(CONNECT)<<4, n)
	dst = appendBinary(dst, p.name())
	dst = append(dst, byte(p.Version))
	var flags byte
	if p.CleanStart {
		flags |= 0x02
	}
	if p.WillFlag {
		flags |= 0x04 | p.WillQoS<<3
		if p.WillRetain {
			flags |= 0x20
		}
	}
	if p.PasswordFlag {
		flags |= 0x40
	}
	if p.UsernameFlag {
		flags |= 0x80
	}
	dst = appendU16(append(dst, flags), p.KeepAlive)
	if p.Version == V5 {
		dst = p.Props.appendProps(dst, connectProps, props)
	}
	dst = appendBinary(dst, p.ClientID)
	if p.WillFlag {
		if p.Version == V5 {
			dst = p.WillProps.appendProps(dst, willProps, wprops)
		}
		dst = appendBinary(appendBinary(dst, p.WillTopic), p.WillPayload)
	}
	if p.UsernameFlag {
		dst = appendBinary(dst, p.Username)
	}
	if p.PasswordFlag {
		dst = appendBinary(dst, p.Password)
	}
	return dst
}

// Connack is a CONNACK packet (spec §3.2). Code is a 5.0 reason code; for
// 3.1.1 it is mapped to and from the return codes 0–5.
type Connack struct {
	SessionPresent bool
	Code           ReasonCode
	Props          Properties
}

// Type returns CONNACK.
func (*Connack) Type() Type { return CONNACK }

// v311ConnackCode maps a 5.0 CONNACK reason code to a 3.1.1 return code.
func v311ConnackCode(c ReasonCode) byte {
	switch c {
	case CodeSuccess:
		return 0
	case CodeUnsupportedProtocolVersion:
		return 1
	case CodeClientIdentifierNotValid:
		return 2
	case CodeBadUserNameOrPassword:
		return 4
	case CodeNotAuthorized, CodeBanned, CodeBadAuthenticationMethod:
		return 5
	}
	return 3 // server unavailable
}

var v5ConnackCodes = [6]ReasonCode{CodeSuccess, CodeUnsupportedProtocolVersion,
	CodeClientIdentifierNotValid, CodeServerUnavailable, CodeBadUserNameOrPassword, CodeNotAuthorized}

// Decode decodes a CONNACK body.
func (p *Connack) Decode(h FixedHeader, body []byte, v Version) error {
	d := decoder{buf: body, pkt: "CONNACK"}
	flags := d.u8("acknowledge flags")
	if flags&0xfe != 0 {
		d.fail(CodeMalformedPacket, "reserved acknowledge flags set")
	}
	p.SessionPresent = flags&1 != 0
	code := d.u8("reason code")
	if v == V5 {
		p.Code = ReasonCode(code)
		if d.err == nil && !connackCodes.has(p.Code) {
			d.fail(CodeProtocolError, "invalid reason code")
		}
		d.props(&p.Props, connackProps, repeatUser)
	} else {
		p.Props.reset()
		if d.err == nil && int(code) >= len(v5ConnackCodes) {
			d.fail(CodeProtocolError, "invalid return code")
		} else {
			p.Code = v5ConnackCodes[code]
		}
	}
	if d.err == nil && p.SessionPresent && p.Code != CodeSuccess {
		d.fail(CodeProtocolError, "session present with a failure code")
	}
	d.end()
	return d.result()
}

func (p *Connack) bodyLen(v Version) (n, props int) {
	if v != V5 {
		return 2, 0
	}
	props = p.Props.propsLen(connackProps)
	return 2 + varintLen(props) + props, props
}

// Size returns the encoded length of p for version v.
func (p *Connack) Size(v Version) int {
	n, _ := p.bodyLen(v)
	return headerLen(n) + n
}

// Append appends p's wire form for version v to dst.
func (p *Connack) Append(dst []byte, v Version) []byte {
	n, props := p.bodyLen(v)
	dst = appendHeader(dst, byte(CONNACK)<<4, n)
	var flags byte
	if p.SessionPresent {
		flags = 1
	}
	if v != V5 {
		return append(dst, flags, v311ConnackCode(p.Code))
	}
	dst = append(dst, flags, byte(p.Code))
	return p.Props.appendProps(dst, connackProps, props)
}
