package listener

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"syscall"
	"time"
)

// TCP is a listener of MQTT over TCP, or over TLS on TCP (ListenTLS).
type TCP struct {
	name string
	ln   net.Listener
	log  *slog.Logger

	// With TLS: the server's configuration, and the bound of a handshake.
	tls              *tls.Config
	handshakeTimeout time.Duration

	proxy *Proxy // PROXY protocol policy; nil reads no header
}

// ListenTCP binds a TCP listener named name to addr; log receives the
// accept failures it retries.
func ListenTCP(name, addr string, log *slog.Logger) (*TCP, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &TCP{name: name, ln: ln, log: log}, nil
}

// ListenTLS binds a listener of MQTT over TLS named name to addr. Each
// accepted socket's handshake runs on the connection's own goroutine,
// bounded by handshakeTimeout, so a slow client holds up no other; a
// connection is handed over once its handshake is complete. log receives
// the accept failures it retries and the handshakes that fail.
func ListenTLS(name, addr string, cfg *tls.Config, handshakeTimeout time.Duration, log *slog.Logger) (*TCP, error) {
	l, err := ListenTCP(name, addr, log)
	if err != nil {
		return nil, err
	}
	l.tls, l.handshakeTimeout = cfg, handshakeTimeout
	return l, nil
}

// AcceptProxy makes the listener read a PROXY protocol header from each
// connection as p says, before a TLS handshake; call it before Serve.
func (l *TCP) AcceptProxy(p *Proxy) {
	if p.on() {
		l.proxy = p
	}
}

// Name implements Listener.
func (l *TCP) Name() string { return l.name }

// Addr implements Listener.
func (l *TCP) Addr() net.Addr { return l.ln.Addr() }

// Close implements Listener.
func (l *TCP) Close() error { return l.ln.Close() }

// Serve implements Listener. An accept that fails for a while (out of file
// descriptors) is retried after a pause that doubles up to a second; Serve
// returns nil once ctx ends or the listener is closed.
func (l *TCP) Serve(ctx context.Context, handle Handler) error {
	var delay time.Duration
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil //nolint:nilerr // closed, or ctx ended: how Serve stops
			}
			// Temporary failure (e.g. out of file descriptors): back off.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			l.log.Warn("accept", "err", err, "retry_in", delay)
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return nil
			}
			continue
		}
		delay = 0
		if l.proxy != nil || l.tls != nil {
			go l.open(ctx, nc, handle)
			continue
		}
		go handle(ctx, l.conn(nc, nc.RemoteAddr()))
	}
}

// open reads the PROXY header of an accepted socket, then runs its TLS
// handshake, as configured, and hands the connection over; else it closes
// the socket. It runs on the connection's goroutine, which then becomes
// the handler's.
func (l *TCP) open(ctx context.Context, nc net.Conn, handle Handler) {
	client := nc.RemoteAddr()
	if l.proxy != nil {
		var err error
		if client, err = l.proxy.readHeader(nc, l.log, l.name); err != nil {
			_ = nc.Close()
			return
		}
	}
	if l.tls != nil {
		l.handshake(ctx, nc, client, handle)
		return
	}
	handle(ctx, l.conn(nc, client))
}

// conn describes a socket this listener accepted: its bytes are the MQTT
// stream (a PROXY header was read to its end and no further), so it is its
// own Raw.
func (l *TCP) conn(nc net.Conn, client net.Addr) *Conn {
	c := &Conn{
		NetConn:      nc,
		ClientAddr:   client,
		Transport:    TransportTCP,
		Listener:     l.name,
		ListenerAddr: l.ln.Addr(),
	}
	if sc, ok := nc.(syscall.Conn); ok {
		c.Raw = sc
	}
	return c
}

// handshake runs the TLS handshake of an accepted socket, bounded by the
// handshake timeout and ctx, and hands the connection over when it
// completes; else it closes the socket. client is the client's address.
func (l *TCP) handshake(ctx context.Context, nc net.Conn, client net.Addr, handle Handler) {
	tc := tls.Server(nc, l.tls)
	if l.handshakeTimeout > 0 {
		_ = tc.SetDeadline(time.Now().Add(l.handshakeTimeout))
	}
	if err := tc.HandshakeContext(ctx); err != nil {
		level := slog.LevelInfo
		if errors.Is(err, io.EOF) {
			level = slog.LevelDebug // closed before a hello: a port probe, a load balancer's health check
		}
		l.log.Log(ctx, level, "tls handshake failed", "listener", l.name, "remote", client, "err", err)
		_ = nc.Close()
		return
	}
	_ = tc.SetDeadline(time.Time{})
	st := tc.ConnectionState()
	handle(ctx, &Conn{
		NetConn:      tc,
		ClientAddr:   client,
		TLS:          &st,
		Transport:    TransportTLS,
		Listener:     l.name,
		ListenerAddr: l.ln.Addr(),
	})
}
