package listener

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/pires/go-proxyproto"
)

// The client the tests' headers claim.
var (
	claimed4 = &net.TCPAddr{IP: net.ParseIP("203.0.113.7").To4(), Port: 51000}
	claimed6 = &net.TCPAddr{IP: net.ParseIP("2001:db8::7"), Port: 51000}
)

func loopbackTrusted() []netip.Prefix {
	return []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
}

// elsewhereTrusted trusts a network the tests' loopback peer is not in.
func elsewhereTrusted() []netip.Prefix { return []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")} }

// logBuffer collects a listener's log lines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func listenProxy(t *testing.T, p *Proxy) (*TCP, <-chan Conn, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	l, err := ListenTCP("mqtt", "127.0.0.1:0", slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	l.AcceptProxy(p)
	return l, serve(t, l), logs
}

func dial(t *testing.T, addr net.Addr) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr.String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func headerBytes(t *testing.T, h *proxyproto.Header) []byte {
	t.Helper()
	b, err := h.Format()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func proxyHeader(version byte, src *net.TCPAddr) *proxyproto.Header {
	tp := proxyproto.TCPv4
	dst := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1883}
	if src.IP.To4() == nil {
		tp, dst = proxyproto.TCPv6, &net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 1883}
	}
	return &proxyproto.Header{Version: version, Command: proxyproto.PROXY, TransportProtocol: tp, SourceAddr: src, DestinationAddr: dst}
}

// closedByServer checks that the server ends c without handing a
// connection over.
func closedByServer(t *testing.T, c net.Conn, conns <-chan Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Errorf("read: %v, want the server's close", err)
	}
	select {
	case got := <-conns:
		t.Errorf("connection from %v handed over", got.ClientAddr)
	case <-time.After(50 * time.Millisecond):
	}
}

// TestProxyHeader: from a trusted peer, a header's source is the client's
// address (v2 TCP4 and TCP6, v1); LOCAL keeps the socket's; the MQTT bytes
// after the header are all still in the socket, which is Raw.
func TestProxyHeader(t *testing.T) {
	local := &proxyproto.Header{Version: 2, Command: proxyproto.LOCAL}
	for _, tc := range []struct {
		name   string
		h      *proxyproto.Header
		wantIP string // "" the socket's peer
	}{
		{"v2 tcp4", proxyHeader(2, claimed4), "203.0.113.7:51000"},
		{"v2 tcp6", proxyHeader(2, claimed6), "[2001:db8::7]:51000"},
		{"v1 tcp4", proxyHeader(1, claimed4), "203.0.113.7:51000"},
		{"v1 tcp6", proxyHeader(1, claimed6), "[2001:db8::7]:51000"},
		{"v2 local", local, ""},
	} {
		for _, mode := range []ProxyMode{ProxyOptional, ProxyRequired} {
			t.Run(tc.name+" "+string(mode), func(t *testing.T) {
				l, conns, _ := listenProxy(t, &Proxy{Mode: mode, Trusted: loopbackTrusted(), Timeout: 5 * time.Second})
				client := dial(t, l.Addr())
				// The CONNECT in the same write: a reader that buffered
				// past the header would take it from the socket.
				if _, err := client.Write(append(headerBytes(t, tc.h), "\x10\x02ab"...)); err != nil {
					t.Fatal(err)
				}
				c := accepted(t, conns)
				want := tc.wantIP
				if want == "" {
					want = client.LocalAddr().String()
				}
				if c.ClientAddr.String() != want {
					t.Errorf("client address %v, want %v", c.ClientAddr, want)
				}
				if raw, ok := c.Raw.(net.Conn); !ok || c.NetConn != raw {
					t.Errorf("Raw %v, want the socket that is NetConn", c.Raw)
				}
				if got := readN(t, c, 4); got != "\x10\x02ab" {
					t.Errorf("stream %q, want the client's bytes after the header", got)
				}
			})
		}
	}
}

