package load_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/bench/load"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

// TestPublisherAcked publishes QoS 1 messages through a window smaller
// than their number to an in-process Shoal and checks that the broker
// acknowledged every one, and that QoS 0 messages are not counted.
func TestPublisherAcked(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker: skipped with -short")
	}
	addr := startShoal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := load.DialPublisher(ctx, load.PublisherConfig{Addr: addr, ClientID: "pubtest-p-0", Version: packet.V5, Inflight: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const n = 50
	for i := range n {
		if err := p.Publish([]byte("pubtest/a"), fmt.Appendf(nil, "m%d", i), 1, ctx.Done()); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		if err := p.Publish([]byte("pubtest/b"), []byte("qos 0"), 0, ctx.Done()); err != nil {
			t.Fatalf("publish %d at QoS 0: %v", i, err)
		}
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	for p.Acked() < n || p.InFlight() > 0 {
		if !load.Sleep(ctx, 10*time.Millisecond) {
			t.Fatalf("%d of %d acknowledged, %d in flight: %v", p.Acked(), n, p.InFlight(), p.Err())
		}
	}
	if p.Acked() != n || p.Refused() != 0 || p.Err() != nil {
		t.Errorf("acked %d, refused %d, err %v; want %d, 0, nil", p.Acked(), p.Refused(), p.Err(), n)
	}
	h := load.NewLatencyHistogram()
	load.RecordLatency(h, int64(3*time.Millisecond))
	load.RecordLatency(h, -5) // clamped to the histogram's least value
	if s := load.SummarizeLatency(h); s == nil || s.Count != 2 || s.Max < 2990 || s.Max > 3010 || s.Min != 1 {
		t.Errorf("summary %+v, want 2 samples, 1 µs to 3 ms", s)
	}
}
