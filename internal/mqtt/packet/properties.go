package packet

// PropID is an MQTT 5.0 property identifier (spec §2.2.2.2).
type PropID byte

// The property identifiers.
const (
	PropPayloadFormat        PropID = 0x01
	PropMessageExpiry        PropID = 0x02
	PropContentType          PropID = 0x03
	PropResponseTopic        PropID = 0x08
	PropCorrelationData      PropID = 0x09
	PropSubscriptionID       PropID = 0x0B
	PropSessionExpiry        PropID = 0x11
	PropAssignedClientID     PropID = 0x12
	PropServerKeepAlive      PropID = 0x13
	PropAuthMethod           PropID = 0x15
	PropAuthData             PropID = 0x16
	PropRequestProblemInfo   PropID = 0x17
	PropWillDelay            PropID = 0x18
	PropRequestResponseInfo  PropID = 0x19
	PropResponseInfo         PropID = 0x1A
	PropServerReference      PropID = 0x1C
	PropReasonString         PropID = 0x1F
	PropReceiveMax           PropID = 0x21
	PropTopicAliasMax        PropID = 0x22
	PropTopicAlias           PropID = 0x23
	PropMaxQoS               PropID = 0x24
	PropRetainAvailable      PropID = 0x25
	PropUser                 PropID = 0x26
	PropMaxPacketSize        PropID = 0x27
	PropWildcardSubAvailable PropID = 0x28
	PropSubIDAvailable       PropID = 0x29
	PropSharedSubAvailable   PropID = 0x2A
)

// UserProperty is a User Property name/value pair (UTF-8 strings).
type UserProperty struct {
	Key, Value []byte
}

// Properties holds the properties of an MQTT 5.0 packet, or of a will.
// Has records which are present, one bit per property identifier: a
// decoder sets it, an encoder writes exactly the present properties that the
// packet type allows (User and SubscriptionIDs are present when non-empty).
// Byte-slice values alias the decoded packet body.
type Properties struct {
	Has uint64

	PayloadFormat        byte
	MessageExpiry        uint32
	ContentType          []byte
	ResponseTopic        []byte
	CorrelationData      []byte
	SubscriptionIDs      []uint32 // several only in PUBLISH sent by a server
	SessionExpiry        uint32
	AssignedClientID     []byte
	ServerKeepAlive      uint16
	AuthMethod           []byte
	AuthData             []byte
	RequestProblemInfo   byte
	WillDelay            uint32
	RequestResponseInfo  byte
	ResponseInfo         []byte
	ServerReference      []byte
	ReasonString         []byte
	ReceiveMax           uint16
	TopicAliasMax        uint16
	TopicAlias           uint16
	MaxQoS               byte
	RetainAvailable      byte
	User                 []UserProperty
	MaxPacketSize        uint32
	WildcardSubAvailable byte
	SubIDAvailable       byte
	SharedSubAvailable   byte
}

// Present reports whether property id is present.
func (p *Properties) Present(id PropID) bool { return p.Has&(1<<id) != 0 }

// Set marks property id as present (its value is set by the caller).
func (p *Properties) Set(id PropID) { p.Has |= 1 << id }

// Clear marks property id as absent.
func (p *Properties) Clear(id PropID) { p.Has &^= 1 << id }

// reset empties p, keeping the capacity of its slices for reuse.
func (p *Properties) reset() {
	user, subs := p.User[:0], p.SubscriptionIDs[:0]
	*p = Properties{User: user, SubscriptionIDs: subs}
}

func mask(ids ...PropID) uint64 {
	var m uint64
	for _, id := range ids {
		m |= 1 << id
	}
	return m
}