// TestProxyHeaderSplit: a header that arrives in pieces is read whole.
func TestProxyHeaderSplit(t *testing.T) {
	for _, version := range []byte{1, 2} {
		l, conns, _ := listenProxy(t, &Proxy{Mode: ProxyRequired, Trusted: loopbackTrusted(), Timeout: 5 * time.Second})
		client := dial(t, l.Addr())
		b := append(headerBytes(t, proxyHeader(version, claimed6)), "\x10\x00"...)
		for _, piece := range [][]byte{b[:1], b[1:7], b[7:14], b[14:20], b[20:]} {
			if _, err := client.Write(piece); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond) // real time: each piece a TCP segment of its own, read on its own
		}
		c := accepted(t, conns)
		if c.ClientAddr.String() != "[2001:db8::7]:51000" {
			t.Errorf("v%d: client address %v, want the header's", version, c.ClientAddr)
		}
		if got := readN(t, c, 2); got != "\x10\x00" {
			t.Errorf("v%d: stream %q, want the bytes after the header", version, got)
		}
	}
}

// TestProxyNoHeader: optional serves a trusted or untrusted peer that
// sends no header with the socket's address; required closes it.
func TestProxyNoHeader(t *testing.T) {
	for _, tc := range []struct {
		mode    ProxyMode
		trusted []netip.Prefix
		served  bool
		log     string
	}{
		{ProxyOptional, loopbackTrusted(), true, ""},
		{ProxyOptional, elsewhereTrusted(), true, ""},
		{ProxyRequired, loopbackTrusted(), false, "proxy protocol: no header"},
		{ProxyRequired, elsewhereTrusted(), false, "proxy protocol: peer not trusted"},
	} {
		l, conns, logs := listenProxy(t, &Proxy{Mode: tc.mode, Trusted: tc.trusted, Timeout: 5 * time.Second})
		client := dial(t, l.Addr())
		if _, err := client.Write([]byte("\x10\x00")); err != nil {
			t.Fatal(err)
		}
		if !tc.served {
			closedByServer(t, client, conns)
			if !strings.Contains(logs.String(), tc.log) || !strings.Contains(logs.String(), "level=INFO") {
				t.Errorf("%s, trusted %v: log %q, want %q at info", tc.mode, tc.trusted, logs, tc.log)
			}
			continue
		}
		c := accepted(t, conns)
		if c.ClientAddr.String() != client.LocalAddr().String() || c.Raw == nil {
			t.Errorf("%s, trusted %v: client %v raw %v, want the socket's peer and the socket", tc.mode, tc.trusted, c.ClientAddr, c.Raw)
		}
		if got := readN(t, c, 2); got != "\x10\x00" {
			t.Errorf("%s: stream %q, want all the client's bytes", tc.mode, got)
		}
	}
}

// TestProxyUntrustedHeader: a header from a peer outside the trusted
// networks is refused, in either mode: it cannot set its own address.
func TestProxyUntrustedHeader(t *testing.T) {
	for _, mode := range []ProxyMode{ProxyOptional, ProxyRequired} {
		l, conns, logs := listenProxy(t, &Proxy{Mode: mode, Trusted: elsewhereTrusted(), Timeout: 5 * time.Second})
		client := dial(t, l.Addr())
		if _, err := client.Write(append(headerBytes(t, proxyHeader(2, claimed4)), "\x10\x00"...)); err != nil {
			t.Fatal(err)
		}
		closedByServer(t, client, conns)
		if !strings.Contains(logs.String(), "level=INFO") || !strings.Contains(logs.String(), "proxy protocol:") {
			t.Errorf("%s: log %q, want the refusal at info", mode, logs)
		}
	}
}

// TestProxyBadHeader: a header that starts like one but does not parse
// closes the connection.
func TestProxyBadHeader(t *testing.T) {
	l, conns, _ := listenProxy(t, &Proxy{Mode: ProxyOptional, Trusted: loopbackTrusted(), Timeout: 5 * time.Second})
	client := dial(t, l.Addr())
	if _, err := client.Write([]byte("PROXY TCP4 not-an-address\r\n\x10\x00")); err != nil {
		t.Fatal(err)
	}
	closedByServer(t, client, conns)
}

// TestProxySilentClient: a client that never sends its header holds up no
// other client's accept, and is closed when the timeout passes.
func TestProxySilentClient(t *testing.T) {
	l, conns, _ := listenProxy(t, &Proxy{Mode: ProxyRequired, Trusted: loopbackTrusted(), Timeout: 300 * time.Millisecond})
	silent := dial(t, l.Addr())
	time.Sleep(20 * time.Millisecond) // real time: the kernel hands the silent client to accept first
	start := time.Now()
	other := dial(t, l.Addr())
	if _, err := other.Write(headerBytes(t, proxyHeader(2, claimed4))); err != nil {
		t.Fatal(err)
	}
	c := accepted(t, conns)
	if c.ClientAddr.String() != claimed4.String() {
		t.Errorf("client address %v, want the second client's header's", c.ClientAddr)
	}
	if d := time.Since(start); d > 250*time.Millisecond {
		t.Errorf("second client handed over after %v, behind the silent one", d)
	}
	closedByServer(t, silent, conns)
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("silent client closed after %v, want about the 300ms timeout", d)
	}
}

