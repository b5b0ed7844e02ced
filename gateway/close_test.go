package gateway

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
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

// gatewayHoldingConnack runs a gateway on fl whose first connection of
// client t/client stops in its handshake just before its CONNACK is
// queued (beforeConnack), until release is called (at the latest when the
// test ends, before the gateway stops); held gets that connection.
func gatewayHoldingConnack(t *testing.T, fl *fakeLog, client string) (g *Gateway, stop func() error, held <-chan *conn, release func()) {
	t.Helper()
	h, rel := make(chan *conn, 1), make(chan struct{})
	var holding, released atomic.Bool
	g, stop = runGatewayWith(t, fl, func(g *Gateway) {
		g.beforeConnack = func(c *conn) {
			if c.clientID == client && !holding.Swap(true) {
				h <- c
				<-rel
			}
		}
	})
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	release = func() {
		if !released.Swap(true) {
			close(rel)
		}
	}
	t.Cleanup(release) // runs before stop
	return g, stop, h, release
}

// sendConnect opens a connection and sends a 5.0 CONNECT of client id,
// without waiting for the CONNACK.
func sendConnect(t *testing.T, g *Gateway, id string) (net.Conn, *packet.Reader) {
	t.Helper()
	nc, err := net.Dial("tcp", g.Addr("mqtt").String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	write(t, nc, &packet.Connect{Version: packet.V5, ClientID: []byte(id), CleanStart: true})
	return nc, packet.NewReader(nc, 256)
}

// heldConn waits for the connection whose CONNACK is held.
func heldConn(t *testing.T, held <-chan *conn) *conn {
	t.Helper()
	select {
	case c := <-held:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("no connection reached its CONNACK")
		return nil
	}
}

// expectConnackThenDisconnect reads until the gateway closes the
// connection: CONNACK (success), then DISCONNECT with code, then the end of
// the stream, and nothing else.
func expectConnackThenDisconnect(t *testing.T, nc net.Conn, rd *packet.Reader, code packet.ReasonCode) {
	t.Helper()
	var types []packet.Type
	var ca *packet.Connack
	var disc *packet.Disconnect
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		h, body, err := rd.ReadPacket()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Errorf("read %v, then %v; want the end of the stream (EOF)", types, err)
			}
			break
		}
		p, err := packet.Decode(h, body, packet.V5)
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, h.Type)
		switch p := p.(type) {
		case *packet.Connack:
			ca = p
		case *packet.Disconnect:
			disc = p
		}
	}
	if len(types) != 2 || types[0] != packet.CONNACK || types[1] != packet.DISCONNECT {
		t.Fatalf("read %v, want CONNACK first [MQTT-3.2.0-1], then DISCONNECT", types)
	}
	if ca.Code != packet.CodeSuccess || disc.Code != code {
		t.Fatalf("CONNACK %v, DISCONNECT %v; want CONNACK %v, DISCONNECT %v", ca.Code, disc.Code, packet.CodeSuccess, code)
	}
}

// TestTakeoverBeforeConnack: the session service accepts a connection and
// then takes it over for a newer connection of the client; its Kick can
// reach the gateway before the older connection's handshake has queued the
// CONNACK. That connection must still get its CONNACK first, then
// DISCONNECT 0x8E [MQTT-3.2.0-1]. The CONNACK is held in the handshake
// until the Kick was handled, so the race always goes that way.
func TestTakeoverBeforeConnack(t *testing.T) {
	fl := newFakeLog()
	g, _, held, release := gatewayHoldingConnack(t, fl, "t-1")
	nc, rd := sendConnect(t, g, "t-1")
	c := heldConn(t, held)
	fl.slot <- kickBatch("t-1", c.id)
	// The newer connection's answer follows the Kick on the slot, as the
	// session service writes them: once it has its CONNACK, the Kick was
	// handled.
	nc2, rd2, ca := connectAck(t, g, "t-1", 0)
	if ca.Code != packet.CodeSuccess {
		t.Fatalf("newer connection: CONNACK %v", ca.Code)
	}
	release()
	expectConnackThenDisconnect(t, nc, rd, packet.CodeSessionTakenOver)
	expectSilence(t, nc2, rd2, 100*time.Millisecond) // the newer connection stays
}

