package gateway

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/internal/obs"
)

// The gateway's instruments (its Stats are /metrics' legacy counters,
// registered by compose/broker): PUBACK latency, publish → delivery
// latency, dropped messages by cause, and CONNACKs by result and reason.
// They are made once, by New; recording allocates nothing (the
// attribute options are made once per cause, per reason and tenant).

// gatewayMetrics are the gateway's instruments. The zero value is not
// usable: newGatewayMetrics makes them, noop ones without telemetry.
type gatewayMetrics struct {
	puback   metric.Float64Histogram
	delivery metric.Float64Histogram
	drops    *obs.Drops
	connects metric.Int64Counter
	held     metric.Float64Counter // time readers waited for the router (conn.waitRoom)
	tenants  *obs.Tenants

	mu       sync.RWMutex
	connOpts map[connectKey][]metric.AddOption
}

// connectKey names one series of shoal.gateway.connects: the tenant's
// label (capped by obs.Tenants; known is false before the handshake
// learned the tenant) and the CONNACK's reason code.
type connectKey struct {
	tenant string
	known  bool
	code   packet.ReasonCode
}

// newGatewayMetrics makes the gateway's instruments on p's meter. An
// instrument the SDK refuses (it cannot with these names) is logged by
// the caller and replaced by a noop one.
func newGatewayMetrics(p obs.Providers) (*gatewayMetrics, error) {
	m := p.Meter.Meter(obs.Scope)
	gm := &gatewayMetrics{tenants: p.Tenants, connOpts: make(map[connectKey][]metric.AddOption)}
	var errs [5]error
	gm.puback, errs[0] = m.Float64Histogram("shoal.gateway.puback.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from a QoS 1 or 2 PUBLISH read to its PUBACK or PUBREC queued for the client, the log write included."),
		metric.WithExplicitBucketBoundaries(obs.LatencyBuckets...))
	gm.delivery, errs[1] = m.Float64Histogram("shoal.delivery.latency", metric.WithUnit("s"),
		metric.WithDescription("Time from a message's PUBLISH read by a gateway to its PUBLISH queued for a subscriber connected when it was routed."),
		metric.WithExplicitBucketBoundaries(obs.LatencyBuckets...))
	gm.drops, errs[2] = obs.NewDrops(m)
	gm.connects, errs[3] = m.Int64Counter("shoal.gateway.connects", metric.WithUnit("{connect}"),
		metric.WithDescription("CONNECTs answered, by result (accepted, refused), the CONNACK's reason and the tenant."))
	gm.held, errs[4] = m.Float64Counter("shoal.gateway.publish.held", metric.WithUnit("s"),
		metric.WithDescription("Time the readers of publishing clients waited, before writing a PUBLISH, for the router of the process to catch up (more than kafka.FeedMaxBacklog records behind on the publish's partition): the pace of a client publishing faster than `shoal all` routes."))
	for _, err := range errs {
		if err != nil {
			return gm, err
		}
	}
	return gm, nil
}

// acked records the PUBACK latency of ack, a PUBACK or PUBREC being
// queued now (clock's time); acknowledgements without a reception time
// (refusals, repeats, PUBCOMP) are not measured.
func (m *gatewayMetrics) acked(ack *pendingAck, clock func() time.Time) {
	if ack.received == 0 {
		return
	}
	m.puback.Record(context.Background(), obs.Seconds(clock().UnixNano()-ack.received))
}

// delivered records the publish → delivery latency of one message
// delivered to one subscriber at now, published at publishedUs (unix µs;
// 0 for a delivery that carries no publish time: not measured). ctx is
// the delivery's: a sampled span in it becomes the exemplar.
func (m *gatewayMetrics) delivered(ctx context.Context, now time.Time, publishedUs int64) {
	if publishedUs == 0 {
		return
	}
	m.delivery.Record(ctx, obs.Seconds((now.UnixMicro()-publishedUs)*1000))
}

// connected counts the CONNACK the handshake of c answered with code.
func (m *gatewayMetrics) connected(c *conn, code packet.ReasonCode) {
	// The tenant is known once identify set the client's key; before
	// that (a malformed CONNECT, bad credentials) the client's claim is
	// not trusted with a label.
	k := connectKey{code: code}
	if c.clientsKey != "" {
		k.tenant, k.known = m.tenants.Label(c.tenant), true
	}
	m.mu.RLock()
	opts, ok := m.connOpts[k]
	m.mu.RUnlock()
	if !ok {
		opts = m.connectOptions(k)
	}
	m.connects.Add(context.Background(), 1, opts...)
}

// connectOptions returns the attribute options of k's series, making them.
func (m *gatewayMetrics) connectOptions(k connectKey) []metric.AddOption {
	m.mu.Lock()
	defer m.mu.Unlock()
	if opts, ok := m.connOpts[k]; ok {
		return opts
	}
	result := "accepted"
	if k.code.IsError() {
		result = "refused"
	}
	attrs := []attribute.KeyValue{attribute.String("result", result), attribute.String("reason", connackReason(k.code))}
	if k.known {
		attrs = append(attrs, attribute.String("tenant", k.tenant))
	}
	opts := []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attrs...))}
	m.connOpts[k] = opts
	return opts
}

// connackReasons name the reason codes a CONNACK may carry (MQTT 5.0
// §3.2.2.2) in shoal.gateway.connects' reason attribute. A 3.1.1 client
// gets the return code the 5.0 code maps to; the attribute keeps the 5.0
// name. The names are read by dashboards: never renamed.
var connackReasons = map[packet.ReasonCode]string{
	packet.CodeSuccess:                     "success",
	packet.CodeUnspecifiedError:            "unspecified_error",
	packet.CodeMalformedPacket:             "malformed_packet",
	packet.CodeProtocolError:               "protocol_error",
	packet.CodeImplementationSpecificError: "implementation_specific_error",
	packet.CodeUnsupportedProtocolVersion:  "unsupported_protocol_version",
	packet.CodeClientIdentifierNotValid:    "client_identifier_not_valid",
	packet.CodeBadUserNameOrPassword:       "bad_username_or_password",
	packet.CodeNotAuthorized:               "not_authorized",
	packet.CodeServerUnavailable:           "server_unavailable",
	packet.CodeServerBusy:                  "server_busy",
	packet.CodeBanned:                      "banned",
	packet.CodeBadAuthenticationMethod:     "bad_authentication_method",
	packet.CodeTopicNameInvalid:            "topic_name_invalid",
	packet.CodePacketTooLarge:              "packet_too_large",
	packet.CodeQuotaExceeded:               "quota_exceeded",
	packet.CodePayloadFormatInvalid:        "payload_format_invalid",
	packet.CodeRetainNotSupported:          "retain_not_supported",
	packet.CodeQoSNotSupported:             "qos_not_supported",
	packet.CodeUseAnotherServer:            "use_another_server",
	packet.CodeServerMoved:                 "server_moved",
	packet.CodeConnectionRateExceeded:      "connection_rate_exceeded",
}

// connackReason returns code's name in shoal.gateway.connects; "other"
// for a code no CONNACK carries, so that the attribute stays a bounded
// set.
func connackReason(code packet.ReasonCode) string {
	if s, ok := connackReasons[code]; ok {
		return s
	}
	return "other"
}

// drop counts a message dropped for cause: in the gateway's Stats
// (Dropped, the legacy counter, which counts the causes the gateway always
// counted) and in shoal.messages.dropped.
func (c *conn) drop(cause obs.DropCause) {
	c.add(Dropped, 1)
	c.g.met.drops.Add(cause, 1)
}
