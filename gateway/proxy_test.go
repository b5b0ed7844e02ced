package gateway

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// connectLog is a fakeLog that also hands over every Connect it writes.
type connectLog struct {
	*fakeLog
	connects chan *eventspb.Connect
}

func (l connectLog) ProduceSync(ctx context.Context, rs ...*kafka.Record) error {
	for _, r := range rs {
		var env eventspb.Envelope
		if err := kafka.DecodeEnvelope(r, &env); err == nil && env.GetConnect() != nil {
			l.connects <- env.GetConnect()
		}
	}
	return l.fakeLog.ProduceSync(ctx, rs...)
}

// syncBuffer is a log destination safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proxyBehindLoopback runs PROXY protocol as a load balancer on loopback
// would.
func proxyBehindLoopback(c *Config) {
	c.ProxyProtocol, c.ProxyTrusted = "required", []string{"127.0.0.0/8"}
}

// dialProxied connects to the gateway's mqtt listener and sends a PROXY
// v2 header claiming the client is at src.
func dialProxied(t *testing.T, g *Gateway, src string) (net.Conn, *packet.Reader) {
	t.Helper()
	nc, err := net.Dial("tcp", g.Addr("mqtt").String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	h := proxyproto.HeaderProxyFromAddrs(2, net.TCPAddrFromAddrPort(netip.MustParseAddrPort(src)), nc.RemoteAddr())
	if _, err := h.WriteTo(nc); err != nil {
		t.Fatal(err)
	}
	return nc, packet.NewReader(nc, 256)
}

// TestProxyClientAddress: behind a load balancer, the client's address
// is the one its PROXY header claims, in the handshake's logs and in the
// Connect event.
func TestProxyClientAddress(t *testing.T) {
	cl := connectLog{fakeLog: newFakeLog(), connects: make(chan *eventspb.Connect, 10)}
	logs := &syncBuffer{}
	g, stop := runGatewayWith(t, cl.fakeLog, func(g *Gateway) {
		g.log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		g.eventLog = cl
	}, proxyBehindLoopback)
	t.Cleanup(func() { _ = stop() })

	nc, rd := dialProxied(t, g, "203.0.113.7:40000")
	write(t, nc, &packet.Connect{Version: packet.V5, ClientID: []byte("t-1"), CleanStart: true})
	if ca, ok := read(t, nc, rd, 5*time.Second).(*packet.Connack); !ok || ca.Code != 0 {
		t.Fatalf("got %+v, want CONNACK 0", ca)
	}
	select {
	case c := <-cl.connects:
		if c.GetClientAddress() != "203.0.113.7:40000" {
			t.Errorf("Connect client_address %q, want the header's 203.0.113.7:40000", c.GetClientAddress())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no Connect written")
	}

	// A handshake that fails is logged with the header's address.
	bad, _ := dialProxied(t, g, "203.0.113.8:40001")
	write(t, bad, &packet.Pingreq{})
	eventually.True(t, gatewayWait, "the refused handshake's log", func() bool {
		return strings.Contains(logs.String(), "first packet is not CONNECT") && strings.Contains(logs.String(), "remote=203.0.113.8:40001")
	})
	if strings.Contains(logs.String(), "remote=127.0.0.1") {
		t.Errorf("a handshake logged the load balancer's address:\n%s", logs)
	}
}
