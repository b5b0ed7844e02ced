package packet

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// cmpOpts treat nil and empty slices alike (a decoder reusing a struct
// leaves empty slices with capacity where a fresh one has nil) and compare
// byte slices with bytes.Equal, which is fast on large payloads.
var cmpOpts = cmp.Options{
	cmp.Comparer(func(a, b []byte) bool { return bytes.Equal(a, b) }),
	cmp.FilterValues(func(a, b any) bool { return emptySlice(a) && emptySlice(b) },
		cmp.Comparer(func(_, _ any) bool { return true })),
}

func emptySlice(x any) bool {
	v := reflect.ValueOf(x)
	return v.Kind() == reflect.Slice && v.Len() == 0 && v.Type() != reflect.TypeFor[[]byte]()
}

// packetDiff returns "" when want and got are equal, else their difference.
func packetDiff(want, got any) string {
	if cmp.Equal(want, got, cmpOpts) {
		return ""
	}
	return cmp.Diff(want, got, cmpOpts)
}

// decodeFrame parses the fixed header at the start of raw and decodes the
// body that follows, as the gateway does. raw must hold exactly one packet.
func decodeFrame(raw []byte, v Version, maxPacket uint32) (Packet, error) {
	h, n, err := ParseHeader(raw, maxPacket)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, errors.New("frame: incomplete fixed header")
	}
	if n+h.Remaining != len(raw) {
		return nil, fmt.Errorf("frame: fixed header gives %d bytes, the case has %d", n+h.Remaining, len(raw))
	}
	return Decode(h, raw[n:], v)
}

// checkErr reports whether err is an *Error with the wanted code.
func checkErr(t *testing.T, err error, want ReasonCode) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error = %v (%T), want an *Error with code 0x%02x", err, err, byte(want))
	}
	if e.Code != want {
		t.Fatalf("error = %v, want code 0x%02x (%v)", err, byte(want), want)
	}
	if CodeOf(err) != want || CodeOf(fmt.Errorf("wrapped: %w", err)) != want {
		t.Fatalf("CodeOf(%v) = %v, want %v", err, CodeOf(err), want)
	}
	if e.Error() == "" || e.Msg == "" {
		t.Fatalf("error without a message: %#v", e)
	}
}

func TestCaseTable(t *testing.T) {
	seen := map[string]bool{}
	counts := map[Version][2]int{}
	for _, c := range cases {
		if seen[c.id()] {
			t.Errorf("duplicate case name %q", c.id())
		}
		seen[c.id()] = true
		if c.valid() == (c.code != 0) {
			t.Errorf("%s: a case has either want or code", c.id())
		}
		if c.canon != nil && !c.valid() {
			t.Errorf("%s: canon on an invalid case", c.id())
		}
		n := counts[c.v]
		if c.valid() {
			n[0]++
		} else {
			n[1]++
		}
		counts[c.v] = n
	}
	for _, v := range []Version{V311, V5} {
		if counts[v][0] == 0 || counts[v][1] == 0 {
			t.Errorf("version %v: %d valid, %d invalid cases", v, counts[v][0], counts[v][1])
		}
	}
	// Every packet type is covered by a valid case in each version (AUTH
	// only in 5.0).
	for _, v := range []Version{V311, V5} {
		types := map[Type]bool{}
		for _, c := range cases {
			if c.valid() && (c.v == v || (v == V311 && c.v == V31)) {
				types[c.want.Type()] = true
			}
		}
		for ty := CONNECT; ty <= AUTH; ty++ {
			if !types[ty] && (ty != AUTH || v != V311) {
				t.Errorf("version %v: no valid %v case", v, ty)
			}
		}
	}
	t.Logf("cases: 3.1.1 %d valid (+%d for 3.1) %d invalid, 5.0 %d valid %d invalid",
		counts[V311][0], counts[V31][0], counts[V311][1], counts[V5][0], counts[V5][1])
}

