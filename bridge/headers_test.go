package bridge

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

var now = time.UnixMilli(1_700_000_000_000)

type hdr struct{ Key, Value string }

func texts(hs []kafka.Header) []hdr {
	out := make([]hdr, len(hs))
	for i, h := range hs {
		out[i] = hdr{h.Key, string(h.Value)}
	}
	return out
}

func userProps(kv ...string) []*eventspb.UserProperty {
	var ps []*eventspb.UserProperty
	for i := 0; i < len(kv); i += 2 {
		ps = append(ps, &eventspb.UserProperty{Key: kv[i], Value: kv[i+1]})
	}
	return ps
}

func TestAppendHeaders(t *testing.T) {
	full := &eventspb.Message{
		Topic: "plant/1/telemetry", Payload: []byte("21.5"), Qos: 2, Retain: true,
		PayloadUtf8: true, HasExpiry: true, ExpiresAtMs: now.UnixMilli() + 30_500,
		ContentType: "text/plain", ResponseTopic: "plant/1/reply", CorrelationData: []byte{0, 1, 0xff},
		UserProperties: userProps("unit", "°C", "tag", "a", "tag", "b", "", "empty name"),
	}
	o := Origin{
		Tenant: "acme", ClientID: "sensor-1",
		MessageID:   &eventspb.MessageID{GatewayEpoch: 0x0f3a9c0d11e5b7a2, Seq: 17},
		Traceparent: []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
	}
	for _, c := range []struct {
		name string
		m    *eventspb.Message
		o    Origin
		want []hdr
	}{
		{"every property", full, o, []hdr{
			{"mqtt.topic", "plant/1/telemetry"}, {"mqtt.qos", "2"}, {"mqtt.retain", "true"},
			{"mqtt.client_id", "sensor-1"}, {"shoal.tenant", "acme"}, {"shoal.message_id", "0f3a9c0d11e5b7a2-17"},
			{"mqtt.content_type", "text/plain"}, {"mqtt.payload_format", "1"}, {"mqtt.response_topic", "plant/1/reply"},
			{"mqtt.correlation_data", "\x00\x01\xff"}, {"mqtt.message_expiry", "31"},
			{"unit", "°C"}, {"tag", "a"}, {"tag", "b"}, {"", "empty name"},
			{"traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		}},
		{"none", &eventspb.Message{Topic: "a"}, Origin{}, []hdr{
			{"mqtt.topic", "a"}, {"mqtt.qos", "0"}, {"mqtt.retain", "false"}, {"mqtt.client_id", ""}, {"shoal.tenant", ""},
		}},
		{"empty correlation data", &eventspb.Message{Topic: "a", Qos: 1, CorrelationData: []byte{}}, Origin{ClientID: "c"}, []hdr{
			{"mqtt.topic", "a"}, {"mqtt.qos", "1"}, {"mqtt.retain", "false"}, {"mqtt.client_id", "c"}, {"shoal.tenant", ""},
			{"mqtt.correlation_data", ""},
		}},
		{"expired", &eventspb.Message{Topic: "a", HasExpiry: true, ExpiresAtMs: now.UnixMilli() - 5000}, Origin{}, []hdr{
			{"mqtt.topic", "a"}, {"mqtt.qos", "0"}, {"mqtt.retain", "false"}, {"mqtt.client_id", ""}, {"shoal.tenant", ""},
			{"mqtt.message_expiry", "1"},
		}},
		{"expiry in whole seconds", &eventspb.Message{Topic: "a", HasExpiry: true, ExpiresAtMs: now.UnixMilli() + 4_294_967_295_000}, Origin{}, []hdr{
			{"mqtt.topic", "a"}, {"mqtt.qos", "0"}, {"mqtt.retain", "false"}, {"mqtt.client_id", ""}, {"shoal.tenant", ""},
			{"mqtt.message_expiry", "4294967295"},
		}},
	} {
		hs, buf := AppendHeaders([]kafka.Header{{Key: "before"}}, []byte("old"), c.m, c.o, now)
		want := append([]hdr{{"before", ""}}, c.want...)
		if diff := cmp.Diff(want, texts(hs)); diff != "" {
			t.Errorf("%s: headers (-want +got):\n%s", c.name, diff)
		}
		if !bytes.HasPrefix(buf, []byte("old")) {
			t.Errorf("%s: buf %q lost what it held", c.name, buf)
		}
		// The values are capped slices: a caller appending to one cannot
		// overwrite the next.
		for _, h := range hs {
			if len(h.Value) != cap(h.Value) && h.Key != "mqtt.correlation_data" && h.Key != "traceparent" {
				t.Errorf("%s: value of %s has room after it (len %d, cap %d)", c.name, h.Key, len(h.Value), cap(h.Value))
			}
		}
	}
}

// TestAppendHeadersReserved: a user property of a reserved name is not
// written, so that a consumer reading the last header of a name gets the
// broker's value; names that only look alike are kept.
func TestAppendHeadersReserved(t *testing.T) {
	m := &eventspb.Message{Topic: "real/topic", UserProperties: userProps(
		"mqtt.topic", "spoofed", "shoal.tenant", "other", "mqtt.qos", "2", "shoal.message_id", "x",
		"traceparent", "00-bad", "mqtt.anything", "x",
		"MQTT.topic", "kept", "shoal-tenant", "kept", "mqtt", "kept", "traceparent2", "kept", "tracestate", "kept",
	)}
	hs, _ := AppendHeaders(nil, nil, m, Origin{Tenant: "acme", ClientID: "c"}, now)
	want := []hdr{
		{"mqtt.topic", "real/topic"}, {"mqtt.qos", "0"}, {"mqtt.retain", "false"}, {"mqtt.client_id", "c"}, {"shoal.tenant", "acme"},
		{"MQTT.topic", "kept"}, {"shoal-tenant", "kept"}, {"mqtt", "kept"}, {"traceparent2", "kept"}, {"tracestate", "kept"},
	}
	if diff := cmp.Diff(want, texts(hs)); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
	for name, want := range map[string]bool{
		"mqtt.topic": true, "mqtt.x": true, "shoal.tenant": true, "shoal.": true, "traceparent": true,
		"mqtt": false, "shoal": false, "Traceparent": false, "mqtt_topic": false, "x.mqtt.topic": false, "": false,
	} {
		if Reserved(name) != want {
			t.Errorf("Reserved(%q) = %v, want %v", name, !want, want)
		}
	}
}

// TestAppendHeadersAllocs: with room in dst and buf, AppendHeaders
// allocates nothing.
func TestAppendHeadersAllocs(t *testing.T) {
	m := &eventspb.Message{
		Topic: "plant/1/telemetry", Qos: 1, PayloadUtf8: true, HasExpiry: true, ExpiresAtMs: now.UnixMilli() + 60_000,
		ContentType: "application/json", ResponseTopic: "r", CorrelationData: []byte("id"),
		UserProperties: userProps("a", "1", "b", "2", "mqtt.qos", "drop"),
	}
	o := Origin{Tenant: "acme", ClientID: "c1", MessageID: &eventspb.MessageID{GatewayEpoch: 1, Seq: 2}, Traceparent: []byte("tp")}
	dst := make([]kafka.Header, 0, 32)
	buf := make([]byte, 0, 512)
	if n := testing.AllocsPerRun(100, func() {
		dst, buf = AppendHeaders(dst[:0], buf[:0], m, o, now)
	}); n != 0 {
		t.Errorf("%v allocations per call, want 0", n)
	}
	if len(dst) != 14 {
		t.Errorf("%d headers, want 14: %v", len(dst), texts(dst))
	}
}

func TestReadHeaders(t *testing.T) {
	hs := []kafka.Header{
		{Key: "mqtt.topic", Value: []byte("ignored/topic")},
		{Key: "mqtt.qos", Value: []byte("2")},
		{Key: "mqtt.retain", Value: []byte("true")},
		{Key: "mqtt.client_id", Value: []byte("ignored")},
		{Key: "shoal.tenant", Value: []byte("ignored")},
		{Key: "shoal.message_id", Value: []byte("ignored")},
		{Key: "mqtt.content_type", Value: []byte("text/plain")},
		{Key: "mqtt.content_type", Value: []byte("second, ignored")},
		{Key: "mqtt.payload_format", Value: []byte("1")},
		{Key: "mqtt.response_topic", Value: []byte("reply/here")},
		{Key: "mqtt.correlation_data", Value: []byte{0, 0xff}},
		{Key: "mqtt.message_expiry", Value: []byte("60")},
		{Key: "mqtt.unknown", Value: []byte("ignored")},
		{Key: "traceparent", Value: []byte("00-ignored")},
		{Key: "site", Value: []byte("north")},
		{Key: "tag", Value: []byte("a")},
		{Key: "tag", Value: nil},
		{Key: "tag", Value: []byte("b")},
	}
	m := &eventspb.Message{Topic: "set/by/caller", Qos: 1, UserProperties: userProps("stale", "x")}
	if err := ReadHeaders(m, hs, now); err != nil {
		t.Fatal(err)
	}
	want := props{
		Retain: true, PayloadUTF8: true, HasExpiry: true, ExpiresAtMs: now.UnixMilli() + 60_000,
		ContentType: "text/plain", ResponseTopic: "reply/here", CorrelationData: "\x00\xff", HasCorrelation: true,
		User: []hdr{{"site", "north"}, {"tag", "a"}, {"tag", ""}, {"tag", "b"}},
	}
	if diff := cmp.Diff(want, propsOf(m)); diff != "" {
		t.Errorf("properties (-want +got):\n%s", diff)
	}
	if m.Topic != "set/by/caller" || m.Qos != 1 {
		t.Errorf("topic %q, qos %d: ReadHeaders changed the caller's", m.Topic, m.Qos)
	}
	// m keeps no reference to the headers' bytes.
	for _, h := range hs {
		for i := range h.Value {
			h.Value[i] = '!'
		}
	}
	if diff := cmp.Diff(want, propsOf(m)); diff != "" {
		t.Errorf("after the headers' bytes changed (-want +got):\n%s", diff)
	}

	// Reused for a record without headers, m has no properties left.
	if err := ReadHeaders(m, nil, now); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(props{}, propsOf(m)); diff != "" {
		t.Errorf("reused (-want +got):\n%s", diff)
	}
	// mqtt.retain false, payload format 0, empty correlation data.
	if err := ReadHeaders(m, []kafka.Header{{Key: "mqtt.retain", Value: []byte("0")}, {Key: "mqtt.payload_format", Value: []byte("0")}, {Key: "mqtt.correlation_data"}}, now); err != nil {
		t.Fatal(err)
	}
	if m.Retain || m.PayloadUtf8 || m.CorrelationData == nil || len(m.CorrelationData) != 0 {
		t.Errorf("retain %v, payload utf8 %v, correlation data %#v; want false, false, empty", m.Retain, m.PayloadUtf8, m.CorrelationData)
	}
}

// TestReadHeadersErrors: a header that does not parse, or that MQTT cannot
// carry, is a *HeaderError naming it; the properties that did parse are
// set.
func TestReadHeadersErrors(t *testing.T) {
	for _, c := range []struct {
		h      kafka.Header
		reason string
	}{
		{kafka.Header{Key: "mqtt.message_expiry", Value: []byte("abc")}, "is not a number of seconds"},
		{kafka.Header{Key: "mqtt.message_expiry", Value: []byte("-1")}, "is not a number of seconds"},
		{kafka.Header{Key: "mqtt.message_expiry", Value: []byte("4294967296")}, "is not a number of seconds"},
		{kafka.Header{Key: "mqtt.message_expiry", Value: []byte(" 5")}, "is not a number of seconds"},
		{kafka.Header{Key: "mqtt.payload_format", Value: []byte("2")}, "is not a payload format"},
		{kafka.Header{Key: "mqtt.retain", Value: []byte("yes")}, "is not true or false"},
		{kafka.Header{Key: "mqtt.response_topic", Value: []byte("a/+")}, "is not a response topic"},
		{kafka.Header{Key: "mqtt.response_topic", Value: nil}, "is not a response topic"},
		{kafka.Header{Key: "mqtt.content_type", Value: []byte("\xff")}, "is not UTF-8 text"},
		{kafka.Header{Key: "mqtt.content_type", Value: bytes.Repeat([]byte("a"), 65536)}, "longer than 65535"},
		{kafka.Header{Key: "mqtt.correlation_data", Value: bytes.Repeat([]byte("a"), 65536)}, "longer than 65535"},
		{kafka.Header{Key: "bin", Value: []byte("a\x00b")}, "is not a user property"},
		{kafka.Header{Key: "bad\xffname", Value: []byte("v")}, "is not a user property: its name"},
	} {
		m := &eventspb.Message{}
		hs := []kafka.Header{{Key: "before", Value: []byte("1")}, c.h, {Key: "mqtt.content_type", Value: []byte("ok")}, {Key: "after", Value: []byte("2")}}
		err := ReadHeaders(m, hs, now)
		var he *HeaderError
		if !errors.As(err, &he) || he.Key != c.h.Key || !strings.Contains(he.Reason, c.reason) {
			t.Errorf("%q: %q: %v, want a *HeaderError of %q: %q", c.h.Key, c.h.Value, err, c.h.Key, c.reason)
			continue
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("%q", c.h.Key)) || len(err.Error()) > 300 {
			t.Errorf("%q: message %q does not name the header, or is too long", c.h.Key, err)
		}
		user := propsOf(m).User
		if len(user) < 2 || user[0] != (hdr{"before", "1"}) || user[len(user)-1] != (hdr{"after", "2"}) {
			t.Errorf("%q: user properties %v, want before and after kept", c.h.Key, user)
		}
		if c.h.Key != "mqtt.content_type" && m.ContentType != "ok" {
			t.Errorf("%q: content type %q, want the next header's", c.h.Key, m.ContentType)
		}
	}
}

// props are the fields of a message that the headers carry.
type props struct {
	Retain, PayloadUTF8, HasExpiry bool
	ExpiresAtMs                    int64
	ContentType, ResponseTopic     string
	CorrelationData                string
	HasCorrelation                 bool
	User                           []hdr
}

func propsOf(m *eventspb.Message) props {
	p := props{
		Retain: m.Retain, PayloadUTF8: m.PayloadUtf8, HasExpiry: m.HasExpiry, ExpiresAtMs: m.ExpiresAtMs,
		ContentType: m.ContentType, ResponseTopic: m.ResponseTopic,
		CorrelationData: string(m.CorrelationData), HasCorrelation: m.CorrelationData != nil,
	}
	for _, u := range m.UserProperties {
		p.User = append(p.User, hdr{u.Key, u.Value})
	}
	return p
}

// TestHeadersRoundTrip: a message bridged out and its record bridged in
// again has the same properties (an expiry of whole seconds, at the same
// now).
func TestHeadersRoundTrip(t *testing.T) {
	for _, m := range []*eventspb.Message{
		{Topic: "a"},
		{Topic: "a", Retain: true},
		{Topic: "a/b", Qos: 2, PayloadUtf8: true, HasExpiry: true, ExpiresAtMs: now.UnixMilli() + 3_600_000,
			ContentType: "application/json; charset=utf-8", ResponseTopic: "reply/to/me", CorrelationData: []byte{0, 1, 2, 0xff},
			UserProperties: userProps("k", "v", "k", "v2", "ünï", "cödé", "", "", "empty", "")},
		{Topic: "a", CorrelationData: []byte{}},
		{Topic: "a", HasExpiry: true, ExpiresAtMs: now.UnixMilli() + 1000},
	} {
		hs, _ := AppendHeaders(nil, nil, m, Origin{Tenant: "acme", ClientID: "c", MessageID: &eventspb.MessageID{Seq: 1}, Traceparent: []byte("tp")}, now)
		back := &eventspb.Message{}
		if err := ReadHeaders(back, hs, now); err != nil {
			t.Errorf("%v: %v", m, err)
			continue
		}
		if diff := cmp.Diff(propsOf(m), propsOf(back)); diff != "" {
			t.Errorf("%v: round trip (-out +in):\n%s", m, diff)
		}
	}
}
