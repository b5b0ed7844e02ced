package listener

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/coder/websocket"
)

// WebSocketPath is where a WebSocket listener serves MQTT.
const WebSocketPath = "/mqtt"

// WebSocketOptions configure a WebSocket listener.
type WebSocketOptions struct {
	// ReadLimit bounds one WebSocket message from a client, in bytes.
	ReadLimit int64
	// HeaderTimeout bounds the reading of an upgrade request's headers.
	HeaderTimeout time.Duration
}

// WebSocket is a listener of MQTT over WebSocket at WebSocketPath with
// subprotocol "mqtt" (MQTT 5.0 §6): binary messages carry the MQTT byte
// stream.
type WebSocket struct {
	name string
	ln   net.Listener
	opts WebSocketOptions
	log  *slog.Logger
}

// ListenWebSocket binds a WebSocket listener named name to addr; log
// receives the upgrades that fail.
func ListenWebSocket(name, addr string, opts WebSocketOptions, log *slog.Logger) (*WebSocket, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &WebSocket{name: name, ln: ln, opts: opts, log: log}, nil
}

// Name implements Listener.
func (l *WebSocket) Name() string { return l.name }

// Addr implements Listener.
func (l *WebSocket) Addr() net.Addr { return l.ln.Addr() }

// Close implements Listener.
func (l *WebSocket) Close() error { return l.ln.Close() }

// Serve implements Listener: it serves HTTP on the listener until ctx ends,
// then shuts the server down, waiting at most a second for upgrades under
// way. Upgraded connections are the handler's: the shutdown does not wait
// for them.
func (l *WebSocket) Serve(ctx context.Context, handle Handler) error {
	srv := &http.Server{Handler: l.handler(ctx, handle), ReadHeaderTimeout: l.opts.HeaderTimeout}
	var serveErr error
	served := make(chan struct{})
	go func() { defer close(served); serveErr = srv.Serve(l.ln) }()
	select {
	case <-served:
	case <-ctx.Done():
	}
	failed := ctx.Err() == nil // Serve returned on its own
	shutdown(srv)
	<-served
	if !failed || errors.Is(serveErr, http.ErrServerClosed) || errors.Is(serveErr, net.ErrClosed) {
		return nil // ctx ended, or Close
	}
	return fmt.Errorf("serve websocket: %w", serveErr)
}

// shutdown stops srv, waiting at most a second for requests under way.
func shutdown(srv *http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
}

// handler upgrades the requests for WebSocketPath and hands each
// connection to handle, on the request's goroutine.
func (l *WebSocket) handler(ctx context.Context, handle Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(WebSocketPath, func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{
			Subprotocols:   []string{"mqtt"},
			OriginPatterns: []string{"*"}, // MQTT-over-WebSocket dashboards are served from other origins; clients authenticate in CONNECT
		})
		if err != nil {
			l.log.Debug("websocket upgrade", "remote", r.RemoteAddr, "err", err)
			return
		}
		if ws.Subprotocol() != "mqtt" {
			_ = ws.Close(websocket.StatusPolicyViolation, "subprotocol mqtt required")
			return
		}
		ws.SetReadLimit(l.opts.ReadLimit)
		nc := websocket.NetConn(ctx, ws, websocket.MessageBinary)
		handle(ctx, &Conn{
			NetConn:      nc,
			ClientAddr:   nc.RemoteAddr(),
			Transport:    TransportWebSocket,
			Listener:     l.name,
			ListenerAddr: l.ln.Addr(),
		})
	})
	return mux
}