func TestDecode(t *testing.T) {
	for _, c := range cases {
		t.Run(c.id(), func(t *testing.T) {
			got, err := decodeFrame(c.raw, c.v, c.max)
			if !c.valid() {
				if err == nil {
					t.Fatalf("decoded %+v, want error 0x%02x", got, byte(c.code))
				}
				checkErr(t, err, c.code)
				return
			}
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if d := packetDiff(c.want, got); d != "" {
				t.Fatalf("decoded packet differs (-want +got):\n%s", d)
			}
		})
	}
}

func TestEncode(t *testing.T) {
	for _, c := range cases {
		if !c.valid() {
			continue
		}
		t.Run(c.id(), func(t *testing.T) {
			want := c.encoded()
			if got := c.want.Append(nil, c.v); !bytes.Equal(got, want) {
				t.Fatalf("Append:\n got % x\nwant % x", got, want)
			}
			if n := c.want.Size(c.v); n != len(want) {
				t.Fatalf("Size = %d, want %d", n, len(want))
			}
			// Append appends: a prefix in dst is kept.
			prefix := []byte("prefix")
			got := c.want.Append(prefix[:len(prefix):len(prefix)], c.v)
			if !bytes.Equal(got[:len(prefix)], prefix) || !bytes.Equal(got[len(prefix):], want) {
				t.Fatalf("Append after a prefix:\n got % x", got)
			}
			if pub, ok := c.want.(*Publish); ok {
				head := pub.AppendHeader(nil, c.v)
				if !bytes.Equal(append(head, pub.Payload...), want) {
					t.Fatalf("AppendHeader + payload:\n got % x\nwant % x", append(head, pub.Payload...), want)
				}
			}
		})
	}
}

// TestRoundTrip: decode → encode → decode yields the same packet, for every
// valid case, and the second encoding equals the first.
func TestRoundTrip(t *testing.T) {
	for _, c := range cases {
		if !c.valid() {
			continue
		}
		t.Run(c.id(), func(t *testing.T) {
			p1, err := decodeFrame(c.raw, c.v, 0)
			if err != nil {
				t.Fatal(err)
			}
			enc := p1.Append(nil, c.v)
			p2, err := decodeFrame(enc, c.v, 0)
			if err != nil {
				t.Fatalf("decode of the re-encoding % x: %v", enc, err)
			}
			if d := packetDiff(p1, p2); d != "" {
				t.Fatalf("round trip differs (-first +second):\n%s", d)
			}
			if enc2 := p2.Append(nil, c.v); !bytes.Equal(enc, enc2) {
				t.Fatalf("second encoding differs:\n% x\n% x", enc, enc2)
			}
		})
	}
}

// TestDecodeReuse decodes every case into one reused struct per packet
// type, in table order and then in reverse, so that any field a decoder
// forgets to reset shows up as a difference.
func TestDecodeReuse(t *testing.T) {
	reused := map[Type]Packet{}
	run := func(c tcase) {
		h, n, err := ParseHeader(c.raw, c.max)
		if err != nil || n == 0 {
			return
		}
		p := reused[h.Type]
		if p == nil {
			p = New(h.Type)
			if p == nil {
				return
			}
			reused[h.Type] = p
		}
		body := c.raw[n:]
		if len(body) > h.Remaining {
			body = body[:h.Remaining]
		}
		err = p.Decode(h, body, c.v)
		if !c.valid() {
			if err == nil {
				t.Errorf("%s: reused decode succeeded, want 0x%02x", c.id(), byte(c.code))
			} else if CodeOf(err) != c.code {
				t.Errorf("%s: reused decode: %v, want 0x%02x", c.id(), err, byte(c.code))
			}
			return
		}
		if err != nil {
			t.Errorf("%s: reused decode: %v", c.id(), err)
			return
		}
		if d := packetDiff(c.want, p); d != "" {
			t.Errorf("%s: reused decode differs (-want +got):\n%s", c.id(), d)
		}
	}
	for _, c := range cases {
		run(c)
	}
	for i := len(cases) - 1; i >= 0; i-- {
		run(cases[i])
	}
}

