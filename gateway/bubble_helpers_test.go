package gateway

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/gateway/listener"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

// Helpers of the tests that run in a synctest bubble. Time there only
// advances when every goroutine of the bubble is durably blocked, which a
// goroutine in a socket's accept or read never is: such a gateway opens no
// listener, and its clients reach it over net.Pipe.

// forBubble readies g to run in a bubble, before Run: it drops every
// listener of its configuration (Validate wants one, so New was given
// one), and parking, whose poller waits in epoll_wait (a system call) and
// has no socket to park anyway.
func forBubble(g *Gateway) {
	g.cfg.MQTTListen, g.cfg.WSListen, g.cfg.MQTTSListen, g.cfg.WSSListen = "", "", "", ""
	g.cfg.ParkIdle = 0
}

// pipeAddr is the client address of a connection over net.Pipe.
var pipeAddr = &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 50000}

// servePipe hands g one end of a net.Pipe, as its MQTT listener hands it
// an accepted connection, and returns the other end with a reader. The
// client end is closed when the test ends, and the test waits for the
// gateway to finish serving it.
func servePipe(t *testing.T, g *Gateway) (net.Conn, *packet.Reader) {
	t.Helper()
	server, client := net.Pipe()
	served := make(chan struct{})
	go func() {
		defer close(served)
		g.serve(context.Background(), &listener.Conn{NetConn: server, ClientAddr: pipeAddr, Listener: "mqtt"})
	}()
	t.Cleanup(func() {
		_ = client.Close()
		select {
		case <-served:
		case <-time.After(gatewayWait):
			t.Error("the gateway still serves a connection its client closed")
		}
	})
	return client, packet.NewReader(client, 256)
}

// connectPipe connects over servePipe with client id id (tenant "t") and
// keep alive keepAlive, and returns the connection after its CONNACK.
func connectPipe(t *testing.T, g *Gateway, id string, keepAlive uint16) (net.Conn, *packet.Reader) {
	t.Helper()
	nc, rd := servePipe(t, g)
	write(t, nc, &packet.Connect{Version: packet.V5, ClientID: []byte(id), CleanStart: true, KeepAlive: keepAlive})
	if _, ok := read(t, nc, rd, 5*time.Second).(*packet.Connack); !ok {
		t.Fatal("want CONNACK")
	}
	return nc, rd
}
