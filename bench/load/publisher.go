package load

import (
	"context"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

// PublisherConfig says how to open a [Publisher].
type PublisherConfig struct {
	Addr      string // broker address, host:port
	ClientID  string
	Version   packet.Version // V5 (the zero value is not valid: set it)
	KeepAlive time.Duration
	// Inflight bounds the QoS 1/2 messages sent and not yet acknowledged
	// (also capped by the broker's receive maximum).
	Inflight int
}

// Publisher is the generator's client as a publisher alone, for tools that
// make their own payloads and read the deliveries elsewhere (another
// protocol, another process): the scenarios' buffered writes and
// acknowledgement handling, without their plan. One goroutine publishes;
// the counters may be read from any.
type Publisher struct {
	c *conn
}

// DialPublisher connects a publisher within ctx's deadline.
func DialPublisher(ctx context.Context, cfg PublisherConfig) (*Publisher, error) {
	c, err := dial(ctx, dialConfig{
		Addr: cfg.Addr, ClientID: cfg.ClientID, Version: cfg.Version,
		KeepAlive: uint16(cfg.KeepAlive / time.Second), ReadBuf: pubReadBuf, WriteBuf: pubWriteBuf,
		ReceiveMax: recvMaxAsked,
	})
	if err != nil {
		return nil, err
	}
	c.enableWindow(max(cfg.Inflight, 1))
	c.start()
	return &Publisher{c: c}, nil
}

// Publish buffers one PUBLISH. At QoS 1/2 it first waits for room in the
// in-flight window (flushing while it waits) until stop is closed or the
// connection ends. The topic and payload may be reused once it returns.
func (p *Publisher) Publish(topic, payload []byte, qos packet.QoS, stop <-chan struct{}) error {
	return p.c.publish(topic, payload, qos, stop)
}

// Flush writes what is buffered.
func (p *Publisher) Flush() error { return p.c.flush() }

// Acked returns the number of QoS 1/2 messages the broker acknowledged
// with success (PUBACK, PUBCOMP).
func (p *Publisher) Acked() uint64 { return p.c.acked.Load() }

// Refused returns the number of acknowledgements with a failure code.
func (p *Publisher) Refused() uint64 { return p.c.refused.Load() }

// InFlight returns the QoS 1/2 messages sent and not yet acknowledged.
func (p *Publisher) InFlight() int { return len(p.c.slots) }

// Err returns why the connection ended, or nil while it is open or after
// Close.
func (p *Publisher) Err() error { return p.c.lostErr() }

// Close sends DISCONNECT (best effort) and closes the connection.
func (p *Publisher) Close() { p.c.close() }

// NewLatencyHistogram returns an empty histogram of the generator's
// latencies: microseconds from 1 µs to 100 s, 3 significant digits.
func NewLatencyHistogram() *hdrhistogram.Histogram { return newHist() }

// RecordLatency records a latency in nanoseconds into h, clamped to its
// range.
func RecordLatency(h *hdrhistogram.Histogram, ns int64) {
	_ = h.RecordValue(min(max(ns/1000, histMin), histMax)) // in range by construction
}

// SummarizeLatency returns h's percentiles and CDF as the generator's
// results give them, or nil when h is empty.
func SummarizeLatency(h *hdrhistogram.Histogram) *LatencySummary { return summarize(h) }
