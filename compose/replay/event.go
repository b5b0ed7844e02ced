package replay

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// Event is one selected record as the sinks see it. It is reused from one
// record to the next: a sink copies what it keeps.
type Event struct {
	KafkaTopic string
	Partition  int32
	Offset     int64
	// Time is when the event was produced (the envelope's timestamp, else
	// the record's).
	Time time.Time
	Type string
	Env  *eventspb.Envelope
	// Message is the message the event carries (a publish, a delivery, an
	// inbox entry, a redispatch, a will), nil when none.
	Message *eventspb.Message
}

func (e *Event) fill(r *kafka.Record, env *eventspb.Envelope) {
	e.KafkaTopic, e.Partition, e.Offset = r.Topic, r.Partition, r.Offset
	e.Time = r.Timestamp
	if env.TimestampUs != 0 {
		e.Time = time.UnixMicro(env.TimestampUs)
	}
	e.Type = kafka.EnvelopeType(env)
	if tombstone(r) {
		e.Type = TypeTombstone
	}
	e.Env, e.Message = env, messageOf(env)
}

// TypeTombstone is the type of a record without a value on a compacted
// topic: the deletion of what its key names (a client's presence, when
// its session ended with its connection; a gateway's quota report).
const TypeTombstone = "tombstone"

// tombstone reports whether r is a tombstone: a keyed record with no value.
func tombstone(r *kafka.Record) bool { return r.Value == nil && len(r.Key) > 0 }

// recordType is the event type of r: its type header, or TypeTombstone.
func recordType(r *kafka.Record) string {
	if tombstone(r) {
		return TypeTombstone
	}
	return kafka.EventType(r)
}

// decode decodes r's envelope into env. A tombstone has none: env gets the
// tenant and the rest of its key instead, for the filters and the sinks
// (the client id; the gateway id on quotas, the name shoal.quotas has).
func decode(r *kafka.Record, env *eventspb.Envelope, quotas string) error {
	if !tombstone(r) {
		return kafka.DecodeEnvelope(r, env)
	}
	env.Reset()
	tenant, rest, err := kafka.SplitKey(r.Key)
	if err != nil {
		return fmt.Errorf("tombstone key: %w", err)
	}
	env.Tenant = string(tenant)
	if r.Topic == quotas {
		env.Gateway = string(rest)
	} else {
		env.ClientId = string(rest)
	}
	return nil
}

// JSONSink writes one JSON object a line. The field names are stable:
// kafka_topic, partition, offset, time (RFC 3339, UTC), type, tenant,
// client_id, gateway, message_id, and for an event that carries a message
// topic, qos, retain and payload (UTF-8 text, or base64 with
// payload_base64: true); then "event", the event's own fields as protobuf
// JSON with the proto field names (the message's payload left out: it is
// in payload).
type JSONSink struct {
	w   *bufio.Writer
	buf []byte
	pj  protojson.MarshalOptions
}

// NewJSONSink returns a JSONSink writing to w.
func NewJSONSink(w io.Writer) *JSONSink {
	return &JSONSink{w: bufio.NewWriterSize(w, 64<<10), pj: protojson.MarshalOptions{UseProtoNames: true}}
}

// Write writes e as one line.
func (s *JSONSink) Write(e *Event) error {
	b, err := s.appendEvent(s.buf[:0], e)
	if err != nil {
		return err
	}
	s.buf = b
	_, err = s.w.Write(b)
	return err
}

// Flush writes out the buffered lines.
func (s *JSONSink) Flush() error { return s.w.Flush() }

func (s *JSONSink) appendEvent(b []byte, e *Event) ([]byte, error) {
	env := e.Env
	b = append(b, `{"kafka_topic":`...)
	b = appendString(b, e.KafkaTopic)
	b = append(b, `,"partition":`...)
	b = strconv.AppendInt(b, int64(e.Partition), 10)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, e.Offset, 10)
	b = append(b, `,"time":"`...)
	b = e.Time.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","type":`...)
	b = appendString(b, e.Type)
	b = append(b, `,"tenant":`...)
	b = appendString(b, env.Tenant)
	b = append(b, `,"client_id":`...)
	b = appendString(b, env.ClientId)
	if env.Gateway != "" {
		b = append(b, `,"gateway":`...)
		b = appendString(b, env.Gateway)
	}
	if id := env.GetMessageId(); id != nil {
		b = append(b, `,"message_id":"`...)
		b = kafka.AppendMessageID(b, id.GatewayEpoch, id.Seq)
		b = append(b, '"')
	}
	var payload []byte
	if m := e.Message; m != nil {
		b = append(b, `,"topic":`...)
		b = appendString(b, m.Topic)
		b = append(b, `,"qos":`...)
		b = strconv.AppendUint(b, uint64(m.Qos), 10)
		b = append(b, `,"retain":`...)
		b = strconv.AppendBool(b, m.Retain)
		b = appendPayload(b, m.Payload)
		// The body below leaves the payload out: it is above.
		payload, m.Payload = m.Payload, nil
	}
	if body := kafka.EventBody(env); body != nil {
		j, err := s.pj.Marshal(body)
		if e.Message != nil {
			e.Message.Payload = payload
		}
		if err != nil {
			return b, fmt.Errorf("event %s at %s/%d/%d: %w", e.Type, e.KafkaTopic, e.Partition, e.Offset, err)
		}
		b = append(b, `,"event":`...)
		start := len(b)
		b = append(b, j...)
		// protojson varies its whitespace on purpose; one line, always the
		// same bytes for the same event.
		b = compactJSON(b, start)
	}
	return append(b, "}\n"...), nil
}

// appendPayload appends the payload field: text when it is valid UTF-8,
// else base64 with payload_base64.
func appendPayload(b, p []byte) []byte {
	if utf8.Valid(p) {
		b = append(b, `,"payload":`...)
		return appendString(b, string(p))
	}
	b = append(b, `,"payload":"`...)
	b = base64.StdEncoding.AppendEncode(b, p)
	return append(b, `","payload_base64":true`...)
}

// compactJSON removes the insignificant whitespace of the JSON value at
// b[start:], in place.
func compactJSON(b []byte, start int) []byte {
	w, inString, escaped := start, false, false
	for _, c := range b[start:] {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ' || c == '\n' || c == '\t' || c == '\r':
			continue
		}
		b[w] = c
		w++
	}
	return b[:w]
}

// appendString appends s as a JSON string (invalid UTF-8 as U+FFFD).
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				switch c {
				case '\n':
					b = append(b, '\\', 'n')
				case '\r':
					b = append(b, '\\', 'r')
				case '\t':
					b = append(b, '\\', 't')
				default:
					b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
				}
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}
