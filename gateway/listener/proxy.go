package listener

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/pires/go-proxyproto"
)

// ProxyMode is whether a listener reads PROXY protocol headers.
type ProxyMode string

// The PROXY protocol modes (see doc.go for the rules).
const (
	ProxyOff      ProxyMode = "off"      // no header is read: the socket's peer is the client
	ProxyOptional ProxyMode = "optional" // a trusted peer may send a header
	ProxyRequired ProxyMode = "required" // every connection must come from a trusted peer with a header
)

// ParseProxyMode returns the mode s names ("" is off).
func ParseProxyMode(s string) (ProxyMode, error) {
	switch m := ProxyMode(s); m {
	case "", ProxyOff:
		return ProxyOff, nil
	case ProxyOptional, ProxyRequired:
		return m, nil
	}
	return "", fmt.Errorf("%q is not off, optional or required", s)
}

// ParseProxyTrusted parses CIDR networks ("10.0.0.0/8", "fd00::/8"); an
// address without a length is a network of that one address.
func ParseProxyTrusted(nets []string) ([]netip.Prefix, error) {
	ps := make([]netip.Prefix, 0, len(nets))
	for _, s := range nets {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, fmt.Errorf("%q is not a CIDR network: %w", s, err)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if p.Addr().Is4In6() {
			// A peer's address is compared unmapped: ::ffff:10.0.0.0/104 would never match.
			return nil, fmt.Errorf("%q: write IPv4-mapped networks as IPv4", s)
		}
		ps = append(ps, p.Masked())
	}
	return ps, nil
}

// Proxy is a listener's PROXY protocol policy. A nil *Proxy, or Mode off,
// reads no header.
type Proxy struct {
	Mode ProxyMode
	// Trusted are the networks of the peers (load balancers) allowed to
	// send a header.
	Trusted []netip.Prefix
	// Timeout bounds the wait for the header (the gateway's connect
	// timeout); 0 is unbounded.
	Timeout time.Duration
}

func (p *Proxy) on() bool { return p != nil && p.Mode != "" && p.Mode != ProxyOff }

