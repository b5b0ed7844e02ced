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

// connect5 is the start of a version 5 CONNECT body up to and including the
// connect flags.
func connect5(flags byte) []byte { return wcat(wstr("MQTT"), wb(5, flags), wu16(60)) }

// connect4 is the same for version 3.1.1.
func connect4(flags byte) []byte { return wcat(wstr("MQTT"), wb(4, flags), wu16(60)) }

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
