package listener

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path"
	"time"

	"github.com/coder/websocket"
)

// WebSocketPath is where a WebSocket listener serves MQTT.
const WebSocketPath = "/mqtt"

// WebSocketOptions configure a WebSocket listener.
type WebSocketOptions struct {
	// ReadLimit bounds one WebSocket message from a client, in bytes.
	ReadLimit int64
	// HeaderTimeout bounds the reading of an upgrade request's headers,
	// and with TLS the handshake before it.
	HeaderTimeout time.Duration
	// AllowedOrigins are the origins besides the listener's own whose web
	// pages may connect: patterns of path.Match, matched against the
	// Origin header's host ("*.example.com"), or its scheme and host when
	// the pattern has a scheme ("https://*.example.com"). A request
	// without Origin (not from a browser) or from the origin of the
	// request's Host is always accepted; any other is refused with 403.
	// CheckOrigins reports a malformed pattern.
	AllowedOrigins []string
	// TLS, when set, serves WebSocket over TLS (wss): each connection's
	// handshake runs on its own goroutine, bounded by HeaderTimeout.
	TLS *tls.Config
	// Proxy, when on, reads a PROXY protocol header from each connection
	// before its HTTP request (and before its TLS handshake), on the
	// connection's goroutine.
	Proxy *Proxy
}

// CheckOrigins returns an error naming the first malformed pattern of
// WebSocketOptions.AllowedOrigins.
func CheckOrigins(patterns []string) error {
	for _, p := range patterns {
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("origin pattern %q: %w", p, err)
		}
	}
	return nil
}

// WebSocket is a listener of MQTT over WebSocket at WebSocketPath with
// subprotocol "mqtt" (MQTT 5.0 §6), or over WebSocket over TLS: binary
// messages carry the MQTT byte stream.
type WebSocket struct {
	name string
	ln   net.Listener
	opts WebSocketOptions
	log  *slog.Logger
}

// ListenWebSocket binds a WebSocket listener named name to addr; log
// receives the upgrades that fail.
func ListenWebSocket(name, addr string, opts WebSocketOptions, log *slog.Logger) (*WebSocket, error) {
	if err := CheckOrigins(opts.AllowedOrigins); err != nil {
		return nil, err
	}
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

// Serve implements Listener: it serves HTTP (HTTPS with TLS) on the
// listener until ctx ends, then shuts the server down, waiting at most a
// second for upgrades under way. Upgraded connections are the handler's:
// the shutdown does not wait for them.
func (l *WebSocket) Serve(ctx context.Context, handle Handler) error {
	srv := &http.Server{
		Handler:           l.handler(ctx, handle),
		ReadHeaderTimeout: l.opts.HeaderTimeout, // with TLS, the handshake's bound too
		ErrorLog:          slog.NewLogLogger(l.log.With("listener", l.name).Handler(), slog.LevelInfo),
	}
	ln := l.ln
	if l.opts.Proxy.on() {
		ln = &proxyListener{Listener: ln, p: l.opts.Proxy, log: l.log, name: l.name}
	}
	if l.opts.TLS != nil {
		// The server runs each handshake on the connection's goroutine;
		// no ALPN: HTTP/1.1, which WebSocket upgrades need.
		ln = tls.NewListener(ln, l.opts.TLS)
	}
	var serveErr error
	served := make(chan struct{})
	go func() { defer close(served); serveErr = srv.Serve(ln) }()
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
	transport := TransportWebSocket
	if l.opts.TLS != nil {
		transport = TransportWSS
	}
	mux := http.NewServeMux()
	mux.HandleFunc(WebSocketPath, func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		ws, err := websocket.Accept(sw, r, &websocket.AcceptOptions{
			Subprotocols: []string{"mqtt"},
			// A web page of another origin must not reach the broker
			// through its visitor's browser (a broker on localhost above
			// all), unless allowed.
			OriginPatterns: l.opts.AllowedOrigins,
		})
		if err != nil {
			if sw.status == http.StatusForbidden {
				l.log.Info("websocket origin refused", "listener", l.name, "remote", r.RemoteAddr,
					"origin", r.Header.Get("Origin"), "host", r.Host)
				return
			}
			l.log.Debug("websocket upgrade", "listener", l.name, "remote", r.RemoteAddr, "err", err)
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
			ClientAddr:   nc.RemoteAddr(), // the hijacked connection's: with PROXY, the header's source
			TLS:          r.TLS,
			Transport:    transport,
			Listener:     l.name,
			ListenerAddr: l.ln.Addr(),
		})
	})
	return mux
}

// statusWriter records the status of a response that was refused (the
// upgrade writes 403 for an origin it does not allow). Unwrap lets the
// upgrade reach the connection to hijack.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