// trusts reports whether the socket peer a may send a header.
func (p *Proxy) trusts(a net.Addr) bool {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return false
	}
	ip := ap.Addr().Unmap()
	for _, n := range p.Trusted {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

// errProxyRefused marks a connection the policy refuses (already logged).
var errProxyRefused = errors.New("proxy protocol: connection refused")

// The first bytes of the two header versions; an MQTT stream starts with
// CONNECT, 0x10, so one byte tells a header from a client that sends none.
const (
	sigV1First = 'P'  // "PROXY "
	sigV2First = '\r' // "\r\n\r\n\x00\r\nQUIT\n"
	maxV1      = 107  // the longest v1 line, CRLF included (the specification's bound)
)

// readHeader applies the policy to an accepted socket, on its own
// goroutine: it returns the client's address (the header's source, or the
// socket's peer), having consumed the header and not one byte more. On
// error the connection must be closed; the refusals are logged here.
func (p *Proxy) readHeader(nc net.Conn, log *slog.Logger, listener string) (net.Addr, error) {
	peer := nc.RemoteAddr()
	trusted := p.trusts(peer)
	if !trusted && p.Mode == ProxyRequired {
		log.Info("proxy protocol: peer not trusted", "listener", listener, "remote", peer, "mode", p.Mode)
		return nil, errProxyRefused
	}
	if p.Timeout > 0 {
		_ = nc.SetReadDeadline(time.Now().Add(p.Timeout))
		defer func() { _ = nc.SetReadDeadline(time.Time{}) }()
	}
	first, err := peekByte(nc)
	if err != nil {
		log.Debug("proxy protocol: nothing read", "listener", listener, "remote", peer, "err", err)
		return nil, err
	}
	header := first == sigV1First || first == sigV2First
	switch {
	case !header && p.Mode == ProxyRequired:
		log.Info("proxy protocol: no header", "listener", listener, "remote", peer)
		return nil, errProxyRefused
	case !header:
		return peer, nil // optional, none sent
	case !trusted:
		// An untrusted peer never sets its own address.
		log.Info("proxy protocol: header from an untrusted peer", "listener", listener, "remote", peer)
		return nil, errProxyRefused
	}
	raw, err := readExact(nc, first)
	if err != nil {
		log.Info("proxy protocol: bad header", "listener", listener, "remote", peer, "err", err)
		return nil, err
	}
	h, err := proxyproto.Read(bufio.NewReaderSize(bytes.NewReader(raw), len(raw)))
	if err != nil {
		log.Info("proxy protocol: bad header", "listener", listener, "remote", peer, "err", err)
		return nil, err
	}
	if h.Command.IsLocal() {
		return peer, nil // the proxy's own connection (a health check)
	}
	src, ok := h.SourceAddr.(*net.TCPAddr)
	if !ok {
		// UNKNOWN (v1), UNSPEC, UDP or unix: no client address to take.
		return peer, nil
	}
	return src, nil
}

// readExact reads one header whose first byte is first from r, exactly to
// its end: a v2 header by its announced length, a v1 line a byte at a time
// up to its LF. Nothing after it is read, so the MQTT stream stays in the
// socket.
func readExact(r io.Reader, first byte) ([]byte, error) {
	if first == sigV2First {
		buf := make([]byte, 16, 16+64)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, fmt.Errorf("read v2 header: %w", err)
		}
		if !bytes.Equal(buf[:12], proxyproto.SIGV2) {
			return nil, errors.New("read v2 header: bad signature")
		}
		n := binary.BigEndian.Uint16(buf[14:16])
		if n > proxyproto.MaxV2HeaderSize {
			return nil, fmt.Errorf("read v2 header: length %d over %d", n, proxyproto.MaxV2HeaderSize)
		}
		buf = append(buf, make([]byte, n)...)
		if _, err := io.ReadFull(r, buf[16:]); err != nil {
			return nil, fmt.Errorf("read v2 header: %w", err)
		}
		return buf, nil
	}
	buf := make([]byte, 0, maxV1)
	var b [1]byte
	for len(buf) < maxV1 {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, fmt.Errorf("read v1 header: %w", err)
		}
		buf = append(buf, b[0])
		if b[0] == '\n' {
			return buf, nil
		}
	}
	return nil, fmt.Errorf("read v1 header: no end in %d bytes", maxV1)
}

// peekByte returns the first byte waiting in nc's socket without taking it
// (MSG_PEEK), waiting for one within nc's read deadline.
func peekByte(nc net.Conn) (byte, error) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return 0, errors.New("proxy protocol: not a socket")
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, err
	}
	return peek(rc)
}

// proxyListener reads the PROXY header of each connection it accepts
// lazily, on the connection's first Read or RemoteAddr: an HTTP server
// calls both on the connection's own goroutine (with TLS, the handshake
// reads through it), so the accept loop never waits for a header.
type proxyListener struct {
	net.Listener
	p    *Proxy
	log  *slog.Logger
	name string
}

func (l *proxyListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &proxyConn{Conn: nc, l: l}, nil
}

// proxyConn is a connection whose header is read once, before its first
// byte; when the policy refuses it, every Read fails (the server closes it).
type proxyConn struct {
	net.Conn
	l      *proxyListener
	once   sync.Once
	client net.Addr
	err    error
}

func (c *proxyConn) header() error {
	c.once.Do(func() {
		c.client, c.err = c.l.p.readHeader(c.Conn, c.l.log, c.l.name)
		if c.err != nil {
			c.client = c.Conn.RemoteAddr()
			if errors.Is(c.err, errProxyRefused) {
				c.err = errProxyRefused // keep the server's logs free of a wrapped cause
			}
		}
	})
	return c.err
}

func (c *proxyConn) Read(b []byte) (int, error) {
	if err := c.header(); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

func (c *proxyConn) RemoteAddr() net.Addr {
	_ = c.header()
	return c.client
}