// TestShutdownBeforeConnack: a connection whose CONNACK is not queued yet
// when the gateway stops gets its CONNACK, then DISCONNECT 0x8B.
func TestShutdownBeforeConnack(t *testing.T) {
	fl := newFakeLog()
	g, stop, held, release := gatewayHoldingConnack(t, fl, "t-1")
	nc, rd := sendConnect(t, g, "t-1")
	c := heldConn(t, held)
	errc := make(chan error, 1)
	go func() { errc <- stop() }()
	eventually.True(t, gatewayWait, "the shutdown to reach the connection", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.closeAfterConnack
	})
	release()
	expectConnackThenDisconnect(t, nc, rd, packet.CodeServerShuttingDown)
	_ = nc.Close()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
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
				eventually.True(t, gatewayWait, "the connection to park", func() bool { return g.Parked() == 1 })
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
				time.Sleep(tc.pause) // real time: a client that trickles bytes to a real socket
			}
			if el := time.Since(start); el < tc.min {
				t.Fatalf("closed %v after the DISCONNECT, before lingerTime (%v)", el, lingerTime)
			}
			eventually.True(t, gatewayWait, "the connection to end", func() bool { return g.Stats.Load(ConnectionsCurrent) == 0 })
		})
	}
}

// TestHeldDeliveriesKeepTheirOrder: deliveries that reach a connection
// before its CONNACK is queued are held and follow the CONNACK; one that
// arrives while they go out joins them instead of overtaking them. An
// inbox entry that overtook them made the held ones look like repeats
// (their sequence numbers below its own): they were dropped, and a
// resumed session got only part of its inbox until its next reconnect.
func TestHeldDeliveriesKeepTheirOrder(t *testing.T) {
	fl := newFakeLog()
	h, rel := make(chan *conn, 1), make(chan struct{})
	fwd := func(c *conn, seq uint64) (*eventspb.Message, *eventspb.Target) {
		return &eventspb.Message{Topic: "a", Payload: []byte{byte('0' + seq)}, Qos: 1},
			&eventspb.Target{ClientId: "t-1", Connection: c.id, Qos: 1, PacketId: uint32(10 + seq), InboxSeq: seq}
	}
	g, stop := runGatewayWith(t, fl, func(g *Gateway) {
		g.beforeConnack = func(c *conn) {
			if c.clientID == "t-1" {
				h <- c
				<-rel
			}
		}
		// Another delivery in the instant between the CONNACK and the
		// held ones, as the slot consumer may make it.
		g.afterConnack = func(c *conn) {
			if c.clientID == "t-1" {
				m, tg := fwd(c, 4)
				c.deliver(nil, messageID{}, m, tg, g.clock())
			}
		}
	})
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	nc, rd := sendConnect(t, g, "t-1")
	c := heldConn(t, h)
	for seq := uint64(1); seq <= 3; seq++ {
		m, tg := fwd(c, seq)
		env := &eventspb.Envelope{Tenant: "t", ClientId: "t-1", Event: &eventspb.Envelope_Delivery{Delivery: &eventspb.Delivery{
			Message: m, Targets: []*eventspb.Target{tg},
		}}}
		fl.slot <- kafka.Batch{Records: []*kafka.Record{kafka.NewRecord(kafka.TopicDeliveries, nil, 0, env)}}
	}
	eventually.OK(t, gatewayWait, func() string {
		c.mu.Lock()
		defer c.mu.Unlock()
		n := 0
		if c.flow != nil {
			n = len(c.early)
		}
		if n != 3 {
			return fmt.Sprintf("%d deliveries held before the CONNACK, want 3", n)
		}
		return ""
	})
	close(rel)
	if _, ok := read(t, nc, rd, 5*time.Second).(*packet.Connack); !ok {
		t.Fatal("want CONNACK first")
	}
	for seq := 1; seq <= 4; seq++ {
		p, ok := read(t, nc, rd, 5*time.Second).(*packet.Publish)
		if !ok || string(p.Payload) != string(rune('0'+seq)) {
			t.Fatalf("delivery %d: got %+v, want the inbox entry %d", seq, p, seq)
		}
	}
}
