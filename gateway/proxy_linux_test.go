package gateway

import (
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

// TestProxyParked: a connection whose PROXY header was read parks when
// idle and wakes when a packet arrives, as a direct one does: the header
// left nothing of the stream above the socket.
func TestProxyParked(t *testing.T) {
	g := startGateway(t, newFakeLog(), proxyBehindLoopback, parkFast)
	nc, rd := dialProxied(t, g, "203.0.113.7:40000")
	// The CONNECT follows the header at once, in the socket's buffer.
	write(t, nc, &packet.Connect{Version: packet.V5, ClientID: []byte("t-1"), CleanStart: true})
	if ca, ok := read(t, nc, rd, 5*time.Second).(*packet.Connack); !ok || ca.Code != 0 {
		t.Fatalf("got %+v, want CONNACK 0", ca)
	}
	waitParks(t, g, 1, 1)
	if c := connOf(t, g, "t-1"); c.tcp == nil {
		t.Fatal("the connection after a PROXY header has no raw socket")
	}
	write(t, nc, &packet.Pingreq{})
	if _, ok := read(t, nc, rd, 5*time.Second).(*packet.Pingresp); !ok {
		t.Fatal("want PINGRESP from the woken connection")
	}
	waitParks(t, g, 2, 1)
}
