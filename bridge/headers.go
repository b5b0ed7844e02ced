package bridge

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/internal/mqtt/topic"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// The headers of a bridged record: the contract with the consumers and
// producers of the mapped Kafka topics. Values are the raw text, or for
// correlation data the raw bytes.
const (
	// HeaderTopic is the MQTT topic as its client published it, without
	// the tenant.
	HeaderTopic = "mqtt.topic"
	// HeaderQoS is the QoS it was published with: "0", "1" or "2".
	HeaderQoS = "mqtt.qos"
	// HeaderRetain is "true" for a retained message, "false" otherwise.
	HeaderRetain = "mqtt.retain"
	// HeaderClientID is the publisher's client identifier.
	HeaderClientID = "mqtt.client_id"
	// HeaderTenant is the publisher's tenant ("" for the default tenant).
	HeaderTenant = "shoal.tenant"
	// HeaderMessageID is the message's identifier, as `shoal trace` takes
	// it (kafka.FormatMessageID).
	HeaderMessageID = "shoal.message_id"
	// HeaderContentType is the MQTT 5.0 Content Type.
	HeaderContentType = "mqtt.content_type"
	// HeaderPayloadFormat is the MQTT 5.0 Payload Format Indicator: "1"
	// for UTF-8 text; out writes it only then.
	HeaderPayloadFormat = "mqtt.payload_format"
	// HeaderResponseTopic is the MQTT 5.0 Response Topic.
	HeaderResponseTopic = "mqtt.response_topic"
	// HeaderCorrelationData is the MQTT 5.0 Correlation Data, raw bytes.
	HeaderCorrelationData = "mqtt.correlation_data"
	// HeaderMessageExpiry is the MQTT 5.0 Message Expiry Interval in
	// decimal seconds: what was left of it when the record was written.
	HeaderMessageExpiry = "mqtt.message_expiry"
	// HeaderTraceparent is the W3C trace context, the same header as
	// Shoal's own records carry.
	HeaderTraceparent = kafka.HeaderTraceparent
)

// Reserved reports whether a header name is the bridge's, not a user
// property's: one that starts with "mqtt." or "shoal.", or is
// "traceparent". Names are compared byte for byte, as Kafka does.
func Reserved(name string) bool {
	return strings.HasPrefix(name, "mqtt.") || strings.HasPrefix(name, "shoal.") || name == HeaderTraceparent
}

// Origin is what AppendHeaders writes of a message besides the message
// itself: who published it, its identity and its trace.
type Origin struct {
	Tenant   string
	ClientID string
	// MessageID is the message's identifier; nil writes no
	// shoal.message_id.
	MessageID *eventspb.MessageID
	// Traceparent is the message's W3C trace context; empty writes no
	// traceparent.
	Traceparent []byte
}