// The properties each packet type may carry (spec §2.2.2.2).
var (
	connectProps = mask(PropSessionExpiry, PropAuthMethod, PropAuthData, PropRequestProblemInfo,
		PropRequestResponseInfo, PropReceiveMax, PropTopicAliasMax, PropUser, PropMaxPacketSize)
	willProps = mask(PropPayloadFormat, PropMessageExpiry, PropContentType, PropResponseTopic,
		PropCorrelationData, PropWillDelay, PropUser)
	connackProps = mask(PropSessionExpiry, PropAssignedClientID, PropServerKeepAlive, PropAuthMethod,
		PropAuthData, PropResponseInfo, PropServerReference, PropReasonString, PropReceiveMax,
		PropTopicAliasMax, PropMaxQoS, PropRetainAvailable, PropUser, PropMaxPacketSize,
		PropWildcardSubAvailable, PropSubIDAvailable, PropSharedSubAvailable)
	publishProps = mask(PropPayloadFormat, PropMessageExpiry, PropContentType, PropResponseTopic,
		PropCorrelationData, PropSubscriptionID, PropTopicAlias, PropUser)
	ackProps         = mask(PropReasonString, PropUser) // PUBACK … PUBCOMP, SUBACK, UNSUBACK
	subscribeProps   = mask(PropSubscriptionID, PropUser)
	unsubscribeProps = mask(PropUser)
	disconnectProps  = mask(PropSessionExpiry, PropServerReference, PropReasonString, PropUser)
	authProps        = mask(PropAuthMethod, PropAuthData, PropReasonString, PropUser)
)

// repeatable properties may appear more than once: User Property always,
// Subscription Identifier only in PUBLISH.
const repeatUser = uint64(1) << PropUser

// decodeProps reads a property length and the properties that follow into
// p, accepting only the identifiers in allowed and repeats only of those in
// repeat.
func (d *decoder) props(p *Properties, allowed, repeat uint64) {
	p.reset()
	n := int(d.varint("property length"))
	if d.err != nil {
		return
	}
	if d.left() < n {
		d.fail(CodeMalformedPacket, "property length exceeds the packet")
		return
	}
	end := d.off + n
	outer := d.buf
	d.buf = d.buf[:end] // bound the property reads
	for d.err == nil && d.off < end {
		idv := d.varint("property identifier")
		if d.err != nil {
			break
		}
		if idv >= 64 || allowed&(1<<idv) == 0 {
			d.fail(CodeMalformedPacket, "property 0x"+hex2(idv)+" not allowed here")
			break
		}
		id := PropID(idv)
		if p.Has&(1<<id) != 0 && repeat&(1<<id) == 0 {
			d.fail(CodeProtocolError, "property 0x"+hex2(idv)+" appears more than once")
			break
		}
		p.Has |= 1 << id
		d.prop(p, id)
	}
	d.buf = outer
}

func (d *decoder) prop(p *Properties, id PropID) {
	switch id {
	case PropPayloadFormat:
		p.PayloadFormat = d.flag("payload format indicator")
	case PropMessageExpiry:
		p.MessageExpiry = d.u32("message expiry interval")
	case PropContentType:
		p.ContentType = d.str("content type")
	case PropResponseTopic:
		p.ResponseTopic = d.str("response topic")
		if d.err == nil && !validTopicName(p.ResponseTopic) {
			d.fail(CodeProtocolError, "response topic is not a valid topic name")
		}
	case PropCorrelationData:
		p.CorrelationData = d.binary("correlation data")
	case PropSubscriptionID:
		v := d.varint("subscription identifier")
		if d.err == nil && v == 0 {
			d.fail(CodeProtocolError, "subscription identifier 0")
		}
		p.SubscriptionIDs = append(p.SubscriptionIDs, v)
	case PropSessionExpiry:
		p.SessionExpiry = d.u32("session expiry interval")
	case PropAssignedClientID:
		p.AssignedClientID = d.str("assigned client identifier")
	case PropServerKeepAlive:
		p.ServerKeepAlive = d.u16("server keep alive")
	case PropAuthMethod:
		p.AuthMethod = d.str("authentication method")
	case PropAuthData:
		p.AuthData = d.binary("authentication data")
	case PropRequestProblemInfo:
		p.RequestProblemInfo = d.flag("request problem information")
	case PropWillDelay:
		p.WillDelay = d.u32("will delay interval")
	case PropRequestResponseInfo:
		p.RequestResponseInfo = d.flag("request response information")
	case PropResponseInfo:
		p.ResponseInfo = d.str("response information")
	case PropServerReference:
		p.ServerReference = d.str("server reference")
	case PropReasonString:
		p.ReasonString = d.str("reason string")
	case PropReceiveMax:
		p.ReceiveMax = d.u16("receive maximum")
		if d.err == nil && p.ReceiveMax == 0 {
			d.fail(CodeProtocolError, "receive maximum 0")
		}
	case PropTopicAliasMax:
		p.TopicAliasMax = d.u16("topic alias maximum")
	case PropTopicAlias:
		p.TopicAlias = d.u16("topic alias")
		if d.err == nil && p.TopicAlias == 0 {
			d.fail(CodeTopicAliasInvalid, "topic alias 0")
		}
	case PropMaxQoS:
		p.MaxQoS = d.flag("maximum QoS")
	case PropRetainAvailable:
		p.RetainAvailable = d.flag("retain available")
	case PropUser:
		k := d.str("user property name")
		v := d.str("user property value")
		p.User = append(p.User, UserProperty{Key: k, Value: v})
	case PropMaxPacketSize:
		p.MaxPacketSize = d.u32("maximum packet size")
		if d.err == nil && p.MaxPacketSize == 0 {
			d.fail(CodeProtocolError, "maximum packet size 0")
		}
	case PropWildcardSubAvailable:
		p.WildcardSubAvailable = d.flag("wildcard subscription available")
	case PropSubIDAvailable:
		p.SubIDAvailable = d.flag("subscription identifier available")
	case PropSharedSubAvailable:
		p.SharedSubAvailable = d.flag("shared subscription available")
	}
}

