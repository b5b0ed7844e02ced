package kafka

import (
	"fmt"

	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// Record headers Shoal sets.
const (
	// HeaderType holds the envelope's event type (EventPublish, …) so
	// that tools can filter records without decoding them.
	HeaderType = "shoal-type"
	// HeaderTraceparent holds the W3C trace context of the event.
	HeaderTraceparent = "traceparent"
)

// Event types: the names of the Envelope's event oneof cases, as carried in
// HeaderType.
const (
	EventPublish              = "publish"
	EventSubscriptionChange   = "subscription_change"
	EventConnect              = "connect"
	EventConnectResult        = "connect_result"
	EventPresence             = "presence"
	EventDisconnect           = "disconnect"
	EventKick                 = "kick"
	EventDelivery             = "delivery"
	EventSessionSubscriptions = "session_subscriptions"
	EventGatewayHeartbeat     = "gateway_heartbeat"
	EventSessionTick          = "session_tick"
	EventInboxAppend          = "inbox_append"
	EventSharedRedispatch     = "shared_redispatch"
	EventInboxAck             = "inbox_ack"
)

// EnvelopeType returns the event type of env, "" when it has no event.
func EnvelopeType(env *eventspb.Envelope) string {
	switch env.GetEvent().(type) {
	case *eventspb.Envelope_Publish:
		return EventPublish
	case *eventspb.Envelope_SubscriptionChange:
		return EventSubscriptionChange
	case *eventspb.Envelope_Connect:
		return EventConnect
	case *eventspb.Envelope_ConnectResult:
		return EventConnectResult
	case *eventspb.Envelope_Presence:
		return EventPresence
	case *eventspb.Envelope_Disconnect:
		return EventDisconnect
	case *eventspb.Envelope_Kick:
		return EventKick
	case *eventspb.Envelope_Delivery:
		return EventDelivery
	case *eventspb.Envelope_SessionSubscriptions:
		return EventSessionSubscriptions
	case *eventspb.Envelope_GatewayHeartbeat:
		return EventGatewayHeartbeat
	case *eventspb.Envelope_SessionTick:
		return EventSessionTick
	case *eventspb.Envelope_InboxAppend:
		return EventInboxAppend
	case *eventspb.Envelope_SharedRedispatch:
		return EventSharedRedispatch
	case *eventspb.Envelope_InboxAck:
		return EventInboxAck
	}
	return ""
}

// newRecord is a Record allocated together with its produce state and room
// for two headers (the type and a traceparent), so that NewRecord costs two
// allocations: this and the value.
type newRecord struct {
	r    Record
	st   produceState
	hdrs [2]Header
}

// NewRecord returns a record for topic carrying env: the value is env
// marshalled with vtprotobuf and the HeaderType header names its event.
// partition is Record.Partition: on keyed topics PartitionByKey (the key
// decides) or an explicit partition (to broadcast one event to every
// partition); on the others the partition. The record refers to key without
// copying it.
func NewRecord(topic string, key []byte, partition int32, env *eventspb.Envelope) *Record {
	nr := &newRecord{}
	r := &nr.r
	r.st = &nr.st
	r.Topic, r.Key, r.Partition = topic, key, partition
	// One buffer holds the value and, after it, the type header's value.
	t := EnvelopeType(env)
	size := env.SizeVT()
	buf := make([]byte, size+len(t))
	n, err := env.MarshalToSizedBufferVT(buf[:size])
	if err != nil || n != size {
		// vtprotobuf's marshalling of a sized buffer fails only on a
		// bug in the generated code: nothing a caller can handle.
		panic(fmt.Sprintf("kafka: marshal envelope: wrote %d of %d bytes: %v", n, size, err))
	}
	r.Value = buf[:size:size]
	r.Headers = nr.hdrs[:0]
	if t != "" {
		copy(buf[size:], t)
		r.Headers = append(r.Headers, Header{Key: HeaderType, Value: buf[size:]})
	}
	return r
}

// WithTraceparent sets r's traceparent header to tp (W3C trace context),
// replacing one already there.
func WithTraceparent(r *Record, tp string) {
	for i := range r.Headers {
		if r.Headers[i].Key == HeaderTraceparent {
			r.Headers[i].Value = []byte(tp)
			return
		}
	}
	r.Headers = append(r.Headers, Header{Key: HeaderTraceparent, Value: []byte(tp)})
}

// Traceparent returns r's traceparent header, "" when it has none.
func Traceparent(r *Record) string {
	if v, ok := header(r, HeaderTraceparent); ok {
		return string(v)
	}
	return ""
}

// EventType returns r's HeaderType header, "" when it has none. Known types
// are returned without allocating.
func EventType(r *Record) string {
	v, ok := header(r, HeaderType)
	if !ok {
		return ""
	}
	switch string(v) {
	case EventPublish:
		return EventPublish
	case EventSubscriptionChange:
		return EventSubscriptionChange
	case EventConnect:
		return EventConnect
	case EventConnectResult:
		return EventConnectResult
	case EventPresence:
		return EventPresence
	case EventDisconnect:
		return EventDisconnect
	case EventKick:
		return EventKick
	case EventDelivery:
		return EventDelivery
	case EventSessionSubscriptions:
		return EventSessionSubscriptions
	case EventGatewayHeartbeat:
		return EventGatewayHeartbeat
	case EventSessionTick:
		return EventSessionTick
	case EventInboxAppend:
		return EventInboxAppend
	case EventSharedRedispatch:
		return EventSharedRedispatch
	case EventInboxAck:
		return EventInboxAck
	}
	return string(v)
}

func header(r *Record, key string) ([]byte, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return h.Value, true
		}
	}
	return nil, false
}

// DecodeEnvelope resets env and decodes r's value into it with vtprotobuf's
// UnmarshalVTUnsafe: env's bytes fields and strings alias r.Value, without
// copies. env is therefore valid only as long as r.Value is unchanged, and
// keeps r.Value's memory alive; copy what must outlive the record (or
// decode a clone of the value).
func DecodeEnvelope(r *Record, env *eventspb.Envelope) error {
	env.Reset()
	if err := env.UnmarshalVTUnsafe(r.Value); err != nil {
		return fmt.Errorf("decode envelope of %s/%d at offset %d: %w", r.Topic, r.Partition, r.Offset, err)
	}
	return nil
}