// AppendHeaders appends the headers of the record that bridges m out to
// dst, and their values to buf, and returns both. At now, a message with an
// expiry gets what is left of it, in whole seconds rounded up, as a gateway
// forwards it; one that has expired gets 1 (dropping it is the caller's
// choice).
//
// In order: mqtt.topic, mqtt.qos, mqtt.retain, mqtt.client_id,
// shoal.tenant, shoal.message_id; the MQTT 5.0 properties m has
// (mqtt.content_type, mqtt.payload_format, mqtt.response_topic,
// mqtt.correlation_data, mqtt.message_expiry); every user property as a
// header of its own name, in order, repeats kept; traceparent.
//
// A user property whose name is reserved (Reserved: "mqtt.qos",
// "shoal.tenant", "traceparent") is dropped: a consumer that takes the
// last header of a name, as Kafka's Headers.lastHeader does, must not
// read a publisher's value for the broker's.
//
// The values of the headers alias buf, m.CorrelationData and
// o.Traceparent: none may change until the record is produced. buf grows
// once at most; with room in dst and buf, AppendHeaders does not allocate.
func AppendHeaders(dst []kafka.Header, buf []byte, m *eventspb.Message, o Origin, now time.Time) ([]kafka.Header, []byte) {
	n := len(m.Topic) + len("0") + len("false") + len(o.ClientID) + len(o.Tenant) + len(m.ContentType) + len("1") + len(m.ResponseTopic) + len("4294967295")
	if o.MessageID != nil {
		n += 16 + 1 + 20
	}
	for _, u := range m.UserProperties {
		n += len(u.GetValue())
	}
	buf = slices.Grow(buf, n)
	add := func(key string, from int) {
		dst = append(dst, kafka.Header{Key: key, Value: buf[from:len(buf):len(buf)]})
	}
	str := func(key, v string) {
		from := len(buf)
		buf = append(buf, v...)
		add(key, from)
	}
	str(HeaderTopic, m.Topic)
	from := len(buf)
	buf = strconv.AppendUint(buf, uint64(m.Qos), 10)
	add(HeaderQoS, from)
	from = len(buf)
	buf = strconv.AppendBool(buf, m.Retain)
	add(HeaderRetain, from)
	str(HeaderClientID, o.ClientID)
	str(HeaderTenant, o.Tenant)
	if id := o.MessageID; id != nil {
		from = len(buf)
		buf = kafka.AppendMessageID(buf, id.GatewayEpoch, id.Seq)
		add(HeaderMessageID, from)
	}
	if m.ContentType != "" {
		str(HeaderContentType, m.ContentType)
	}
	if m.PayloadUtf8 {
		str(HeaderPayloadFormat, "1")
	}
	if m.ResponseTopic != "" {
		str(HeaderResponseTopic, m.ResponseTopic)
	}
	if m.CorrelationData != nil {
		dst = append(dst, kafka.Header{Key: HeaderCorrelationData, Value: m.CorrelationData})
	}
	if m.HasExpiry {
		from = len(buf)
		buf = strconv.AppendUint(buf, uint64(remainingExpiry(m.ExpiresAtMs, now)), 10)
		add(HeaderMessageExpiry, from)
	}
	for _, u := range m.UserProperties {
		if k := u.GetKey(); !Reserved(k) {
			str(k, u.GetValue())
		}
	}
	if len(o.Traceparent) > 0 {
		dst = append(dst, kafka.Header{Key: HeaderTraceparent, Value: o.Traceparent})
	}
	return dst, buf
}

// remainingExpiry is what is left at now of an expiry at expiresAtMs, in
// seconds rounded up, at least 1 (gateway/outbound.go forwards the same).
func remainingExpiry(expiresAtMs int64, now time.Time) uint32 {
	left := (expiresAtMs - now.UnixMilli() + 999) / 1000
	return uint32(min(max(left, 1), math.MaxUint32))
}

// HeaderError is a record header that a bridged-in record cannot carry
// into MQTT: Key names it (for a user property, the header's name), Reason
// says why in words. Its Error quotes at most 64 bytes of the value.
type HeaderError struct {
	Key    string
	Value  []byte
	Reason string
}

func (e *HeaderError) Error() string {
	v := e.Value
	more := ""
	if len(v) > 64 {
		v, more = v[:64], "…"
	}
	return fmt.Sprintf("header %q: %q%s %s", e.Key, v, more, e.Reason)
}

// maxString is the longest MQTT string or binary data: a two-byte length.
const maxString = 65535

