package listener

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/coder/websocket"
)

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// serve runs l.Serve until the test ends and returns the connections it
// hands over; the cleanup checks that Serve returns nil once ctx ends and
// the listener is closed.
func serve(t *testing.T, l Listener) <-chan Conn {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	conns := make(chan Conn, 1)
	done := make(chan error, 1)
	go func() {
		done <- l.Serve(ctx, func(_ context.Context, c *Conn) {
			conns <- *c
			<-ctx.Done() // the handler keeps its goroutine while the connection lives
			_ = c.NetConn.Close()
		})
	}()
	t.Cleanup(func() {
		cancel()
		_ = l.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return after ctx ended")
		}
	})
	return conns
}

func accepted(t *testing.T, conns <-chan Conn) Conn {
	t.Helper()
	select {
	case c := <-conns:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("no connection handed over")
		return Conn{}
	}
}

// readN reads n bytes of c's stream.
func readN(t *testing.T, c Conn, n int) string {
	t.Helper()
	_ = c.NetConn.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, n)
	if _, err := io.ReadFull(c.NetConn, b); err != nil {
		t.Fatalf("read the stream: %v", err)
	}
	return string(b)
}

func TestTCP(t *testing.T) {
	l, err := ListenTCP("mqtt", "127.0.0.1:0", discard())
	if err != nil {
		t.Fatal(err)
	}
	conns := serve(t, l)
	client, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Close() }()
	if _, err := client.Write([]byte("\x10\x00")); err != nil {
		t.Fatal(err)
	}
	c := accepted(t, conns)
	if c.Transport != TransportTCP || c.Listener != "mqtt" || c.ListenerAddr.String() != l.Addr().String() {
		t.Errorf("transport %q, listener %q at %v; want tcp, mqtt at %v", c.Transport, c.Listener, c.ListenerAddr, l.Addr())
	}
	if c.ClientAddr.String() != client.LocalAddr().String() {
		t.Errorf("client address %v, want %v", c.ClientAddr, client.LocalAddr())
	}
	if c.Raw == nil {
		t.Error("a TCP connection's Raw is nil, want its socket")
	}
	if c.TLS != nil || c.PeerCertificate() != nil {
		t.Error("TLS state on a plain TCP connection")
	}
	if got := readN(t, c, 2); got != "\x10\x00" {
		t.Errorf("stream %q, want the client's bytes", got)
	}
}

// webSocketClient serves a WebSocket listener until the test ends and
// connects a client asking for subprotocols; ctx bounds the client's
// reads and writes.
func webSocketClient(t *testing.T, subprotocols []string) (l *WebSocket, conns <-chan Conn, ws *websocket.Conn, ctx context.Context) {
	t.Helper()
	l, err := ListenWebSocket("ws", "127.0.0.1:0", WebSocketOptions{ReadLimit: 1 << 10, HeaderTimeout: time.Second}, discard())
	if err != nil {
		t.Fatal(err)
	}
	conns = serve(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	//nolint:bodyclose // coder/websocket: "You never need to close resp.Body yourself" (nil after a dial)
	ws, _, err = websocket.Dial(ctx, "ws://"+l.Addr().String()+WebSocketPath, &websocket.DialOptions{Subprotocols: subprotocols})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.CloseNow() })
	return l, conns, ws, ctx
}

func TestWebSocket(t *testing.T) {
	l, conns, ws, ctx := webSocketClient(t, []string{"mqtt"})
	if err := ws.Write(ctx, websocket.MessageBinary, []byte("\x10\x00")); err != nil {
		t.Fatal(err)
	}
	c := accepted(t, conns)
	if c.Transport != TransportWebSocket || c.Listener != "ws" || c.ListenerAddr.String() != l.Addr().String() {
		t.Errorf("transport %q, listener %q at %v; want ws, ws at %v", c.Transport, c.Listener, c.ListenerAddr, l.Addr())
	}
	if a, ok := c.ClientAddr.(*net.TCPAddr); !ok || !a.IP.IsLoopback() || a.Port == 0 {
		t.Errorf("client address %v, want the client's loopback address", c.ClientAddr)
	}
	if c.Raw != nil {
		t.Error("a WebSocket connection has a Raw socket: its bytes are frames, not the MQTT stream")
	}
	if got := readN(t, c, 2); got != "\x10\x00" {
		t.Errorf("stream %q, want the client's message", got)
	}
}

// TestWebSocketSubprotocol: a client that does not ask for subprotocol
// "mqtt" is closed with a policy violation and never handed over.
func TestWebSocketSubprotocol(t *testing.T) {
	_, conns, ws, ctx := webSocketClient(t, nil)
	_, _, err := ws.Read(ctx)
	if got := websocket.CloseStatus(err); got != websocket.StatusPolicyViolation {
		t.Errorf("read: %v (close status %v), want the policy violation close", err, got)
	}
	select {
	case c := <-conns:
		t.Errorf("connection from %v handed over without subprotocol mqtt", c.ClientAddr)
	default:
	}
}
