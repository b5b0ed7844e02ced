package packet

import (
	"bytes"
	"encoding/binary"
)

// tcase is one raw-byte packet case. A valid case has want: decoding raw
// yields want, and encoding want yields raw (or canon, when raw is valid but
// not the shortest form). An invalid case has code: decoding raw fails with
// an *Error carrying that reason code. The same table drives the decode and
// encode tests, the round trips, the Reader tests, the Paho differential
// test and the seed corpus of the fuzz targets.
type tcase struct {
	name  string
	v     Version
	raw   []byte     // a whole packet, fixed header included (for a fault of the fixed header, maybe only the header)
	want  Packet     // valid case: the decoded packet
	code  ReasonCode // invalid case: the reason code the decoder must report
	canon []byte     // valid case whose raw is not the form Append writes: what it writes
	max   uint32     // maximum packet size for ParseHeader and Reader; 0 for none
}

func (c *tcase) valid() bool { return c.want != nil }

// id names a case uniquely: version and name.
func (c *tcase) id() string { return c.v.String() + "/" + c.name }

// encoded is what Append must write for a valid case.
func (c *tcase) encoded() []byte {
	if c.canon != nil {
		return c.canon
	}
	return c.raw
}

// Builders of wire bytes. They are written independently of the codec's
// encoders so the table checks the encoders rather than repeating them.

func wb(b ...byte) []byte { return b }

func wcat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func wu16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

func wu32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

// wstr is a two-byte length followed by s (UTF-8 string or binary data).
func wstr(s string) []byte { return append(wu16(uint16(len(s))), s...) }

// wvbi is a variable byte integer in its shortest form.
func wvbi(v int) []byte {
	var out []byte
	for {
		d := byte(v % 128)
		v /= 128
		if v > 0 {
			d |= 0x80
		}
		out = append(out, d)
		if v == 0 {
			return out
		}
	}
}

// wprops is a property length followed by the properties.
func wprops(props ...[]byte) []byte {
	body := wcat(props...)
	return append(wvbi(len(body)), body...)
}

// wpkt is a whole packet: first byte, remaining length, body.
func wpkt(first byte, body ...[]byte) []byte {
	b := wcat(body...)
	return wcat(wb(first), wvbi(len(b)), b)
}

func pByte(id PropID, v byte) []byte     { return wb(byte(id), v) }
func pU16(id PropID, v uint16) []byte    { return append(wb(byte(id)), wu16(v)...) }
func pU32(id PropID, v uint32) []byte    { return append(wb(byte(id)), wu32(v)...) }
func pStr(id PropID, s string) []byte    { return append(wb(byte(id)), wstr(s)...) }
func pVBI(id PropID, v int) []byte       { return append(wb(byte(id)), wvbi(v)...) }
func pUser(k, v string) []byte           { return wcat(wb(byte(PropUser)), wstr(k), wstr(v)) }
func up(k, v string) UserProperty        { return UserProperty{Key: []byte(k), Value: []byte(v)} }
func users(kv ...string) []UserProperty  { return pairs(kv) }
func bs(s string) []byte                 { return []byte(s) }
func filters(f ...string) [][]byte       { return strs(f) }
func codes(c ...ReasonCode) []ReasonCode { return c }

func pairs(kv []string) []UserProperty {
	out := make([]UserProperty, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, up(kv[i], kv[i+1]))
	}
	return out
}

func strs(s []string) [][]byte {
	out := make([][]byte, len(s))
	for i := range s {
		out[i] = []byte(s[i])
	}
	return out
}

// Frequently used bodies.
var (
	payload200   = bytes.Repeat([]byte{0xA5}, 200)    // two-byte remaining length
	payload20000 = bytes.Repeat([]byte("0123"), 5000) // three-byte remaining length
)

// cases is the table. Valid cases come first, per version, then the
// malformed and invalid ones.
var cases = buildCases()

func buildCases() []tcase {
	var cs []tcase
	cs = append(cs, validV311()...)
	cs = append(cs, validV5()...)
	cs = append(cs, invalidCases()...)
	cs = append(cs, headerCases()...)
	return cs
}

