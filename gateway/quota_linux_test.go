//go:build linux

package gateway

import (
	"fmt"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/gateway/quota"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
)

// TestThrottleParked: a parked connection, woken by a burst of publishes
// beyond its tenant's message rate, waits for the rate on a reader of its
// own (a poller's worker never waits) and loses nothing.
func TestThrottleParked(t *testing.T) {
	g, ql := startQuotaGateway(t, quota.Config{Default: quota.Limits{MessagesRate: 20}},
		func(c *Config) { c.ParkIdle = 50 * time.Millisecond })
	nc, _, _ := connectCode(t, g, packet.V5, "t-1")
	eventually.True(t, gatewayWait, "the connection parked", func() bool { return g.Parked() == 1 })
	const n = 40 // 20 of the burst, then 20 at 20/s: 1 s
	var buf []byte
	for i := range n {
		buf = (&packet.Publish{Topic: []byte("r"), Payload: fmt.Appendf(nil, "%06d", i)}).Append(buf, packet.V5)
	}
	began := time.Now()
	if _, err := nc.Write(buf); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, gatewayWait, "every message written", func() bool { pubs, _ := ql.published(); return len(pubs) == n })
	_, last := ql.published()
	if took := last.Sub(began); took < 800*time.Millisecond {
		t.Fatalf("%d messages took %v, want at least 1 s at the rate", n, took)
	}
	checkPublished(t, ql, n)
	eventually.True(t, gatewayWait, "the connection parked again", func() bool { return g.Parked() == 1 })
}
