package listener

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"syscall"
)

// Transport is how a connection's MQTT stream arrives.
type Transport string

// The transports.
const (
	TransportTCP       Transport = "tcp" // MQTT over a TCP socket
	TransportTLS       Transport = "tls" // MQTT over TLS on a TCP socket
	TransportWebSocket Transport = "ws"  // MQTT over WebSocket (binary messages)
	TransportWSS       Transport = "wss" // MQTT over WebSocket over TLS
)

// Conn is an accepted client connection and what its listener knows of it.
type Conn struct {
	// NetConn carries the MQTT byte stream. The handler owns it and closes
	// it.
	NetConn net.Conn
	// Raw is the socket itself when NetConn's bytes are the socket's own:
	// nothing transformed and nothing buffered above it (plain TCP; TCP
	// after a PROXY header read to its end). The gateway then parks an idle
	// connection in its poller and reads and writes the descriptor without
	// blocking, and keeps a read deadline armed across packets (a passed
	// deadline leaves a socket usable). Nil otherwise (WebSocket, TLS).
	Raw syscall.Conn
	// ClientAddr is the client's address: the socket's peer, or the source
	// a PROXY protocol header gave when a load balancer is in front.
	ClientAddr net.Addr
	// TLS is the connection's TLS state once its handshake is complete
	// (listeners hand a TLS connection over only then); nil without TLS.
	// Its verified client certificate is PeerCertificate.
	TLS *tls.ConnectionState
	// Transport is how the stream arrives.
	Transport Transport
	// Listener is the name of the listener ("mqtt", "ws", "mqtts", "wss") and
	// ListenerAddr its bound address.
	Listener     string
	ListenerAddr net.Addr
}

// PeerCertificate returns the certificate the client presented in the TLS
// handshake, or nil (no TLS, or no client certificate).
func (c *Conn) PeerCertificate() *x509.Certificate {
	if c.TLS == nil || len(c.TLS.PeerCertificates) == 0 {
		return nil
	}
	return c.TLS.PeerCertificates[0]
}

// Handler takes over an accepted connection; c is its own (the listener
// keeps no reference). It runs on a goroutine of its own for each
// connection and may keep it for as long as the connection lives; ctx is
// the one Serve was given. c is a pointer, not a value, because it goes
// through the goroutine's first frames: by value it grew every reader
// goroutine of the gateway from a 4 KiB stack to an 8 KiB one
// (BenchmarkIdleConnections/goroutine).
type Handler func(ctx context.Context, c *Conn)

// Listener accepts client connections on a bound address.
type Listener interface {
	// Name names the listener in the configuration, in logs and in
	// Conn.Listener ("mqtt", "ws").
	Name() string
	// Addr is the bound address.
	Addr() net.Addr
	// Serve hands every accepted connection to handle until ctx ends or
	// Close is called, then returns nil; or it returns the error that
	// stopped it before.
	Serve(ctx context.Context, handle Handler) error
	// Close stops accepting. Connections handed over are the handler's.
	Close() error
}