func validV311() []tcase {
	const v = V311
	return []tcase{
		// CONNECT
		{name: "CONNECT minimal", v: v,
			raw: wpkt(0x10, wstr("MQTT"), wb(4, 0x02), wu16(60), wstr("c1")),
			want: &Connect{ProtocolName: bs("MQTT"), Version: V311, CleanStart: true, KeepAlive: 60,
				ClientID: bs("c1")}},
		{name: "CONNECT will QoS 1 retain, user name, password", v: v,
			raw: wpkt(0x10, wstr("MQTT"), wb(4, 0xEE), wu16(30), wstr("client-1"),
				wstr("will/topic"), wstr("bye"), wstr("user"), wstr("pass\x00word")),
			want: &Connect{ProtocolName: bs("MQTT"), Version: V311, CleanStart: true, KeepAlive: 30,
				ClientID: bs("client-1"), WillFlag: true, WillQoS: 1, WillRetain: true,
				WillTopic: bs("will/topic"), WillPayload: bs("bye"),
				UsernameFlag: true, Username: bs("user"), PasswordFlag: true, Password: bs("pass\x00word")}},
		{name: "CONNECT will QoS 2 empty will payload, user name only, empty client id", v: v,
			raw: wpkt(0x10, wstr("MQTT"), wb(4, 0x96), wu16(0), wstr(""), wstr("w"), wstr(""), wstr("u")),
			want: &Connect{ProtocolName: bs("MQTT"), Version: V311, CleanStart: true,
				ClientID: bs(""), WillFlag: true, WillQoS: 2, WillTopic: bs("w"), WillPayload: bs(""),
				UsernameFlag: true, Username: bs("u")}},
		{name: "CONNECT persistent session, keep alive 65535", v: v,
			raw:  wpkt(0x10, wstr("MQTT"), wb(4, 0x00), wu16(0xFFFF), wstr("keeper")),
			want: &Connect{ProtocolName: bs("MQTT"), Version: V311, KeepAlive: 0xFFFF, ClientID: bs("keeper")}},
		{name: "CONNECT MQIsdp level 3 (3.1)", v: V31,
			raw:  wpkt(0x10, wstr("MQIsdp"), wb(3, 0x02), wu16(10), wstr("old")),
			want: &Connect{ProtocolName: bs("MQIsdp"), Version: V31, CleanStart: true, KeepAlive: 10, ClientID: bs("old")}},

		// CONNACK and the 3.1.1 return codes, mapped to 5.0 reason codes
		{name: "CONNACK accepted, session present", v: v, raw: wb(0x20, 2, 1, 0),
			want: &Connack{SessionPresent: true, Code: CodeSuccess}},
		{name: "CONNACK accepted", v: v, raw: wb(0x20, 2, 0, 0), want: &Connack{}},
		{name: "CONNACK 1 unacceptable protocol version", v: v, raw: wb(0x20, 2, 0, 1),
			want: &Connack{Code: CodeUnsupportedProtocolVersion}},
		{name: "CONNACK 2 identifier rejected", v: v, raw: wb(0x20, 2, 0, 2),
			want: &Connack{Code: CodeClientIdentifierNotValid}},
		{name: "CONNACK 3 server unavailable", v: v, raw: wb(0x20, 2, 0, 3),
			want: &Connack{Code: CodeServerUnavailable}},
		{name: "CONNACK 4 bad user name or password", v: v, raw: wb(0x20, 2, 0, 4),
			want: &Connack{Code: CodeBadUserNameOrPassword}},
		{name: "CONNACK 5 not authorized", v: v, raw: wb(0x20, 2, 0, 5),
			want: &Connack{Code: CodeNotAuthorized}},

		// PUBLISH
		{name: "PUBLISH QoS 0", v: v, raw: wpkt(0x30, wstr("a/b"), bs("hello")),
			want: &Publish{Topic: bs("a/b"), Payload: bs("hello")}},
		{name: "PUBLISH QoS 1 retain", v: v, raw: wpkt(0x33, wstr("a/b/c"), wu16(10), bs("payload")),
			want: &Publish{QoS: 1, Retain: true, Topic: bs("a/b/c"), PacketID: 10, Payload: bs("payload")}},
		{name: "PUBLISH QoS 2 dup", v: v, raw: wpkt(0x3C, wstr("x"), wu16(0xFFFF), bs("p")),
			want: &Publish{Dup: true, QoS: 2, Topic: bs("x"), PacketID: 0xFFFF, Payload: bs("p")}},
		{name: "PUBLISH QoS 0 empty payload", v: v, raw: wpkt(0x30, wstr("t")),
			want: &Publish{Topic: bs("t")}},
		{name: "PUBLISH QoS 1 dup retain empty payload", v: v, raw: wpkt(0x3B, wstr("t"), wu16(1)),
			want: &Publish{Dup: true, QoS: 1, Retain: true, Topic: bs("t"), PacketID: 1}},
		{name: "PUBLISH multi-byte UTF-8 topic", v: v,
			raw:  wpkt(0x30, wstr("température/€/😀"), bs("x")),
			want: &Publish{Topic: bs("température/€/😀"), Payload: bs("x")}},
		{name: "PUBLISH two-byte remaining length", v: v, raw: wpkt(0x30, wstr("big"), payload200),
			want: &Publish{Topic: bs("big"), Payload: payload200}},
		{name: "PUBLISH three-byte remaining length", v: v, raw: wpkt(0x32, wstr("bigger"), wu16(2), payload20000),
			want: &Publish{QoS: 1, Topic: bs("bigger"), PacketID: 2, Payload: payload20000}},

		// PUBACK, PUBREC, PUBREL, PUBCOMP
		{name: "PUBACK", v: v, raw: wb(0x40, 2, 0, 1), want: &Ack{Kind: PUBACK, PacketID: 1}},
		{name: "PUBREC", v: v, raw: wb(0x50, 2, 0x12, 0x34), want: &Ack{Kind: PUBREC, PacketID: 0x1234}},
		{name: "PUBREL", v: v, raw: wb(0x62, 2, 0xFF, 0xFF), want: &Ack{Kind: PUBREL, PacketID: 0xFFFF}},
		{name: "PUBCOMP", v: v, raw: wb(0x70, 2, 0, 7), want: &Ack{Kind: PUBCOMP, PacketID: 7}},

		// SUBSCRIBE, SUBACK, UNSUBSCRIBE, UNSUBACK
		{name: "SUBSCRIBE three filters", v: v,
			raw: wpkt(0x82, wu16(1), wstr("a/+"), wb(0), wstr("b/#"), wb(1), wstr("$SYS/x"), wb(2)),
			want: &Subscribe{PacketID: 1, Filters: []Subscription{
				{Filter: bs("a/+")}, {Filter: bs("b/#"), QoS: 1}, {Filter: bs("$SYS/x"), QoS: 2}}}},
		{name: "SUBSCRIBE one filter", v: v, raw: wpkt(0x82, wu16(0x0102), wstr("#"), wb(1)),
			want: &Subscribe{PacketID: 0x0102, Filters: []Subscription{{Filter: bs("#"), QoS: 1}}}},
		{name: "SUBACK every return code", v: v, raw: wb(0x90, 6, 0, 1, 0, 1, 2, 0x80),
			want: &Suback{PacketID: 1, Codes: codes(0, 1, 2, 0x80)}},
		{name: "UNSUBSCRIBE two filters", v: v, raw: wpkt(0xA2, wu16(2), wstr("a/+"), wstr("b/#")),
			want: &Unsubscribe{PacketID: 2, Filters: filters("a/+", "b/#")}},
		{name: "UNSUBACK has no payload", v: v, raw: wb(0xB0, 2, 0, 2), want: &Unsuback{PacketID: 2}},

		// PINGREQ, PINGRESP, DISCONNECT
		{name: "PINGREQ", v: v, raw: wb(0xC0, 0), want: &Pingreq{}},
		{name: "PINGRESP", v: v, raw: wb(0xD0, 0), want: &Pingresp{}},
		{name: "DISCONNECT", v: v, raw: wb(0xE0, 0), want: &Disconnect{}},
	}
}

