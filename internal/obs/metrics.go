package obs

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// DropCause is why a message was dropped: the cause attribute of
// shoal.messages.dropped, which every role counts into. Its names are read
// by dashboards and alerts: a cause may be added, never renamed.
type DropCause uint8

// The causes of a dropped message.
const (
	// DropBufferFull: a QoS 0 message for a client whose out buffer held
	// gateway.max_out_buffer bytes.
	DropBufferFull DropCause = iota
	// DropQueueFull: a QoS 1/2 message for a client whose queue held
	// gateway.max_queued messages; the client is disconnected.
	DropQueueFull
	// DropPacketTooLarge: a message above the client's Maximum Packet
	// Size.
	DropPacketTooLarge
	// DropSessionEnded: a QoS 1/2 message in flight to a client whose
	// non-persistent session ended with its connection.
	DropSessionEnded
	// DropACL: the ACL refused a PUBLISH, or a message to one subscriber.
	DropACL
	// DropExpired: the message's expiry interval passed before it could
	// be routed or sent.
	DropExpired
	// DropInboxFull: a message for an offline session whose inbox held
	// session.max_inbox messages.
	DropInboxFull
	numDropCauses
)

var dropCauseNames = [numDropCauses]string{
	DropBufferFull:     "buffer_full",
	DropQueueFull:      "queue_full",
	DropPacketTooLarge: "packet_too_large",
	DropSessionEnded:   "session_ended",
	DropACL:            "acl",
	DropExpired:        "expired",
	DropInboxFull:      "inbox_full",
}

// String returns the cause's attribute value.
func (c DropCause) String() string {
	if c < numDropCauses {
		return dropCauseNames[c]
	}
	return "unknown"
}

// Drops counts dropped messages by cause: the counter
// shoal.messages.dropped, its attribute options made once so that Add
// allocates nothing. A nil *Drops counts nothing.
type Drops struct {
	c    metric.Int64Counter
	opts [numDropCauses][]metric.AddOption
}

// NewDrops makes the counter on m.
func NewDrops(m metric.Meter) (*Drops, error) {
	c, err := m.Int64Counter("shoal.messages.dropped", metric.WithUnit("{message}"),
		metric.WithDescription("Messages dropped, by cause: a client's buffer or queue full, too large for the client, its session ended, refused by the ACL, expired, an offline session's inbox full."))
	if err != nil {
		return nil, err
	}
	d := &Drops{c: c}
	for i := range d.opts {
		d.opts[i] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("cause", DropCause(i).String())))}
		// Every cause has its series from the start, at 0: a rate over
		// it, or an alert on it, needs no first drop to work.
		c.Add(context.Background(), 0, d.opts[i]...)
	}
	return d, nil
}

// Add counts n messages dropped for cause.
func (d *Drops) Add(cause DropCause, n int64) {
	if d == nil || cause >= numDropCauses {
		return
	}
	d.c.Add(context.Background(), n, d.opts[cause]...)
}

// Label returns the tenant label value of tenant t: t itself, or
// OtherTenant once the cap is reached (see Set).
func (ts *Tenants) Label(t string) string {
	s := ts.Set(t)
	v, _ := s.Value("tenant")
	return v.AsString()
}

// CountBuckets are the bucket bounds of Shoal's histograms of counts per
// message (subscriptions matched, records of a fan-out).
var CountBuckets = []float64{0, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 10000, 100000}

// Seconds converts a duration in nanoseconds to seconds, never below 0
// (two clocks apart, or a clock stepped back).
func Seconds(ns int64) float64 {
	if ns <= 0 {
		return 0
	}
	return float64(ns) / 1e9
}