func TestNewAndTypes(t *testing.T) {
	if New(0) != nil {
		t.Fatal("New(0) != nil")
	}
	if New(16) != nil {
		t.Fatal("New(16) != nil")
	}
	for ty := CONNECT; ty <= AUTH; ty++ {
		p := New(ty)
		if p == nil || p.Type() != ty {
			t.Fatalf("New(%v) = %#v", ty, p)
		}
		if ty.String() == "" {
			t.Fatalf("Type(%d).String() empty", ty)
		}
	}
	if _, err := Decode(FixedHeader{Type: 0}, nil, V5); CodeOf(err) != CodeMalformedPacket {
		t.Fatalf("Decode of type 0: %v", err)
	}
	if got := Type(16).String(); got != "Type(16)" {
		t.Fatalf("Type(16).String() = %q", got)
	}
	for v, want := range map[Version]string{V31: "3.1", V311: "3.1.1", V5: "5.0", 6: "Version(6)"} {
		if v.String() != want {
			t.Fatalf("Version(%d).String() = %q, want %q", v, v.String(), want)
		}
	}
	if CodeOf(errors.New("plain")) != CodeUnspecifiedError {
		t.Fatal("CodeOf of a plain error")
	}
	if CodePacketTooLarge.String() != "packet too large" || ReasonCode(0x05).String() != "reason code 0x5" {
		t.Fatal("ReasonCode.String")
	}
	if CodeSuccess.IsError() || !CodeUnspecifiedError.IsError() {
		t.Fatal("ReasonCode.IsError")
	}
}

// TestParseHeaderIncomplete: every proper prefix of a fixed header is
// "need more bytes", not an error.
func TestParseHeaderIncomplete(t *testing.T) {
	for _, hdr := range [][]byte{
		{}, {0x30}, {0x30, 0x80}, {0x30, 0xFF, 0xFF}, {0x30, 0xFF, 0xFF, 0xFF},
		{0x00}, {0x0F, 0x80}, // reserved type: undecided until the length is known
	} {
		h, n, err := ParseHeader(hdr, 0)
		if n != 0 || err != nil {
			t.Errorf("ParseHeader(% x) = %+v, %d, %v; want need more", hdr, h, n, err)
		}
	}
	// The largest remaining length.
	h, n, err := ParseHeader([]byte{0x30, 0xFF, 0xFF, 0xFF, 0x7F}, 0)
	if err != nil || n != 5 || h.Remaining != MaxRemainingLength {
		t.Fatalf("ParseHeader(max) = %+v, %d, %v", h, n, err)
	}
}

// TestConnackV311Mapping: 5.0 reason codes without a 3.1.1 return code map
// to the closest one.
func TestConnackV311Mapping(t *testing.T) {
	for code, want := range map[ReasonCode]byte{
		CodeSuccess: 0, CodeUnsupportedProtocolVersion: 1, CodeClientIdentifierNotValid: 2,
		CodeServerUnavailable: 3, CodeServerBusy: 3, CodeBadUserNameOrPassword: 4,
		CodeNotAuthorized: 5, CodeBanned: 5, CodeBadAuthenticationMethod: 5,
	} {
		got := (&Connack{Code: code}).Append(nil, V311)
		if !bytes.Equal(got, []byte{0x20, 2, 0, want}) {
			t.Errorf("CONNACK %v for 3.1.1 = % x, want return code %d", code, got, want)
		}
	}
	// SUBACK failures map to 0x80 in 3.1.1.
	got := (&Suback{PacketID: 1, Codes: codes(CodeGrantedQoS1, CodeNotAuthorized)}).Append(nil, V311)
	if !bytes.Equal(got, []byte{0x90, 4, 0, 1, 1, 0x80}) {
		t.Errorf("SUBACK for 3.1.1 = % x", got)
	}
}