func validV5() []tcase {
	const v = V5
	return []tcase{
		// CONNECT
		{name: "CONNECT minimal", v: v,
			raw: wpkt(0x10, wstr("MQTT"), wb(5, 0x02), wu16(60), wprops(), wstr("c5")),
			want: &Connect{ProtocolName: bs("MQTT"), Version: V5, CleanStart: true, KeepAlive: 60,
				ClientID: bs("c5")}},
		{name: "CONNECT every property", v: v,
			raw: wpkt(0x10, wstr("MQTT"), wb(5, 0x02), wu16(120), wprops(
				pU32(PropSessionExpiry, 0xFFFFFFFF),
				pStr(PropAuthMethod, "SCRAM-SHA-256"),
				pStr(PropAuthData, "\x00\x01client-first"),
				pByte(PropRequestProblemInfo, 0),
				pByte(PropRequestResponseInfo, 1),
				pU16(PropReceiveMax, 100),
				pU16(PropTopicAliasMax, 0),
				pUser("region", "eu"), pUser("region", "us"),
				pU32(PropMaxPacketSize, 1<<20),
			), wstr("props")),
			want: &Connect{ProtocolName: bs("MQTT"), Version: V5, CleanStart: true, KeepAlive: 120,
				ClientID: bs("props"), Props: Properties{
					Has: mask(PropSessionExpiry, PropAuthMethod, PropAuthData, PropRequestProblemInfo,
						PropRequestResponseInfo, PropReceiveMax, PropTopicAliasMax, PropUser, PropMaxPacketSize),
					SessionExpiry: 0xFFFFFFFF, AuthMethod: bs("SCRAM-SHA-256"), AuthData: bs("\x00\x01client-first"),
					RequestProblemInfo: 0, RequestResponseInfo: 1, ReceiveMax: 100, TopicAliasMax: 0,
					User: users("region", "eu", "region", "us"), MaxPacketSize: 1 << 20}}},
		{name: "CONNECT will with every will property, user name, password", v: v,
			raw: wpkt(0x10, wstr("MQTT"), wb(5, 0xF4), wu16(10), wprops(), wstr("w5"),
				wprops(
					pByte(PropPayloadFormat, 1),
					pU32(PropMessageExpiry, 3600),
					pStr(PropContentType, "text/plain"),
					pStr(PropResponseTopic, "resp/1"),
					pStr(PropCorrelationData, "\x00\x01"),
					pU32(PropWillDelay, 30),
					pUser("why", "crash"),
				),
				wstr("last/will"), wstr("gone"), wstr("alice"), wstr("secret")),
			want: &Connect{ProtocolName: bs("MQTT"), Version: V5, KeepAlive: 10, ClientID: bs("w5"),
				WillFlag: true, WillQoS: 2, WillRetain: true,
				WillProps: Properties{
					Has: mask(PropPayloadFormat, PropMessageExpiry, PropContentType, PropResponseTopic,
						PropCorrelationData, PropWillDelay, PropUser),
					PayloadFormat: 1, MessageExpiry: 3600, ContentType: bs("text/plain"),
					ResponseTopic: bs("resp/1"), CorrelationData: bs("\x00\x01"), WillDelay: 30,
					User: users("why", "crash")},
				WillTopic: bs("last/will"), WillPayload: bs("gone"),
				UsernameFlag: true, Username: bs("alice"), PasswordFlag: true, Password: bs("secret")}},
		{name: "CONNECT will QoS 0 without will properties", v: v,
			raw: wpkt(0x10, wstr("MQTT"), wb(5, 0x06), wu16(5), wprops(), wstr("w"), wprops(),
				wstr("w/t"), wstr("")),
			want: &Connect{ProtocolName: bs("MQTT"), Version: V5, CleanStart: true, KeepAlive: 5,
				ClientID: bs("w"), WillFlag: true, WillTopic: bs("w/t"), WillPayload: bs("")}},
		{name: "CONNECT password without user name", v: v,
			raw: wpkt(0x10, wstr("MQTT"), wb(5, 0x42), wu16(60), wprops(), wstr("p"), wstr("token")),
			want: &Connect{ProtocolName: bs("MQTT"), Version: V5, CleanStart: true, KeepAlive: 60,
				ClientID: bs("p"), PasswordFlag: true, Password: bs("token")}},

		// CONNACK
		{name: "CONNACK success", v: v, raw: wb(0x20, 3, 0, 0, 0), want: &Connack{}},
		{name: "CONNACK every property", v: v,
			raw: wpkt(0x20, wb(1, 0), wprops(
				pU32(PropSessionExpiry, 7200),
				pStr(PropAssignedClientID, "auto-7f3a"),
				pU16(PropServerKeepAlive, 45),
				pStr(PropAuthMethod, "SCRAM-SHA-256"),
				pStr(PropAuthData, "server-final"),
				pStr(PropResponseInfo, "resp/auto-7f3a"),
				pStr(PropServerReference, "other:1883"),
				pStr(PropReasonString, "welcome"),
				pU16(PropReceiveMax, 65535),
				pU16(PropTopicAliasMax, 10),
				pByte(PropMaxQoS, 1),
				pByte(PropRetainAvailable, 0),
				pUser("node", "a"),
				pU32(PropMaxPacketSize, 268435460),
				pByte(PropWildcardSubAvailable, 1),
				pByte(PropSubIDAvailable, 0),
				pByte(PropSharedSubAvailable, 1),
			)),
			want: &Connack{SessionPresent: true, Code: CodeSuccess, Props: Properties{
				Has: mask(PropSessionExpiry, PropAssignedClientID, PropServerKeepAlive, PropAuthMethod,
					PropAuthData, PropResponseInfo, PropServerReference, PropReasonString, PropReceiveMax,
					PropTopicAliasMax, PropMaxQoS, PropRetainAvailable, PropUser, PropMaxPacketSize,
					PropWildcardSubAvailable, PropSubIDAvailable, PropSharedSubAvailable),
				SessionExpiry: 7200, AssignedClientID: bs("auto-7f3a"), ServerKeepAlive: 45,
				AuthMethod: bs("SCRAM-SHA-256"), AuthData: bs("server-final"), ResponseInfo: bs("resp/auto-7f3a"),
				ServerReference: bs("other:1883"), ReasonString: bs("welcome"), ReceiveMax: 65535,
				TopicAliasMax: 10, MaxQoS: 1, RetainAvailable: 0, User: users("node", "a"),
				MaxPacketSize: 268435460, WildcardSubAvailable: 1, SubIDAvailable: 0, SharedSubAvailable: 1}}},
		{name: "CONNACK bad user name or password with reason string", v: v,
			raw: wpkt(0x20, wb(0, 0x86), wprops(pStr(PropReasonString, "bad password"))),
			want: &Connack{Code: CodeBadUserNameOrPassword, Props: Properties{
				Has: mask(PropReasonString), ReasonString: bs("bad password")}}},
		{name: "CONNACK use another server", v: v,
			raw: wpkt(0x20, wb(0, 0x9C), wprops(pStr(PropServerReference, "b.example"))),
			want: &Connack{Code: CodeUseAnotherServer, Props: Properties{
				Has: mask(PropServerReference), ServerReference: bs("b.example")}}},

		// PUBLISH
		{name: "PUBLISH QoS 0 no properties", v: v, raw: wpkt(0x30, wstr("a/b"), wprops(), bs("hi")),
			want: &Publish{Topic: bs("a/b"), Payload: bs("hi")}},
		{name: "PUBLISH QoS 1 topic alias and user property", v: v,
			raw: wpkt(0x32, wstr("sensors/t1"), wu16(7),
				wprops(pU16(PropTopicAlias, 3), pUser("unit", "C")), bs("21.5")),
			want: &Publish{QoS: 1, Topic: bs("sensors/t1"), PacketID: 7, Payload: bs("21.5"), Props: Properties{
				Has: mask(PropTopicAlias, PropUser), TopicAlias: 3, User: users("unit", "C")}}},
		{name: "PUBLISH QoS 2 dup retain every property", v: v,
			raw: wpkt(0x3D, wstr("req/1"), wu16(0x8001), wprops(
				pByte(PropPayloadFormat, 1),
				pU32(PropMessageExpiry, 3600),
				pStr(PropContentType, "application/json"),
				pStr(PropResponseTopic, "reply/here"),
				pStr(PropCorrelationData, "\x01\x02\x03"),
				pVBI(PropSubscriptionID, 1),
				pVBI(PropSubscriptionID, 128),
				pVBI(PropSubscriptionID, 268435455),
				pU16(PropTopicAlias, 10),
				pUser("a", "1"), pUser("b", "2"), pUser("a", "3"),
			), bs(`{"t":1}`)),
			want: &Publish{Dup: true, QoS: 2, Retain: true, Topic: bs("req/1"), PacketID: 0x8001,
				Payload: bs(`{"t":1}`), Props: Properties{
					Has: mask(PropPayloadFormat, PropMessageExpiry, PropContentType, PropResponseTopic,
						PropCorrelationData, PropSubscriptionID, PropTopicAlias, PropUser),
					PayloadFormat: 1, MessageExpiry: 3600, ContentType: bs("application/json"),
					ResponseTopic: bs("reply/here"), CorrelationData: bs("\x01\x02\x03"),
					SubscriptionIDs: []uint32{1, 128, 268435455}, TopicAlias: 10,
					User: users("a", "1", "b", "2", "a", "3")}}},
		{name: "PUBLISH topic alias with empty topic", v: v,
			raw: wpkt(0x30, wstr(""), wprops(pU16(PropTopicAlias, 5)), bs("x")),
			want: &Publish{Topic: bs(""), Payload: bs("x"), Props: Properties{
				Has: mask(PropTopicAlias), TopicAlias: 5}}},
		{name: "PUBLISH QoS 1 empty payload", v: v, raw: wpkt(0x32, wstr("t"), wu16(1), wprops()),
			want: &Publish{QoS: 1, Topic: bs("t"), PacketID: 1}},
		{name: "PUBLISH payload format 0 and empty correlation data", v: v,
			raw: wpkt(0x31, wstr("t"), wprops(pByte(PropPayloadFormat, 0), pStr(PropCorrelationData, "")), bs("\xff\xfe")),
			want: &Publish{Retain: true, Topic: bs("t"), Payload: bs("\xff\xfe"), Props: Properties{
				Has: mask(PropPayloadFormat, PropCorrelationData), CorrelationData: bs("")}}},
		{name: "PUBLISH at the maximum packet size", v: v, max: 10,
			raw:  wpkt(0x30, wstr("ab"), wprops(), bs("xyz")),
			want: &Publish{Topic: bs("ab"), Payload: bs("xyz")}},
		{name: "PUBLISH three-byte remaining length", v: v,
			raw: wpkt(0x30, wstr("bigger"), wprops(pUser("k", "v")), payload20000),
			want: &Publish{Topic: bs("bigger"), Payload: payload20000,
				Props: Properties{Has: mask(PropUser), User: users("k", "v")}}},

		// PUBACK, PUBREC, PUBREL, PUBCOMP: 2 bytes, 3 bytes, with properties
		{name: "PUBACK short form", v: v, raw: wb(0x40, 2, 0, 1), want: &Ack{Kind: PUBACK, PacketID: 1}},
		{name: "PUBACK reason code only", v: v, raw: wb(0x40, 3, 0, 2, 0x10),
			want: &Ack{Kind: PUBACK, PacketID: 2, Code: CodeNoMatchingSubscribers}},
		{name: "PUBACK with properties", v: v,
			raw: wpkt(0x40, wu16(3), wb(0x97), wprops(pStr(PropReasonString, "quota"), pUser("k", "v"))),
			want: &Ack{Kind: PUBACK, PacketID: 3, Code: CodeQuotaExceeded, Props: Properties{
				Has: mask(PropReasonString, PropUser), ReasonString: bs("quota"), User: users("k", "v")}}},
		{name: "PUBACK success reason code (not shortest)", v: v, raw: wb(0x40, 3, 0, 4, 0),
			canon: wb(0x40, 2, 0, 4), want: &Ack{Kind: PUBACK, PacketID: 4}},
		{name: "PUBACK success empty properties (not shortest)", v: v, raw: wb(0x40, 4, 0, 5, 0, 0),
			canon: wb(0x40, 2, 0, 5), want: &Ack{Kind: PUBACK, PacketID: 5}},
		{name: "PUBREC short form", v: v, raw: wb(0x50, 2, 0, 1), want: &Ack{Kind: PUBREC, PacketID: 1}},
		{name: "PUBREC reason code only", v: v, raw: wb(0x50, 3, 0, 2, 0x80),
			want: &Ack{Kind: PUBREC, PacketID: 2, Code: CodeUnspecifiedError}},
		{name: "PUBREC with properties", v: v,
			raw: wpkt(0x50, wu16(3), wb(0x91), wprops(pStr(PropReasonString, "in use"))),
			want: &Ack{Kind: PUBREC, PacketID: 3, Code: CodePacketIdentifierInUse, Props: Properties{
				Has: mask(PropReasonString), ReasonString: bs("in use")}}},
		{name: "PUBREC reason code, empty properties (not shortest)", v: v, raw: wb(0x50, 4, 0, 6, 0x10, 0),
			canon: wb(0x50, 3, 0, 6, 0x10), want: &Ack{Kind: PUBREC, PacketID: 6, Code: CodeNoMatchingSubscribers}},
		{name: "PUBREL short form", v: v, raw: wb(0x62, 2, 0, 1), want: &Ack{Kind: PUBREL, PacketID: 1}},
		{name: "PUBREL reason code only", v: v, raw: wb(0x62, 3, 0, 2, 0x92),
			want: &Ack{Kind: PUBREL, PacketID: 2, Code: CodePacketIdentifierNotFound}},
		{name: "PUBREL with properties", v: v,
			raw:  wpkt(0x62, wu16(3), wb(0x00), wprops(pUser("trace", "abc"))),
			want: &Ack{Kind: PUBREL, PacketID: 3, Props: Properties{Has: mask(PropUser), User: users("trace", "abc")}}},
		{name: "PUBCOMP short form", v: v, raw: wb(0x70, 2, 0, 1), want: &Ack{Kind: PUBCOMP, PacketID: 1}},
		{name: "PUBCOMP reason code only", v: v, raw: wb(0x70, 3, 0, 2, 0x92),
			want: &Ack{Kind: PUBCOMP, PacketID: 2, Code: CodePacketIdentifierNotFound}},
		{name: "PUBCOMP with properties", v: v,
			raw: wpkt(0x70, wu16(3), wb(0x92), wprops(pStr(PropReasonString, "gone"), pUser("a", "b"), pUser("c", "d"))),
			want: &Ack{Kind: PUBCOMP, PacketID: 3, Code: CodePacketIdentifierNotFound, Props: Properties{
				Has: mask(PropReasonString, PropUser), ReasonString: bs("gone"), User: users("a", "b", "c", "d")}}},

		// SUBSCRIBE, SUBACK, UNSUBSCRIBE, UNSUBACK
		{name: "SUBSCRIBE every option", v: v,
			raw: wpkt(0x82, wu16(10), wprops(pVBI(PropSubscriptionID, 42), pUser("k", "v")),
				wstr("a/b"), wb(0x00),
				wstr("c/+"), wb(0x05),
				wstr("d/#"), wb(0x0A),
				wstr("e"), wb(0x11),
				wstr("$share/g/f"), wb(0x2A),
				wstr("all"), wb(0x2E)),
			want: &Subscribe{PacketID: 10, Props: Properties{
				Has: mask(PropSubscriptionID, PropUser), SubscriptionIDs: []uint32{42}, User: users("k", "v")},
				Filters: []Subscription{
					{Filter: bs("a/b")},
					{Filter: bs("c/+"), QoS: 1, NoLocal: true},
					{Filter: bs("d/#"), QoS: 2, RetainAsPublished: true},
					{Filter: bs("e"), QoS: 1, RetainHandling: 1},
					{Filter: bs("$share/g/f"), QoS: 2, RetainAsPublished: true, RetainHandling: 2},
					{Filter: bs("all"), QoS: 2, NoLocal: true, RetainAsPublished: true, RetainHandling: 2},
				}}},
		{name: "SUBSCRIBE one filter no properties", v: v, raw: wpkt(0x82, wu16(1), wprops(), wstr("x"), wb(1)),
			want: &Subscribe{PacketID: 1, Filters: []Subscription{{Filter: bs("x"), QoS: 1}}}},
		{name: "SUBACK every reason code with properties", v: v,
			raw: wpkt(0x90, wu16(9), wprops(pStr(PropReasonString, "partial"), pUser("k", "v")),
				wb(0x00, 0x01, 0x02, 0x80, 0x83, 0x87, 0x8F, 0x91, 0x97, 0x9E, 0xA1, 0xA2)),
			want: &Suback{PacketID: 9, Props: Properties{
				Has: mask(PropReasonString, PropUser), ReasonString: bs("partial"), User: users("k", "v")},
				Codes: codes(0x00, 0x01, 0x02, 0x80, 0x83, 0x87, 0x8F, 0x91, 0x97, 0x9E, 0xA1, 0xA2)}},
		{name: "SUBACK one code", v: v, raw: wb(0x90, 4, 0, 1, 0, 1),
			want: &Suback{PacketID: 1, Codes: codes(CodeGrantedQoS1)}},
		{name: "UNSUBSCRIBE two filters with user property", v: v,
			raw: wpkt(0xA2, wu16(4), wprops(pUser("k", "v")), wstr("a/+"), wstr("b")),
			want: &Unsubscribe{PacketID: 4, Props: Properties{Has: mask(PropUser), User: users("k", "v")},
				Filters: filters("a/+", "b")}},
		{name: "UNSUBSCRIBE no properties", v: v, raw: wpkt(0xA2, wu16(5), wprops(), wstr("#")),
			want: &Unsubscribe{PacketID: 5, Filters: filters("#")}},
		{name: "UNSUBACK every reason code with properties", v: v,
			raw: wpkt(0xB0, wu16(4), wprops(pStr(PropReasonString, "ok")), wb(0x00, 0x11, 0x80, 0x83, 0x87, 0x8F, 0x91)),
			want: &Unsuback{PacketID: 4, Props: Properties{Has: mask(PropReasonString), ReasonString: bs("ok")},
				Codes: codes(0x00, 0x11, 0x80, 0x83, 0x87, 0x8F, 0x91)}},
		{name: "UNSUBACK one code", v: v, raw: wb(0xB0, 4, 0, 5, 0, 0x11),
			want: &Unsuback{PacketID: 5, Codes: codes(CodeNoSubscriptionExisted)}},

		// PINGREQ, PINGRESP
		{name: "PINGREQ", v: v, raw: wb(0xC0, 0), want: &Pingreq{}},
		{name: "PINGRESP", v: v, raw: wb(0xD0, 0), want: &Pingresp{}},

		// DISCONNECT
		{name: "DISCONNECT no reason code", v: v, raw: wb(0xE0, 0), want: &Disconnect{}},
		{name: "DISCONNECT reason code only", v: v, raw: wb(0xE0, 1, 0x04),
			want: &Disconnect{Code: CodeDisconnectWithWill}},
		{name: "DISCONNECT every property", v: v,
			raw: wpkt(0xE0, wb(0x9C), wprops(
				pU32(PropSessionExpiry, 0),
				pStr(PropServerReference, "other.example:1883"),
				pStr(PropReasonString, "moving"),
				pUser("k", "v"))),
			want: &Disconnect{Code: CodeUseAnotherServer, Props: Properties{
				Has:           mask(PropSessionExpiry, PropServerReference, PropReasonString, PropUser),
				SessionExpiry: 0, ServerReference: bs("other.example:1883"), ReasonString: bs("moving"),
				User: users("k", "v")}}},
		{name: "DISCONNECT success empty properties (not shortest)", v: v, raw: wb(0xE0, 2, 0, 0),
			canon: wb(0xE0, 0), want: &Disconnect{}},

		// AUTH
		{name: "AUTH no reason code", v: v, raw: wb(0xF0, 0), want: &Auth{}},
		{name: "AUTH continue authentication", v: v,
			raw: wpkt(0xF0, wb(0x18), wprops(pStr(PropAuthMethod, "SCRAM-SHA-1"), pStr(PropAuthData, "\x00client-first"))),
			want: &Auth{Code: CodeContinueAuthentication, Props: Properties{
				Has: mask(PropAuthMethod, PropAuthData), AuthMethod: bs("SCRAM-SHA-1"), AuthData: bs("\x00client-first")}}},
		{name: "AUTH re-authenticate every property", v: v,
			raw: wpkt(0xF0, wb(0x19), wprops(pStr(PropAuthMethod, "SCRAM-SHA-1"), pStr(PropAuthData, "d"),
				pStr(PropReasonString, "again"), pUser("k", "v"))),
			want: &Auth{Code: CodeReAuthenticate, Props: Properties{
				Has:        mask(PropAuthMethod, PropAuthData, PropReasonString, PropUser),
				AuthMethod: bs("SCRAM-SHA-1"), AuthData: bs("d"), ReasonString: bs("again"), User: users("k", "v")}}},
	}
}