// flag reads a byte property whose only valid values are 0 and 1.
func (d *decoder) flag(what string) byte {
	b := d.u8(what)
	if d.err == nil && b > 1 {
		d.fail(CodeProtocolError, what+" must be 0 or 1")
	}
	return b
}

func hex2(v uint32) string {
	const digits = "0123456789abcdef"
	if v > 0xff {
		return "ff+"
	}
	return string([]byte{digits[v>>4], digits[v&15]})
}

// propsLen returns the encoded length of the properties in allowed, without
// the property length prefix.
func (p *Properties) propsLen(allowed uint64) int {
	h := p.Has & allowed
	n := 0
	if h&(1<<PropPayloadFormat) != 0 {
		n += 2
	}
	if h&(1<<PropMessageExpiry) != 0 {
		n += 5
	}
	n += strLen(h, PropContentType, p.ContentType)
	n += strLen(h, PropResponseTopic, p.ResponseTopic)
	n += strLen(h, PropCorrelationData, p.CorrelationData)
	if allowed&(1<<PropSubscriptionID) != 0 {
		for _, v := range p.SubscriptionIDs {
			n += 1 + varintLen(int(v))
		}
	}
	if h&(1<<PropSessionExpiry) != 0 {
		n += 5
	}
	n += strLen(h, PropAssignedClientID, p.AssignedClientID)
	if h&(1<<PropServerKeepAlive) != 0 {
		n += 3
	}
	n += strLen(h, PropAuthMethod, p.AuthMethod)
	n += strLen(h, PropAuthData, p.AuthData)
	if h&(1<<PropRequestProblemInfo) != 0 {
		n += 2
	}
	if h&(1<<PropWillDelay) != 0 {
		n += 5
	}
	if h&(1<<PropRequestResponseInfo) != 0 {
		n += 2
	}
	n += strLen(h, PropResponseInfo, p.ResponseInfo)
	n += strLen(h, PropServerReference, p.ServerReference)
	n += strLen(h, PropReasonString, p.ReasonString)
	for _, id := range [...]PropID{PropReceiveMax, PropTopicAliasMax, PropTopicAlias} {
		if h&(1<<id) != 0 {
			n += 3
		}
	}
	for _, id := range [...]PropID{PropMaxQoS, PropRetainAvailable} {
		if h&(1<<id) != 0 {
			n += 2
		}
	}
	if allowed&(1<<PropUser) != 0 {
		for _, u := range p.User {
			n += 5 + len(u.Key) + len(u.Value)
		}
	}
	if h&(1<<PropMaxPacketSize) != 0 {
		n += 5
	}
	for _, id := range [...]PropID{PropWildcardSubAvailable, PropSubIDAvailable, PropSharedSubAvailable} {
		if h&(1<<id) != 0 {
			n += 2
		}
	}
	return n
}

func strLen(h uint64, id PropID, b []byte) int {
	if h&(1<<id) == 0 {
		return 0
	}
	return 3 + len(b)
}