// TestEncodeVersionRules: properties and 5.0-only fields are left out for
// 3.1.1, and only the properties a packet type allows are written.
func TestEncodeVersionRules(t *testing.T) {
	props := Properties{Has: mask(PropReasonString, PropSessionExpiry, PropTopicAlias), ReasonString: bs("r"),
		SessionExpiry: 9, TopicAlias: 2, User: users("k", "v")}
	for _, tc := range []struct {
		p    Packet
		v    Version
		want []byte
	}{
		{&Publish{Topic: bs("t"), Props: props}, V311, wpkt(0x30, wstr("t"))},
		{&Publish{Topic: bs("t"), Props: props}, V5, wpkt(0x30, wstr("t"), wprops(pU16(PropTopicAlias, 2), pUser("k", "v")))},
		{&Ack{Kind: PUBACK, PacketID: 1, Code: CodeQuotaExceeded, Props: props}, V311, wb(0x40, 2, 0, 1)},
		{&Ack{Kind: PUBREL, PacketID: 1, Props: props}, V5, wpkt(0x62, wu16(1), wb(0), wprops(pStr(PropReasonString, "r"), pUser("k", "v")))},
		{&Disconnect{Code: CodeServerShuttingDown, Props: props}, V311, wb(0xE0, 0)},
		{&Disconnect{Props: props}, V5, wpkt(0xE0, wb(0), wprops(pU32(PropSessionExpiry, 9), pStr(PropReasonString, "r"), pUser("k", "v")))},
		{&Subscribe{PacketID: 1, Props: props, Filters: []Subscription{{Filter: bs("f"), QoS: 1, NoLocal: true, RetainHandling: 2}}}, V311,
			wpkt(0x82, wu16(1), wstr("f"), wb(1))},
		{&Unsuback{PacketID: 1, Props: props, Codes: codes(0x11)}, V311, wb(0xB0, 2, 0, 1)},
		{&Connack{Code: CodeSuccess, Props: props}, V311, wb(0x20, 2, 0, 0)},
		{&Connect{Version: V311, ClientID: bs("c"), WillQoS: 2, WillRetain: true, Props: props}, V311,
			wpkt(0x10, wstr("MQTT"), wb(4, 0), wu16(0), wstr("c"))},
		{&Connect{Version: V31, ClientID: bs("c")}, V31, wpkt(0x10, wstr("MQIsdp"), wb(3, 0), wu16(0), wstr("c"))},
		{&Connect{Version: V5, ClientID: bs("c"), Props: props}, V5,
			wpkt(0x10, wstr("MQTT"), wb(5, 0), wu16(0), wprops(pU32(PropSessionExpiry, 9), pUser("k", "v")), wstr("c"))},
	} {
		got := tc.p.Append(nil, tc.v)
		if !bytes.Equal(got, tc.want) {
			t.Errorf("%T %v:\n got % x\nwant % x", tc.p, tc.v, got, tc.want)
		}
		if tc.p.Size(tc.v) != len(got) {
			t.Errorf("%T %v: Size %d, Append wrote %d", tc.p, tc.v, tc.p.Size(tc.v), len(got))
		}
	}
}

func TestValidUTF8(t *testing.T) {
	for s, want := range map[string]bool{
		"": true, "a/b": true, "é€😀": true, "\u007f\u0001": true, "\uFFFF": true,
		"\x00": false, "a\x00": false, "é\x00": false, "\xed\xa0\x80": false, "\xc0\x80": false,
		"\xf4\x90\x80\x80": false, "\xff": false, "a\xe2\x82": false,
	} {
		if got := ValidUTF8([]byte(s)); got != want {
			t.Errorf("ValidUTF8(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestPropertiesPresence(t *testing.T) {
	var p Properties
	p.Set(PropTopicAlias)
	if !p.Present(PropTopicAlias) || p.Present(PropUser) {
		t.Fatal("Set/Present")
	}
	p.Clear(PropTopicAlias)
	if p.Present(PropTopicAlias) || p.Has != 0 {
		t.Fatal("Clear")
	}
}