// connect5 is the start of a version 5 CONNECT body up to and including the
// connect flags.
func connect5(flags byte) []byte { return wcat(wstr("MQTT"), wb(5, flags), wu16(60)) }

// connect4 is the same for version 3.1.1.
func connect4(flags byte) []byte { return wcat(wstr("MQTT"), wb(4, flags), wu16(60)) }

func invalidCases() []tcase {
	const (
		mal   = CodeMalformedPacket
		proto = CodeProtocolError
	)
	var cs []tcase
	// Rules that hold in both versions, written once with the version
	// dependent part (properties) chosen by p.
	for _, v := range []Version{V311, V5} {
		p := func(props ...[]byte) []byte { // properties in 5.0, nothing in 3.1.1
			if v == V5 {
				return wprops(props...)
			}
			return nil
		}
		connect := connect4
		unsuback0 := wb(0xB0, 2, 0, 0) // 3.1.1 UNSUBACK has no payload
		if v == V5 {
			connect = connect5
			unsuback0 = wpkt(0xB0, wu16(0), wprops(), wb(0))
		}
		cs = append(cs, []tcase{
			// Truncated fields: the remaining length is right, a field inside is cut short.
			{name: "CONNECT truncated protocol name", v: v, raw: wb(0x10, 3, 0, 4, 'M'), code: mal},
			{name: "CONNECT truncated before keep alive", v: v, raw: wcat(wb(0x10, 8), wstr("MQTT"), wb(byte(v), 2)), code: mal},
			{name: "CONNECT truncated client id", v: v, raw: wpkt(0x10, connect(2), p(), wb(0, 5, 'a')), code: mal},
			{name: "CONNECT missing will payload", v: v, raw: wpkt(0x10, connect(0x06), p(), wstr("c"), p(), wstr("w/t")), code: mal},
			{name: "CONNECT missing password", v: v, raw: wpkt(0x10, connect(0xC2), p(), wstr("c"), wstr("u")), code: mal},
			{name: "CONNACK one byte", v: v, raw: wb(0x20, 1, 0), code: mal},
			{name: "PUBLISH topic longer than the packet", v: v, raw: wb(0x30, 3, 0, 5, 'a'), code: mal},
			{name: "PUBLISH QoS 1 missing packet id", v: v, raw: wpkt(0x32, wstr("a"), wb(1)), code: mal},
			{name: "PUBACK one byte", v: v, raw: wb(0x40, 1, 0), code: mal},
			{name: "PUBREL empty", v: v, raw: wb(0x62, 0), code: mal},
			{name: "SUBSCRIBE filter without options", v: v, raw: wpkt(0x82, wu16(1), p(), wstr("a/b")), code: mal},
			{name: "SUBSCRIBE truncated filter", v: v, raw: wpkt(0x82, wu16(1), p(), wb(0, 9, 'a')), code: mal},
			{name: "UNSUBSCRIBE truncated filter", v: v, raw: wpkt(0xA2, wu16(1), p(), wb(0, 9, 'a')), code: mal},
			{name: "SUBACK missing packet id", v: v, raw: wb(0x90, 1, 0), code: mal},

			// Trailing bytes after the last field.
			{name: "CONNECT trailing byte", v: v, raw: wpkt(0x10, connect(2), p(), wstr("c"), wb(0)), code: mal},
			{name: "PINGREQ with a body", v: v, raw: wb(0xC0, 1, 0), code: mal},
			{name: "PINGRESP with a body", v: v, raw: wb(0xD0, 1, 0), code: mal},

			// Strings that are not well-formed UTF-8, or contain U+0000.
			{name: "PUBLISH topic invalid UTF-8", v: v, raw: wpkt(0x30, wstr("a\xffb"), p()), code: mal},
			{name: "PUBLISH topic UTF-16 surrogate", v: v, raw: wpkt(0x30, wstr("a\xed\xa0\x80"), p()), code: mal},
			{name: "PUBLISH topic U+0000", v: v, raw: wpkt(0x30, wstr("a\x00b"), p()), code: mal},
			{name: "PUBLISH topic overlong encoding", v: v, raw: wpkt(0x30, wstr("\xc0\xafa"), p()), code: mal},
			{name: "PUBLISH topic U+0000 after multi-byte", v: v, raw: wpkt(0x30, wstr("é\x00"), p()), code: mal},
			{name: "CONNECT client id surrogate", v: v, raw: wpkt(0x10, connect(2), p(), wstr("\xed\xbf\xbf")), code: mal},
			{name: "CONNECT user name U+0000", v: v, raw: wpkt(0x10, connect(0x82), p(), wstr("c"), wstr("u\x00")), code: mal},
			{name: "CONNECT will topic invalid UTF-8", v: v, raw: wpkt(0x10, connect(0x06), p(), wstr("c"), p(), wstr("\xfe"), wstr("")), code: mal},
			{name: "SUBSCRIBE filter surrogate", v: v, raw: wpkt(0x82, wu16(1), p(), wstr("\xed\xa0\x80"), wb(0)), code: mal},
			{name: "UNSUBSCRIBE filter U+0000", v: v, raw: wpkt(0xA2, wu16(1), p(), wstr("\x00")), code: mal},

			// Wildcards in a topic name.
			{name: "PUBLISH topic with +", v: v, raw: wpkt(0x30, wstr("a/+/c"), p()), code: CodeTopicNameInvalid},
			{name: "PUBLISH topic with #", v: v, raw: wpkt(0x32, wstr("a/#"), wu16(1), p()), code: CodeTopicNameInvalid},
			{name: "PUBLISH multi-byte topic with +", v: v, raw: wpkt(0x30, wstr("é/+"), p()), code: CodeTopicNameInvalid},
			{name: "CONNECT will topic with wildcard", v: v, raw: wpkt(0x10, connect(0x06), p(), wstr("c"), p(), wstr("a/#"), wstr("")), code: CodeTopicNameInvalid},

			// Empty topic name (without topic alias in 5.0).
			{name: "PUBLISH empty topic", v: v, raw: wpkt(0x30, wstr(""), p(), bs("x")), code: proto},

			// Packet identifier 0.
			{name: "PUBLISH QoS 1 packet id 0", v: v, raw: wpkt(0x32, wstr("a"), wu16(0), p()), code: proto},
			{name: "PUBLISH QoS 2 packet id 0", v: v, raw: wpkt(0x34, wstr("a"), wu16(0), p()), code: proto},
			{name: "PUBACK packet id 0", v: v, raw: wb(0x40, 2, 0, 0), code: proto},
			{name: "PUBREC packet id 0", v: v, raw: wb(0x50, 2, 0, 0), code: proto},
			{name: "PUBREL packet id 0", v: v, raw: wb(0x62, 2, 0, 0), code: proto},
			{name: "PUBCOMP packet id 0", v: v, raw: wb(0x70, 2, 0, 0), code: proto},
			{name: "SUBSCRIBE packet id 0", v: v, raw: wpkt(0x82, wu16(0), p(), wstr("a"), wb(0)), code: proto},
			{name: "SUBACK packet id 0", v: v, raw: wpkt(0x90, wu16(0), p(), wb(0)), code: proto},
			{name: "UNSUBSCRIBE packet id 0", v: v, raw: wpkt(0xA2, wu16(0), p(), wstr("a")), code: proto},
			{name: "UNSUBACK packet id 0", v: v, raw: unsuback0, code: proto},

			// Unsupported protocol name or level.
			{name: "CONNECT protocol name MQTX", v: v, raw: wpkt(0x10, wstr("MQTX"), wb(byte(v), 2), wu16(60), p(), wstr("c")), code: CodeUnsupportedProtocolVersion},
			{name: "CONNECT protocol level 6", v: v, raw: wpkt(0x10, wstr("MQTT"), wb(6, 2), wu16(60), p(), wstr("c")), code: CodeUnsupportedProtocolVersion},
			{name: "CONNECT protocol level 3 with name MQTT", v: v, raw: wpkt(0x10, wstr("MQTT"), wb(3, 2), wu16(60), wstr("c")), code: CodeUnsupportedProtocolVersion},
			{name: "CONNECT MQIsdp with level 4", v: v, raw: wpkt(0x10, wstr("MQIsdp"), wb(4, 2), wu16(60), wstr("c")), code: CodeUnsupportedProtocolVersion},
			{name: "CONNECT lower-case protocol name", v: v, raw: wpkt(0x10, wstr("mqtt"), wb(byte(v), 2), wu16(60), p(), wstr("c")), code: CodeUnsupportedProtocolVersion},

			// CONNECT flags.
			{name: "CONNECT reserved flag", v: v, raw: wpkt(0x10, connect(0x03), p(), wstr("c")), code: mal},
			{name: "CONNECT will QoS 3", v: v, raw: wpkt(0x10, connect(0x1E), p(), wstr("c"), p(), wstr("w"), wstr("")), code: mal},
			{name: "CONNECT will QoS without will flag", v: v, raw: wpkt(0x10, connect(0x0A), p(), wstr("c")), code: mal},
			{name: "CONNECT will retain without will flag", v: v, raw: wpkt(0x10, connect(0x22), p(), wstr("c")), code: mal},

			// Reason codes and return codes.
			{name: "CONNACK reserved acknowledge flags", v: v, raw: wpkt(0x20, wb(0x02, 0), p()), code: mal},
			{name: "CONNACK reserved flags and invalid code", v: v, raw: wpkt(0x20, wb(0x80, 0xEE), p()), code: mal},
			{name: "CONNACK session present with failure", v: v, raw: wpkt(0x20, wb(1, map[Version]byte{V311: 5, V5: 0x87}[v]), p()), code: proto},

			// Subscriptions.
			{name: "SUBSCRIBE no filters", v: v, raw: wpkt(0x82, wu16(1), p()), code: proto},
			{name: "UNSUBSCRIBE no filters", v: v, raw: wpkt(0xA2, wu16(1), p()), code: proto},
			{name: "SUBSCRIBE reserved option bits 7-6", v: v, raw: wpkt(0x82, wu16(1), p(), wstr("a"), wb(0xC1)), code: mal},
			{name: "SUBSCRIBE second filter bad", v: v, raw: wpkt(0x82, wu16(1), p(), wstr("a"), wb(1), wstr("b"), wb(0x80)), code: mal},
			{name: "SUBACK no codes", v: v, raw: wpkt(0x90, wu16(1), p()), code: proto},
		}...)
	}

	// 3.1.1 only.
	v := V311
	cs = append(cs, []tcase{
		{name: "CONNECT password without user name", v: v, raw: wpkt(0x10, connect4(0x42), wstr("c"), wstr("pw")), code: mal},
		{name: "CONNACK three bytes", v: v, raw: wb(0x20, 3, 0, 0, 0), code: mal},
		{name: "CONNACK return code 6", v: v, raw: wb(0x20, 2, 0, 6), code: proto},
		{name: "CONNACK reserved flags and return code 6", v: v, raw: wb(0x20, 2, 2, 6), code: mal},
		{name: "CONNACK reserved flags and return code 0xFF", v: v, raw: wb(0x20, 2, 0xFE, 0xFF), code: mal},
		{name: "PUBACK with a reason code", v: v, raw: wb(0x40, 3, 0, 1, 0), code: mal},
		{name: "PUBREL with a reason code", v: v, raw: wb(0x62, 3, 0, 1, 0), code: mal},
		{name: "UNSUBACK with a payload", v: v, raw: wb(0xB0, 3, 0, 1, 0), code: mal},
		{name: "DISCONNECT with a reason code", v: v, raw: wb(0xE0, 1, 0), code: mal},
		{name: "SUBSCRIBE option bits 7-2 (5.0 options)", v: v, raw: wpkt(0x82, wu16(1), wstr("a"), wb(0x04)), code: mal},
		{name: "SUBSCRIBE QoS 3", v: v, raw: wpkt(0x82, wu16(1), wstr("a"), wb(3)), code: mal},
		{name: "SUBACK return code 3", v: v, raw: wb(0x90, 3, 0, 1, 3), code: proto},
		{name: "SUBACK 5.0 reason code 0x87", v: v, raw: wb(0x90, 3, 0, 1, 0x87), code: proto},
		{name: "AUTH", v: v, raw: wb(0xF0, 0), code: mal},
		{name: "AUTH with a body", v: v, raw: wb(0xF0, 1, 0x18), code: mal},
	}...)

	// 5.0 only.
	v = V5
	c5 := func(props ...[]byte) []byte { // a CONNECT with the given properties
		return wpkt(0x10, connect5(2), wprops(props...), wstr("c"))
	}
	pub := func(props ...[]byte) []byte { // a QoS 0 PUBLISH with the given properties
		return wpkt(0x30, wstr("t"), wprops(props...), bs("x"))
	}
	cs = append(cs, []tcase{
		// Truncated and trailing.
		{name: "CONNECT missing property length", v: v, raw: wpkt(0x10, connect5(2)), code: mal},
		{name: "CONNECT property length exceeds packet", v: v, raw: wpkt(0x10, connect5(2), wb(10), pU32(PropSessionExpiry, 1)), code: mal},
		{name: "CONNECT property value truncated", v: v, raw: wpkt(0x10, connect5(2), wb(3), pU32(PropSessionExpiry, 1)[:3]), code: mal},
		{name: "CONNECT user property missing value", v: v, raw: wpkt(0x10, connect5(2), wprops(wb(byte(PropUser)), wstr("k")), wstr("c")), code: mal},
		{name: "CONNECT will properties truncated", v: v, raw: wpkt(0x10, connect5(0x06), wprops(), wstr("c"), wb(5, 0x18, 0)), code: mal},
		{name: "CONNACK missing property length", v: v, raw: wb(0x20, 2, 0, 0), code: mal},
		{name: "CONNACK trailing byte", v: v, raw: wb(0x20, 4, 0, 0, 0, 0), code: mal},
		{name: "PUBLISH missing property length", v: v, raw: wpkt(0x30, wstr("t")), code: mal},
		{name: "PUBLISH subscription id truncated", v: v, raw: wpkt(0x30, wstr("t"), wb(2, byte(PropSubscriptionID), 0x80)), code: mal},
		{name: "PUBACK property length exceeds packet", v: v, raw: wb(0x40, 5, 0, 1, 0x80, 9, 0x1F), code: mal},
		{name: "PUBACK trailing byte after properties", v: v, raw: wb(0x40, 5, 0, 1, 0x80, 0, 0), code: mal},
		{name: "SUBACK missing property length", v: v, raw: wb(0x90, 2, 0, 1), code: mal},
		{name: "UNSUBACK missing property length", v: v, raw: wb(0xB0, 2, 0, 1), code: mal},
		{name: "DISCONNECT property length exceeds packet", v: v, raw: wb(0xE0, 2, 0, 1), code: mal},
		{name: "DISCONNECT trailing byte", v: v, raw: wb(0xE0, 3, 0, 0, 0), code: mal},
		{name: "AUTH property length exceeds packet", v: v, raw: wb(0xF0, 2, 0x18, 4), code: mal},

		// Variable byte integers inside the body.
		{name: "PUBLISH property length not shortest", v: v, raw: wpkt(0x30, wstr("t"), wb(0x80, 0x00)), code: mal},
		{name: "PUBLISH subscription id in 5 bytes", v: v, raw: pub(wb(byte(PropSubscriptionID), 0x81, 0x81, 0x81, 0x81, 0x01)), code: mal},
		{name: "PUBLISH subscription id not shortest", v: v, raw: pub(wb(byte(PropSubscriptionID), 0x81, 0x00)), code: mal},
		{name: "PUBLISH property identifier in two bytes", v: v, raw: pub(wb(0x81, 0x00, 1)), code: mal},

		// Strings in properties.
		{name: "PUBLISH content type invalid UTF-8", v: v, raw: pub(pStr(PropContentType, "\xff")), code: mal},
		{name: "PUBLISH user property key U+0000", v: v, raw: pub(pUser("\x00", "v")), code: mal},
		{name: "PUBLISH user property value surrogate", v: v, raw: pub(pUser("k", "\xed\xa0\x80")), code: mal},
		{name: "CONNACK reason string surrogate", v: v, raw: wpkt(0x20, wb(0, 0), wprops(pStr(PropReasonString, "\xed\xb0\x80"))), code: mal},
		{name: "PUBLISH response topic with wildcard", v: v, raw: pub(pStr(PropResponseTopic, "r/+")), code: proto},
		{name: "PUBLISH response topic empty", v: v, raw: pub(pStr(PropResponseTopic, "")), code: proto},

		// Properties not allowed for the packet type.
		{name: "CONNECT topic alias", v: v, raw: c5(pU16(PropTopicAlias, 1)), code: mal},
		{name: "CONNECT will delay in connect properties", v: v, raw: c5(pU32(PropWillDelay, 1)), code: mal},
		{name: "CONNECT maximum QoS", v: v, raw: c5(pByte(PropMaxQoS, 1)), code: mal},
		{name: "CONNECT session expiry in will properties", v: v,
			raw: wpkt(0x10, connect5(0x06), wprops(), wstr("c"), wprops(pU32(PropSessionExpiry, 1)), wstr("w"), wstr("")), code: mal},
		{name: "CONNACK request problem information", v: v, raw: wpkt(0x20, wb(0, 0), wprops(pByte(PropRequestProblemInfo, 1))), code: mal},
		{name: "PUBLISH session expiry", v: v, raw: pub(pU32(PropSessionExpiry, 1)), code: mal},
		{name: "PUBLISH reason string", v: v, raw: pub(pStr(PropReasonString, "r")), code: mal},
		{name: "PUBLISH unknown property 0x7F", v: v, raw: pub(wb(0x7F, 0)), code: mal},
		{name: "PUBLISH property identifier 0", v: v, raw: pub(wb(0x00, 0)), code: mal},
		{name: "PUBACK server reference", v: v, raw: wpkt(0x40, wu16(1), wb(0), wprops(pStr(PropServerReference, "s"))), code: mal},
		{name: "SUBSCRIBE topic alias", v: v, raw: wpkt(0x82, wu16(1), wprops(pU16(PropTopicAlias, 1)), wstr("a"), wb(0)), code: mal},
		{name: "UNSUBSCRIBE subscription identifier", v: v, raw: wpkt(0xA2, wu16(1), wprops(pVBI(PropSubscriptionID, 1)), wstr("a")), code: mal},
		{name: "SUBACK user property and session expiry", v: v, raw: wpkt(0x90, wu16(1), wprops(pUser("k", "v"), pU32(PropSessionExpiry, 1)), wb(0)), code: mal},
		{name: "UNSUBACK content type", v: v, raw: wpkt(0xB0, wu16(1), wprops(pStr(PropContentType, "c")), wb(0)), code: mal},
		{name: "DISCONNECT auth method", v: v, raw: wpkt(0xE0, wb(0), wprops(pStr(PropAuthMethod, "m"))), code: mal},
		{name: "AUTH session expiry", v: v, raw: wpkt(0xF0, wb(0x18), wprops(pStr(PropAuthMethod, "m"), pU32(PropSessionExpiry, 1))), code: mal},

		// Duplicated properties.
		{name: "CONNECT session expiry twice", v: v, raw: c5(pU32(PropSessionExpiry, 1), pU32(PropSessionExpiry, 2)), code: proto},
		{name: "CONNECT auth method twice", v: v, raw: c5(pStr(PropAuthMethod, "a"), pStr(PropAuthMethod, "a")), code: proto},
		{name: "CONNECT will delay twice", v: v,
			raw: wpkt(0x10, connect5(0x06), wprops(), wstr("c"), wprops(pU32(PropWillDelay, 1), pU32(PropWillDelay, 1)), wstr("w"), wstr("")), code: proto},
		{name: "CONNACK maximum QoS twice", v: v, raw: wpkt(0x20, wb(0, 0), wprops(pByte(PropMaxQoS, 0), pByte(PropMaxQoS, 0))), code: proto},
		{name: "PUBLISH topic alias twice", v: v, raw: pub(pU16(PropTopicAlias, 1), pU16(PropTopicAlias, 2)), code: proto},
		{name: "PUBLISH payload format twice", v: v, raw: pub(pByte(PropPayloadFormat, 0), pByte(PropPayloadFormat, 0)), code: proto},
		{name: "PUBACK reason string twice", v: v, raw: wpkt(0x40, wu16(1), wb(0x80), wprops(pStr(PropReasonString, "a"), pStr(PropReasonString, "b"))), code: proto},
		{name: "SUBSCRIBE subscription identifier twice", v: v,
			raw: wpkt(0x82, wu16(1), wprops(pVBI(PropSubscriptionID, 1), pVBI(PropSubscriptionID, 2)), wstr("a"), wb(0)), code: proto},
		{name: "DISCONNECT session expiry twice", v: v, raw: wpkt(0xE0, wb(0), wprops(pU32(PropSessionExpiry, 1), pU32(PropSessionExpiry, 1))), code: proto},

		// Property values out of range.
		{name: "CONNECT receive maximum 0", v: v, raw: c5(pU16(PropReceiveMax, 0)), code: proto},
		{name: "CONNACK receive maximum 0", v: v, raw: wpkt(0x20, wb(0, 0), wprops(pU16(PropReceiveMax, 0))), code: proto},
		{name: "CONNECT maximum packet size 0", v: v, raw: c5(pU32(PropMaxPacketSize, 0)), code: proto},
		{name: "CONNACK maximum packet size 0", v: v, raw: wpkt(0x20, wb(0, 0), wprops(pU32(PropMaxPacketSize, 0))), code: proto},
		{name: "PUBLISH topic alias 0", v: v, raw: pub(pU16(PropTopicAlias, 0)), code: CodeTopicAliasInvalid},
		{name: "PUBLISH subscription id 0", v: v, raw: pub(pVBI(PropSubscriptionID, 0)), code: proto},
		{name: "SUBSCRIBE subscription id 0", v: v, raw: wpkt(0x82, wu16(1), wprops(pVBI(PropSubscriptionID, 0)), wstr("a"), wb(0)), code: proto},
		{name: "PUBLISH payload format 2", v: v, raw: pub(pByte(PropPayloadFormat, 2)), code: proto},
		{name: "CONNECT will payload format 2", v: v,
			raw: wpkt(0x10, connect5(0x06), wprops(), wstr("c"), wprops(pByte(PropPayloadFormat, 2)), wstr("w"), wstr("")), code: proto},
		{name: "CONNECT request problem information 2", v: v, raw: c5(pByte(PropRequestProblemInfo, 2)), code: proto},
		{name: "CONNECT request response information 2", v: v, raw: c5(pByte(PropRequestResponseInfo, 2)), code: proto},
		{name: "CONNACK maximum QoS 2", v: v, raw: wpkt(0x20, wb(0, 0), wprops(pByte(PropMaxQoS, 2))), code: proto},
		{name: "CONNACK retain available 2", v: v, raw: wpkt(0x20, wb(0, 0), wprops(pByte(PropRetainAvailable, 2))), code: proto},
		{name: "CONNACK wildcard subscription available 2", v: v, raw: wpkt(0x20, wb(0, 0), wprops(pByte(PropWildcardSubAvailable, 2))), code: proto},
		{name: "CONNACK subscription identifiers available 2", v: v, raw: wpkt(0x20, wb(0, 0), wprops(pByte(PropSubIDAvailable, 2))), code: proto},
		{name: "CONNACK shared subscription available 2", v: v, raw: wpkt(0x20, wb(0, 0), wprops(pByte(PropSharedSubAvailable, 2))), code: proto},
		{name: "CONNECT auth data without auth method", v: v, raw: c5(pStr(PropAuthData, "d")), code: proto},
		{name: "PUBLISH empty topic with other properties but no alias", v: v,
			raw: wpkt(0x30, wstr(""), wprops(pByte(PropPayloadFormat, 1)), bs("x")), code: proto},

		// Subscription options.
		{name: "SUBSCRIBE reserved option bit 6", v: v, raw: wpkt(0x82, wu16(1), wprops(), wstr("a"), wb(0x40)), code: mal},
		{name: "SUBSCRIBE retain handling 3", v: v, raw: wpkt(0x82, wu16(1), wprops(), wstr("a"), wb(0x30)), code: proto},
		{name: "SUBSCRIBE maximum QoS 3", v: v, raw: wpkt(0x82, wu16(1), wprops(), wstr("a"), wb(0x03)), code: proto},

		// Invalid reason codes.
		{name: "CONNACK reason code 0x01", v: v, raw: wpkt(0x20, wb(0, 0x01), wprops()), code: proto},
		{name: "CONNACK reason code 0x8B (not for CONNACK)", v: v, raw: wpkt(0x20, wb(0, 0x8B), wprops()), code: proto},
		{name: "PUBACK reason code 0x05", v: v, raw: wb(0x40, 3, 0, 1, 0x05), code: proto},
		{name: "PUBREC reason code 0x92", v: v, raw: wb(0x50, 3, 0, 1, 0x92), code: proto},
		{name: "PUBREL reason code 0x10", v: v, raw: wb(0x62, 3, 0, 1, 0x10), code: proto},
		{name: "PUBCOMP reason code 0x80", v: v, raw: wb(0x70, 3, 0, 1, 0x80), code: proto},
		{name: "SUBACK reason code 0x03", v: v, raw: wpkt(0x90, wu16(1), wprops(), wb(0, 3)), code: proto},
		{name: "UNSUBACK reason code 0x01", v: v, raw: wpkt(0xB0, wu16(1), wprops(), wb(0x01)), code: proto},
		{name: "UNSUBACK no reason codes", v: v, raw: wpkt(0xB0, wu16(1), wprops()), code: proto},
		{name: "DISCONNECT reason code 0x01", v: v, raw: wb(0xE0, 1, 0x01), code: proto},
		{name: "DISCONNECT reason code 0x84 (CONNACK only)", v: v, raw: wb(0xE0, 1, 0x84), code: proto},
		{name: "AUTH reason code 0x01", v: v, raw: wb(0xF0, 1, 0x01), code: proto},
		{name: "AUTH reason code 0x87", v: v, raw: wpkt(0xF0, wb(0x87), wprops(pStr(PropAuthMethod, "m"))), code: proto},

		// AUTH.
		{name: "AUTH continue without auth method", v: v, raw: wb(0xF0, 1, 0x18), code: proto},
		{name: "AUTH re-authenticate with data but no method", v: v, raw: wpkt(0xF0, wb(0x19), wprops(pStr(PropAuthData, "d"))), code: proto},
		{name: "AUTH success with properties but no method", v: v, raw: wpkt(0xF0, wb(0x00), wprops(pStr(PropReasonString, "r"))), code: proto},
		{name: "AUTH success with empty properties", v: v, raw: wb(0xF0, 2, 0x00, 0x00), code: proto},
	}...)
	return cs
}

