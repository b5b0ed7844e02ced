package gateway

import (
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// kickBatch is the Kick the session service writes to the slot of a
// connection of client t/client taken over by a newer one.
func kickBatch(client string, connection uint64) kafka.Batch {
	env := &eventspb.Envelope{Tenant: "t", ClientId: client, Event: &eventspb.Envelope_Kick{
		Kick: &eventspb.Kick{Connection: connection, ReasonCode: uint32(packet.CodeSessionTakenOver)},
	}}
	return kafka.Batch{Records: []*kafka.Record{kafka.NewRecord(kafka.TopicDeliveries, nil, 0, env)}}
}

// TestServerCloseIsBounded: a client that goes on sending after the
// gateway's DISCONNECT does not keep its socket: the gateway discards its
// input for at most lingerBytes and lingerTime, then closes. The flood
// reaches lingerBytes at once; the trickle, to a parked connection, lasts
// until lingerTime.
func TestServerCloseIsBounded(t *testing.T) {
	for _, tc := range []struct {
		name  string
		park  bool
		chunk int
		pause time.Duration
		min   time.Duration // least time until the close
		max   time.Duration
	}{
		{name: "flood", chunk: 64 << 10, max: lingerTime},
		{name: "trickle", park: true, chunk: 1, pause: 10 * time.Millisecond, min: lingerTime - 200*time.Millisecond, max: lingerTime + 2*time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fl := newFakeLog()
			g := startGateway(t, fl, func(c *Config) {
				c.ParkIdle = 0
				if tc.park {
					c.ParkIdle = 20 * time.Millisecond
				}
			})
			nc, rd := dial(t, g)
			if tc.park {
				eventually(t, "the connection to park", func() bool { return g.Parked() == 1 })
			}
			fl.slot <- kickBatch("t-1", connOf(t, g, "t-1").id)
			if d, ok := read(t, nc, rd, 5*time.Second).(*packet.Disconnect); !ok || d.Code != packet.CodeSessionTakenOver {
				t.Fatalf("got %+v, want DISCONNECT 0x8E", d)
			}
			start := time.Now()
			buf := make([]byte, tc.chunk)
			for {
				_ = nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
				if _, err := nc.Write(buf); err != nil {
					break // the gateway closed the socket
				}
				if time.Since(start) > tc.max {
					t.Fatalf("still open %v after the DISCONNECT", time.Since(start))
				}
				time.Sleep(tc.pause)
			}
			if el := time.Since(start); el < tc.min {
				t.Fatalf("closed %v after the DISCONNECT, before lingerTime (%v)", el, lingerTime)
			}
			eventually(t, "the connection to end", func() bool { return g.Stats.Load(ConnectionsCurrent) == 0 })
		})
	}
}