// TestProxyTLS: in front of TLS the header comes first, then the
// handshake; the handed-over connection has the header's address.
func TestProxyTLS(t *testing.T) {
	p := newPKI(t)
	l, err := ListenTLS("mqtts", "127.0.0.1:0", openCerts(t, p.files, nil).ServerConfig(), 5*time.Second, discard())
	if err != nil {
		t.Fatal(err)
	}
	l.AcceptProxy(&Proxy{Mode: ProxyRequired, Trusted: loopbackTrusted(), Timeout: 5 * time.Second})
	conns := serve(t, l)
	raw := dial(t, l.Addr())
	if _, err := raw.Write(headerBytes(t, proxyHeader(2, claimed4))); err != nil {
		t.Fatal(err)
	}
	tc := tls.Client(raw, p.clientConfig())
	_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := tc.Write([]byte("\x10\x00")); err != nil {
		t.Fatal(err)
	}
	c := accepted(t, conns)
	if c.ClientAddr.String() != claimed4.String() || c.TLS == nil || c.Transport != TransportTLS {
		t.Errorf("client %v, TLS %v, transport %q: want the header's address over TLS", c.ClientAddr, c.TLS, c.Transport)
	}
	if got := readN(t, c, 2); got != "\x10\x00" {
		t.Errorf("stream %q, want the client's bytes", got)
	}
}

// TestProxyWebSocket: the ws listener reads the header before the HTTP
// request; an untrusted peer's header is refused.
func TestProxyWebSocket(t *testing.T) {
	for _, trusted := range [][]netip.Prefix{loopbackTrusted(), elsewhereTrusted()} {
		l, conns := listenWebSocket(t, WebSocketOptions{Proxy: &Proxy{Mode: ProxyOptional, Trusted: trusted, Timeout: 5 * time.Second}}, discard())
		hdr := headerBytes(t, proxyHeader(2, claimed4))
		client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err == nil {
				_, err = c.Write(hdr)
			}
			return c, err
		}}}
		ws, _, err := dialWS(t, "ws://"+l.Addr().String()+WebSocketPath, &websocket.DialOptions{HTTPClient: client})
		if trusted[0].Addr().IsLoopback() {
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := ws.Write(ctx, websocket.MessageBinary, []byte("\x10\x00")); err != nil {
				t.Fatal(err)
			}
			cancel()
			c := accepted(t, conns)
			if c.ClientAddr.String() != claimed4.String() {
				t.Errorf("client address %v, want the header's", c.ClientAddr)
			}
			if got := readN(t, c, 2); got != "\x10\x00" {
				t.Errorf("stream %q, want the client's message", got)
			}
			continue
		}
		if err == nil {
			t.Error("an untrusted peer's header was accepted on the ws listener")
		}
		select {
		case c := <-conns:
			t.Errorf("connection from %v handed over", c.ClientAddr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func TestParseProxy(t *testing.T) {
	for _, s := range []string{"", "off", "optional", "required"} {
		if _, err := ParseProxyMode(s); err != nil {
			t.Errorf("ParseProxyMode(%q): %v", s, err)
		}
	}
	if _, err := ParseProxyMode("on"); err == nil {
		t.Error(`ParseProxyMode("on") accepted`)
	}
	ps, err := ParseProxyTrusted([]string{"10.1.2.3/8", "fd00::/8", "192.0.2.9"})
	if err != nil {
		t.Fatal(err)
	}
	if got := ps[0].String() + " " + ps[1].String() + " " + ps[2].String(); got != "10.0.0.0/8 fd00::/8 192.0.2.9/32" {
		t.Errorf("parsed %s", got)
	}
	for _, bad := range []string{"10.0.0.0/33", "example.com", "::ffff:10.0.0.0/104"} {
		if _, err := ParseProxyTrusted([]string{bad}); err == nil {
			t.Errorf("ParseProxyTrusted(%q) accepted", bad)
		}
	}
}