// headerCases are faults of the fixed header, for both versions: remaining
// length, reserved type 0, reserved flag bits of every type, PUBLISH flags,
// and the maximum packet size.
func headerCases() []tcase {
	const mal = CodeMalformedPacket
	var cs []tcase
	for _, v := range []Version{V311, V5} {
		cs = append(cs, []tcase{
			{name: "remaining length in 5 bytes", v: v, raw: wb(0x30, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F), code: mal},
			{name: "remaining length in 5 bytes ending in 0", v: v, raw: wb(0xC0, 0x80, 0x80, 0x80, 0x80, 0x00), code: mal},
			{name: "remaining length 0 in 2 bytes", v: v, raw: wb(0xC0, 0x80, 0x00), code: mal},
			{name: "remaining length 5 in 2 bytes", v: v, raw: wcat(wb(0x30, 0x85, 0x00), wstr("abc")), code: mal},
			{name: "remaining length 127 in 4 bytes", v: v, raw: wcat(wb(0x30, 0xFF, 0x80, 0x80, 0x00)), code: mal},
			{name: "reserved type 0", v: v, raw: wb(0x00, 0), code: mal},
			{name: "reserved type 0 with flags and body", v: v, raw: wb(0x0F, 2, 0, 1), code: mal},
			{name: "PUBLISH QoS 3", v: v, raw: wpkt(0x36, wstr("a"), wu16(1)), code: mal},
			{name: "PUBLISH QoS 3 dup retain", v: v, raw: wpkt(0x3F, wstr("a"), wu16(1)), code: mal},
			{name: "PUBLISH dup on QoS 0", v: v, raw: wpkt(0x38, wstr("a")), code: mal},
			{name: "PUBLISH dup on QoS 0 retain", v: v, raw: wpkt(0x39, wstr("a")), code: mal},
			{name: "PUBLISH above the maximum packet size", v: v, max: 10,
				raw: wpkt(0x30, wstr("abc"), wprops(), bs("xyz")), code: CodePacketTooLarge},
			{name: "PINGREQ above a maximum packet size of 1", v: v, max: 1, raw: wb(0xC0, 0), code: CodePacketTooLarge},
			{name: "PUBLISH claiming 256 MiB above the maximum packet size", v: v, max: 1 << 20,
				raw: wb(0x30, 0xFF, 0xFF, 0xFF, 0x7F), code: CodePacketTooLarge},
		}...)
		// Every type but PUBLISH with wrong reserved flag bits; only the
		// fixed header is needed, the decoder rejects it before the body.
		for t := CONNECT; t <= AUTH; t++ {
			if t == PUBLISH {
				continue
			}
			bad := []byte{0x01, 0x08}
			if t == PUBREL || t == SUBSCRIBE || t == UNSUBSCRIBE {
				bad = []byte{0x00, 0x03, 0x0A}
			}
			for _, f := range bad {
				cs = append(cs, tcase{
					name: t.String() + " reserved flags " + bitString(f), v: v,
					raw: wb(byte(t)<<4|f, 0), code: mal})
			}
		}
	}
	return cs
}

func bitString(f byte) string {
	b := []byte("0000")
	for i := range 4 {
		if f&(8>>i) != 0 {
			b[i] = '1'
		}
	}
	return string(b)
}
