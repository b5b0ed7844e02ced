package packet

// Pingreq is a PINGREQ packet (spec §3.12).
type Pingreq struct{}

// Type returns PINGREQ.
func (*Pingreq) Type() Type { return PINGREQ }

// Decode checks that a PINGREQ body is empty.
func (*Pingreq) Decode(h FixedHeader, body []byte, _ Version) error {
	return emptyBody("PINGREQ", body)
}

// Size returns 2.
func (*Pingreq) Size(Version) int { return 2 }

// Append appends a PINGREQ to dst.
func (*Pingreq) Append(dst []byte, _ Version) []byte { return append(dst, byte(PINGREQ)<<4, 0) }

// Pingresp is a PINGRESP packet (spec §3.13).
type Pingresp struct{}

// Type returns PINGRESP.
func (*Pingresp) Type() Type { return PINGRESP }

// Decode checks that a PINGRESP body is empty.
func (*Pingresp) Decode(h FixedHeader, body []byte, _ Version) error {
	return emptyBody("PINGRESP", body)
}

// Size returns 2.
func (*Pingresp) Size(Version) int { return 2 }

// Append appends a PINGRESP to dst.
func (*Pingresp) Append(dst []byte, _ Version) []byte { return append(dst, byte(PINGRESP)<<4, 0) }

func emptyBody(name string, body []byte) error {
	if len(body) != 0 {
		return errorf(CodeMalformedPacket, name+": remaining length must be 0")
	}
	return nil
}

// Disconnect is a DISCONNECT packet (spec §3.14). In 3.1.1 it has no body;
// in 5.0 a reason code and properties, both optional on the wire.
type Disconnect struct {
	Code  ReasonCode
	Props Properties
}

// Type returns DISCONNECT.
func (*Disconnect) Type() Type { return DISCONNECT }

// Decode decodes a DISCONNECT body.
func (p *Disconnect) Decode(h FixedHeader, body []byte, v Version) error {
	return decodeCodeProps(body, v, "DISCONNECT", &p.Code, &p.Props, &disconnectCodes, disconnectProps)
}

// Size returns the encoded length of p for version v.
func (p *Disconnect) Size(v Version) int { return codePropsSize(v, p.Code, &p.Props, disconnectProps) }

// Append appends p's wire form for version v to dst.
func (p *Disconnect) Append(dst []byte, v Version) []byte {
	return appendCodeProps(dst, v, byte(DISCONNECT)<<4, p.Code, &p.Props, disconnectProps)
}

// Auth is an AUTH packet (spec §3.15), 5.0 only.
type Auth struct {
	Code  ReasonCode // Success, Continue authentication or Re-authenticate
	Props Properties
}

// Type returns AUTH.
func (*Auth) Type() Type { return AUTH }

// Decode decodes an AUTH body; AUTH before 5.0 is a malformed packet.
func (p *Auth) Decode(h FixedHeader, body []byte, v Version) error {
	if v != V5 {
		return errorf(CodeMalformedPacket, "AUTH: reserved packet type before MQTT 5.0")
	}
	if err := decodeCodeProps(body, v, "AUTH", &p.Code, &p.Props, &authCodes, authProps); err != nil {
		return err
	}
	// §3.15.2: only the empty form (no reason code, no properties) may omit
	// the Authentication Method.
	if len(body) > 0 && !p.Props.Present(PropAuthMethod) {
		return errorf(CodeProtocolError, "AUTH: no authentication method")
	}
	return nil
}

// Size returns the encoded length of p (version 5).
func (p *Auth) Size(v Version) int { return codePropsSize(v, p.Code, &p.Props, authProps) }

// Append appends p's wire form to dst (version 5).
func (p *Auth) Append(dst []byte, v Version) []byte {
	return appendCodeProps(dst, v, byte(AUTH)<<4, p.Code, &p.Props, authProps)
}

// decodeCodeProps decodes the DISCONNECT and AUTH bodies: an optional
// reason code (Success when absent) and optional properties.
func decodeCodeProps(body []byte, v Version, name string, code *ReasonCode, props *Properties,
	valid *codeSet, allowed uint64) error {
	*code = CodeSuccess
	props.reset()
	if v != V5 {
		return emptyBody(name, body)
	}
	d := decoder{buf: body, pkt: name}
	if d.left() > 0 {
		*code = ReasonCode(d.u8("reason code"))
		if !valid.has(*code) {
			d.fail(CodeProtocolError, "invalid reason code")
		}
	}
	if d.left() > 0 {
		d.props(props, allowed, repeatUser)
	}
	d.end()
	return d.result()
}

func codePropsLen(v Version, code ReasonCode, props *Properties, allowed uint64) (n, plen int) {
	if v != V5 {
		return 0, 0
	}
	plen = props.propsLen(allowed)
	switch {
	case plen > 0:
		return 1 + varintLen(plen) + plen, plen
	case code != CodeSuccess:
		return 1, 0
	}
	return 0, 0
}

func codePropsSize(v Version, code ReasonCode, props *Properties, allowed uint64) int {
	n, _ := codePropsLen(v, code, props, allowed)
	return headerLen(n) + n
}

func appendCodeProps(dst []byte, v Version, first byte, code ReasonCode, props *Properties, allowed uint64) []byte {
	n, plen := codePropsLen(v, code, props, allowed)
	dst = appendHeader(dst, first, n)
	if n > 0 {
		dst = append(dst, byte(code))
	}
	if n > 1 {
		dst = props.appendProps(dst, allowed, plen)
	}
	return dst
}
