package listener

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"syscall"
	"time"
)

// TCP is a listener of MQTT over TCP.
type TCP struct {
	name string
	ln   net.Listener
	log  *slog.Logger
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
		go handle(ctx, l.conn(nc))
	}
}

// conn describes a socket this listener accepted: its bytes are the MQTT
// stream, so it is its own Raw.
func (l *TCP) conn(nc net.Conn) *Conn {
	c := &Conn{
		NetConn:      nc,
		ClientAddr:   nc.RemoteAddr(),
		Transport:    TransportTCP,
		Listener:     l.name,
		ListenerAddr: l.ln.Addr(),
	}
	if sc, ok := nc.(syscall.Conn); ok {
		c.Raw = sc
	}
	return c
}