// appendProps appends the property length and the properties in allowed,
// in ascending identifier order. n is p.propsLen(allowed).
func (p *Properties) appendProps(dst []byte, allowed uint64, n int) []byte {
	dst = appendVarint(dst, n)
	h := p.Has & allowed
	if h&(1<<PropPayloadFormat) != 0 {
		dst = append(dst, byte(PropPayloadFormat), p.PayloadFormat)
	}
	if h&(1<<PropMessageExpiry) != 0 {
		dst = appendU32(append(dst, byte(PropMessageExpiry)), p.MessageExpiry)
	}
	dst = appendStrProp(dst, h, PropContentType, p.ContentType)
	dst = appendStrProp(dst, h, PropResponseTopic, p.ResponseTopic)
	dst = appendStrProp(dst, h, PropCorrelationData, p.CorrelationData)
	if allowed&(1<<PropSubscriptionID) != 0 {
		for _, v := range p.SubscriptionIDs {
			dst = appendVarint(append(dst, byte(PropSubscriptionID)), int(v))
		}
	}
	if h&(1<<PropSessionExpiry) != 0 {
		dst = appendU32(append(dst, byte(PropSessionExpiry)), p.SessionExpiry)
	}
	dst = appendStrProp(dst, h, PropAssignedClientID, p.AssignedClientID)
	if h&(1<<PropServerKeepAlive) != 0 {
		dst = appendU16(append(dst, byte(PropServerKeepAlive)), p.ServerKeepAlive)
	}
	dst = appendStrProp(dst, h, PropAuthMethod, p.AuthMethod)
	dst = appendStrProp(dst, h, PropAuthData, p.AuthData)
	if h&(1<<PropRequestProblemInfo) != 0 {
		dst = append(dst, byte(PropRequestProblemInfo), p.RequestProblemInfo)
	}
	if h&(1<<PropWillDelay) != 0 {
		dst = appendU32(append(dst, byte(PropWillDelay)), p.WillDelay)
	}
	if h&(1<<PropRequestResponseInfo) != 0 {
		dst = append(dst, byte(PropRequestResponseInfo), p.RequestResponseInfo)
	}
	dst = appendStrProp(dst, h, PropResponseInfo, p.ResponseInfo)
	dst = appendStrProp(dst, h, PropServerReference, p.ServerReference)
	dst = appendStrProp(dst, h, PropReasonString, p.ReasonString)
	if h&(1<<PropReceiveMax) != 0 {
		dst = appendU16(append(dst, byte(PropReceiveMax)), p.ReceiveMax)
	}
	if h&(1<<PropTopicAliasMax) != 0 {
		dst = appendU16(append(dst, byte(PropTopicAliasMax)), p.TopicAliasMax)
	}
	if h&(1<<PropTopicAlias) != 0 {
		dst = appendU16(append(dst, byte(PropTopicAlias)), p.TopicAlias)
	}
	if h&(1<<PropMaxQoS) != 0 {
		dst = append(dst, byte(PropMaxQoS), p.MaxQoS)
	}
	if h&(1<<PropRetainAvailable) != 0 {
		dst = append(dst, byte(PropRetainAvailable), p.RetainAvailable)
	}
	if allowed&(1<<PropUser) != 0 {
		for _, u := range p.User {
			dst = appendBinary(appendBinary(append(dst, byte(PropUser)), u.Key), u.Value)
		}
	}
	if h&(1<<PropMaxPacketSize) != 0 {
		dst = appendU32(append(dst, byte(PropMaxPacketSize)), p.MaxPacketSize)
	}
	if h&(1<<PropWildcardSubAvailable) != 0 {
		dst = append(dst, byte(PropWildcardSubAvailable), p.WildcardSubAvailable)
	}
	if h&(1<<PropSubIDAvailable) != 0 {
		dst = append(dst, byte(PropSubIDAvailable), p.SubIDAvailable)
	}
	if h&(1<<PropSharedSubAvailable) != 0 {
		dst = append(dst, byte(PropSharedSubAvailable), p.SharedSubAvailable)
	}
	return dst
}

func appendStrProp(dst []byte, h uint64, id PropID, b []byte) []byte {
	if h&(1<<id) == 0 {
		return dst
	}
	return appendBinary(append(dst, byte(id)), b)
}