// ReadHeaders sets the MQTT 5.0 properties and the retain flag of m from
// the headers of a record that is bridged in, at now (for the expiry), the
// reverse of AppendHeaders:
//
//   - mqtt.content_type, mqtt.response_topic (a topic name), and
//     mqtt.correlation_data set those properties; mqtt.payload_format "1"
//     marks the payload as UTF-8 text ("0" as bytes);
//   - mqtt.message_expiry, decimal seconds, sets HasExpiry and ExpiresAtMs
//     that far from now;
//   - mqtt.retain, a boolean (true, false, 1, 0 as strconv.ParseBool), set
//     to true makes the message retained;
//   - every header that is not reserved (Reserved) is a user property, in
//     order, repeats kept.
//
// mqtt.qos is not read: the mapping's qos is the message's. Nor are
// mqtt.topic (mqtt_topic renders the topic; {header.mqtt.topic} takes it),
// mqtt.client_id, shoal.* and traceparent, nor any other reserved name. Of
// a reserved header that repeats, the first counts, as for
// {header.NAME}.
//
// The topic, payload and QoS are the caller's to set; ReadHeaders sets the
// other fields above, so m can be reused. Every value is copied: m does not
// alias the headers. A header that does not parse, or that MQTT cannot
// carry (a user property, content type or response topic that is not a
// UTF-8 string without U+0000, a value longer than 65535 bytes), is
// skipped, and the first such is returned as a *HeaderError: m then holds
// every property that did parse, and the caller decides whether to publish
// it or to count and skip the record.
func ReadHeaders(m *eventspb.Message, headers []kafka.Header, now time.Time) error {
	m.Retain, m.PayloadUtf8, m.HasExpiry, m.ExpiresAtMs = false, false, false, 0
	m.ContentType, m.ResponseTopic, m.CorrelationData, m.UserProperties = "", "", nil, nil
	var first *HeaderError
	fail := func(h kafka.Header, reason string) {
		if first == nil {
			first = &HeaderError{Key: h.Key, Value: h.Value, Reason: reason}
		}
	}
	var seen uint8 // which reserved headers were read, by bit
	once := func(bit uint8) bool {
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	}
	for _, h := range headers {
		v := h.Value
		switch h.Key {
		case HeaderRetain:
			if once(1) {
				b, err := strconv.ParseBool(string(v))
				if err != nil {
					fail(h, "is not true or false")
				}
				m.Retain = b
			}
		case HeaderPayloadFormat:
			if once(2) {
				switch string(v) {
				case "0":
				case "1":
					m.PayloadUtf8 = true
				default:
					fail(h, "is not a payload format: 0 (bytes) or 1 (UTF-8)")
				}
			}
		case HeaderMessageExpiry:
			if once(4) {
				s, err := strconv.ParseUint(string(v), 10, 32)
				if err != nil {
					fail(h, "is not a number of seconds from 0 to 4294967295")
					break
				}
				m.HasExpiry, m.ExpiresAtMs = true, now.UnixMilli()+int64(s)*1000
			}
		case HeaderContentType:
			if once(8) {
				if why := mqttString(v); why != "" {
					fail(h, why)
					break
				}
				m.ContentType = string(v)
			}
		case HeaderResponseTopic:
			if once(16) {
				if err := topic.ValidateName(string(v)); err != nil {
					fail(h, "is not a response topic: "+err.Error())
					break
				}
				m.ResponseTopic = string(v)
			}
		case HeaderCorrelationData:
			if once(32) {
				if len(v) > maxString {
					fail(h, "is longer than 65535 bytes")
					break
				}
				m.CorrelationData = append(make([]byte, 0, len(v)), v...)
			}
		default:
			if Reserved(h.Key) {
				continue
			}
			if len(h.Key) > maxString || !utf8.ValidString(h.Key) || strings.IndexByte(h.Key, 0) >= 0 {
				fail(h, "is not a user property: its name is not an MQTT UTF-8 string")
				continue
			}
			if why := mqttString(v); why != "" {
				fail(h, "is not a user property: "+why)
				continue
			}
			m.UserProperties = append(m.UserProperties, &eventspb.UserProperty{Key: h.Key, Value: string(v)})
		}
	}
	if first != nil {
		return first
	}
	return nil
}

// mqttString says why v cannot be an MQTT UTF-8 string, "" when it can.
func mqttString(v []byte) string {
	switch {
	case len(v) > maxString:
		return "is longer than 65535 bytes"
	case !packet.ValidUTF8(v):
		return "is not UTF-8 text without U+0000"
	}
	return ""
}
