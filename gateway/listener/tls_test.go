package listener

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coder/websocket"

	"github.com/shoal-mqtt/shoal/internal/testutil/testlog"
	"github.com/shoal-mqtt/shoal/internal/testutil/testpki"
)

// pki is a test's CA, the server certificate it issued, and the files
// of both.
type pki struct {
	ca     *testpki.CA
	server *testpki.Leaf
	files  TLSFiles
}

// newPKI writes a CA and a server certificate it issued to a temporary
// directory; the CA file is the client CA file too.
func newPKI(t *testing.T) *pki {
	t.Helper()
	dir := t.TempDir()
	ca := testpki.NewCA(t, "test CA")
	srv := ca.Server(t)
	return &pki{ca: ca, server: srv, files: TLSFiles{
		CertFile:     testpki.WriteFile(t, dir, "server.pem", srv.CertPEM),
		KeyFile:      testpki.WriteFile(t, dir, "server-key.pem", srv.KeyPEM),
		ClientCAFile: testpki.WriteFile(t, dir, "ca.pem", ca.PEM),
	}}
}

// listenTLS serves a TLS listener of certs until the test ends.
func listenTLS(t *testing.T, certs *Certificates, handshakeTimeout time.Duration) (*TCP, <-chan Conn) {
	t.Helper()
	l, err := ListenTLS("mqtts", "127.0.0.1:0", certs.ServerConfig(), handshakeTimeout, discard())
	if err != nil {
		t.Fatal(err)
	}
	return l, serve(t, l)
}

func openCerts(t *testing.T, files TLSFiles, log *slog.Logger) *Certificates {
	t.Helper()
	certs, err := OpenCertificates(files, log)
	if err != nil {
		t.Fatal(err)
	}
	return certs
}

// clientConfig trusts p's CA and presents cert, if any, whatever CAs the
// server asks for (crypto/tls would send none of another CA).
func (p *pki) clientConfig(cert ...*testpki.Leaf) *tls.Config {
	cfg := &tls.Config{RootCAs: p.ca.Pool(), ServerName: "localhost"}
	if len(cert) > 0 {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &cert[0].TLS, nil
		}
	}
	return cfg
}

// dialTLS connects to addr and completes the handshake; the connection is
// closed when the test ends.
func dialTLS(t *testing.T, addr string, cfg *tls.Config) (*tls.Conn, error) {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, nil
}

// refused checks that the server ends a connection whose handshake the
// client completed (in TLS 1.3 the server verifies the client's
// certificate after the client's side is done) and hands nothing over.
func refused(t *testing.T, c *tls.Conn, conns <-chan Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Errorf("read after the handshake: %v, want the server's alert", err)
	}
	select {
	case got := <-conns:
		t.Errorf("connection from %v handed over", got.ClientAddr)
	case <-time.After(100 * time.Millisecond):
	}
}

// TestTLSVersions: TLS 1.1 is refused, TLS 1.2 and 1.3 accepted; the
// connection is handed over with its TLS state and no raw socket, and
// the stream is the client's plaintext.
func TestTLSVersions(t *testing.T) {
	p := newPKI(t)
	p.files.ClientCAFile = ""
	l, conns := listenTLS(t, openCerts(t, p.files, nil), 5*time.Second)

	old := p.clientConfig()
	old.MinVersion, old.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
	if c, err := dialTLS(t, l.Addr().String(), old); err == nil {
		t.Errorf("TLS 1.1 handshake succeeded (version %x)", c.ConnectionState().Version)
	}
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		cfg := p.clientConfig()
		cfg.MinVersion, cfg.MaxVersion = v, v
		client, err := dialTLS(t, l.Addr().String(), cfg)
		if err != nil {
			t.Fatalf("%s: %v", tls.VersionName(v), err)
		}
		if _, err := client.Write([]byte("\x10\x00")); err != nil {
			t.Fatal(err)
		}
		c := accepted(t, conns)
		if c.TLS == nil || c.TLS.Version != v || !c.TLS.HandshakeComplete {
			t.Fatalf("%s: Conn.TLS %+v, want the completed handshake's state", tls.VersionName(v), c.TLS)
		}
		if c.Transport != TransportTLS || c.Listener != "mqtts" || c.Raw != nil {
			t.Errorf("transport %q, listener %q, raw %v: want tls, mqtts, no raw socket", c.Transport, c.Listener, c.Raw)
		}
		if c.ClientAddr.String() != client.LocalAddr().String() {
			t.Errorf("client address %v, want %v", c.ClientAddr, client.LocalAddr())
		}
		if c.PeerCertificate() != nil {
			t.Error("a peer certificate without a client CA")
		}
		if got := readN(t, c, 2); got != "\x10\x00" {
			t.Errorf("stream %q, want the client's plaintext", got)
		}
	}
}

// TestMutualTLS: with a client CA, a client may present a certificate of
// that CA (it is on the Conn) or none; one of another CA is refused. With
// require_client_cert, one without a certificate is refused too.
func TestMutualTLS(t *testing.T) {
	p := newPKI(t)
	good := p.ca.Client(t, "alice")
	foreign := testpki.NewCA(t, "other CA").Client(t, "mallory")
	for _, require := range []bool{false, true} {
		name := "optional"
		if require {
			name = "required"
		}
		t.Run(name, func(t *testing.T) {
			files := p.files
			files.RequireClientCert = require
			l, conns := listenTLS(t, openCerts(t, files, nil), 5*time.Second)
			addr := l.Addr().String()

			if _, err := dialTLS(t, addr, p.clientConfig(good)); err != nil {
				t.Fatalf("client certificate of the CA: %v", err)
			}
			c := accepted(t, conns)
			if pc := c.PeerCertificate(); pc == nil || pc.Subject.CommonName != "alice" {
				t.Fatalf("peer certificate %v, want alice's", pc)
			}
			if len(c.TLS.VerifiedChains) == 0 {
				t.Error("the client's certificate was not verified")
			}

			if client, err := dialTLS(t, addr, p.clientConfig(foreign)); err == nil {
				refused(t, client, conns)
			}

			client, err := dialTLS(t, addr, p.clientConfig())
			if require {
				if err == nil {
					refused(t, client, conns)
				}
				return
			}
			if err != nil {
				t.Fatalf("no client certificate, none required: %v", err)
			}
			if c := accepted(t, conns); c.PeerCertificate() != nil {
				t.Errorf("peer certificate %v, want none", c.PeerCertificate().Subject)
			}
		})
	}
}

// TestTLSResumedSessionChecksCA: a client that resumes a session after
// its CA was taken out of the client CA file is refused, as a full
// handshake would refuse it.
func TestTLSResumedSessionChecksCA(t *testing.T) {
	p := newPKI(t)
	p.files.RequireClientCert = true
	certs := openCerts(t, p.files, nil)
	l, conns := listenTLS(t, certs, 5*time.Second)
	alice := p.ca.Client(t, "alice")
	// dial connects a client of its own session cache and reads the
	// session ticket (in TLS 1.3 it follows the handshake).
	dial := func(cfg *tls.Config) *tls.Conn {
		t.Helper()
		c, err := dialTLS(t, l.Addr().String(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		accepted(t, conns)
		_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		_, _ = c.Read(make([]byte, 1))
		return c
	}
	a, b := p.clientConfig(alice), p.clientConfig(alice)
	a.ClientSessionCache, b.ClientSessionCache = tls.NewLRUClientSessionCache(1), tls.NewLRUClientSessionCache(1)
	dial(a)
	dial(b)
	if !dial(a).ConnectionState().DidResume {
		t.Fatal("the session was not resumed: the test checks nothing")
	}

	testpki.WriteFile(t, filepath.Dir(p.files.ClientCAFile), "ca.pem", testpki.NewCA(t, "new CA").PEM)
	if err := certs.Reload(); err != nil {
		t.Fatal(err)
	}
	c, err := dialTLS(t, l.Addr().String(), b)
	if err != nil {
		return // refused in the handshake
	}
	refused(t, c, conns)
}

// serial returns the serial number of the server certificate a new
// handshake with addr sees.
func serial(t *testing.T, addr string, cfg *tls.Config) string {
	t.Helper()
	c, err := dialTLS(t, addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// replaceServer writes a new server certificate of p's CA to p's files.
func (p *pki) replaceServer(t *testing.T) *testpki.Leaf {
	t.Helper()
	leaf := p.ca.Server(t)
	// A new file renamed over the old one, as a secret volume or certbot
	// replaces it.
	for path, b := range map[string][]byte{p.files.CertFile: leaf.CertPEM, p.files.KeyFile: leaf.KeyPEM} {
		tmp := testpki.WriteFile(t, filepath.Dir(path), filepath.Base(path)+".new", b)
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	return leaf
}

// TestTLSReload: Reload swaps the server certificate for the new
// handshakes; a connection established before keeps working.
func TestTLSReload(t *testing.T) {
	p := newPKI(t)
	certs := openCerts(t, p.files, nil)
	l, conns := listenTLS(t, certs, 5*time.Second)
	addr := l.Addr().String()

	before, err := dialTLS(t, addr, p.clientConfig())
	if err != nil {
		t.Fatal(err)
	}
	server := accepted(t, conns)
	if got := before.ConnectionState().PeerCertificates[0].SerialNumber; got.Cmp(p.server.Cert.SerialNumber) != 0 {
		t.Fatalf("serial %v, want the first certificate's %v", got, p.server.Cert.SerialNumber)
	}

	next := p.replaceServer(t)
	if err := certs.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := serial(t, addr, p.clientConfig()); got != next.Cert.SerialNumber.String() {
		t.Errorf("a new handshake sees serial %s, want the new certificate's %s", got, next.Cert.SerialNumber)
	}
	accepted(t, conns)

	// The connection of before carries bytes both ways.
	if _, err := before.Write([]byte("ping")); err != nil {
		t.Fatalf("write on the connection of before the reload: %v", err)
	}
	if got := readN(t, server, 4); got != "ping" {
		t.Errorf("server read %q", got)
	}
	if _, err := server.NetConn.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	_ = before.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, 4)
	if _, err := io.ReadFull(before, b); err != nil || string(b) != "pong" {
		t.Errorf("client read %q, %v", b, err)
	}
}

// TestTLSReloadBadFiles: files that do not load keep the material in
// force; the error names the file.
func TestTLSReloadBadFiles(t *testing.T) {
	p := newPKI(t)
	certs := openCerts(t, p.files, nil)
	l, conns := listenTLS(t, certs, 5*time.Second)
	addr := l.Addr().String()
	want := p.server.Cert.SerialNumber.String()
	otherKey := p.ca.Server(t).KeyPEM

	for _, tc := range []struct {
		name, file string
		content    []byte
	}{
		{"certificate not PEM", p.files.CertFile, []byte("not a certificate")},
		{"key of another certificate", p.files.KeyFile, otherKey},
		{"client CA not PEM", p.files.ClientCAFile, []byte("no CA here")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig, err := os.ReadFile(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			defer testpki.WriteFile(t, filepath.Dir(tc.file), filepath.Base(tc.file), orig)
			testpki.WriteFile(t, filepath.Dir(tc.file), filepath.Base(tc.file), tc.content)
			err = certs.Reload()
			if err == nil || !strings.Contains(err.Error(), tc.file) {
				t.Fatalf("reload: %v, want an error naming %s", err, tc.file)
			}
			if got := serial(t, addr, p.clientConfig()); got != want {
				t.Errorf("serial %s after a failed reload, want the previous %s", got, want)
			}
			accepted(t, conns)
		})
	}
	if err := os.Remove(p.files.KeyFile); err != nil {
		t.Fatal(err)
	}
	if err := certs.Reload(); err == nil || !strings.Contains(err.Error(), p.files.KeyFile) {
		t.Fatalf("reload without the key file: %v, want an error naming it", err)
	}
	if got := serial(t, addr, p.clientConfig()); got != want {
		t.Errorf("serial %s after a failed reload, want the previous %s", got, want)
	}
}

// pipeSerial completes a handshake of cfg with certs' server side over
// net.Pipe and returns the serial number of the server's certificate.
func pipeSerial(t *testing.T, certs *Certificates, cfg *tls.Config) string {
	t.Helper()
	sc, cc := net.Pipe()
	defer func() { _ = sc.Close(); _ = cc.Close() }()
	srv := tls.Server(sc, certs.ServerConfig())
	errc := make(chan error, 1)
	go func() { errc <- srv.Handshake() }()
	c := tls.Client(cc, cfg)
	if err := c.Handshake(); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("the server's handshake: %v", err)
	}
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// TestTLSWatch: the watch reloads replaced files at its next poll, and
// logs a broken version once, not every poll. It runs in a synctest
// bubble, its handshakes over net.Pipe: the polls come on the bubble's
// clock.
func TestTLSWatch(t *testing.T) { synctest.Test(t, testTLSWatch) }

func testTLSWatch(t *testing.T) {
	const interval = 10 * time.Millisecond
	p := newPKI(t)
	var logs testlog.Buffer
	certs := openCerts(t, p.files, slog.New(slog.NewTextHandler(&logs, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); certs.Watch(ctx, interval) }()
	defer func() { cancel(); <-done }()
	// poll lets one interval pass, on the bubble's clock, and the watch's
	// poll end.
	poll := func() { time.Sleep(interval); synctest.Wait() }
	wantSerial := func(what string, want *testpki.Leaf) {
		t.Helper()
		if got := pipeSerial(t, certs, p.clientConfig()); got != want.Cert.SerialNumber.String() {
			t.Fatalf("serial %s %s, want %s", got, what, want.Cert.SerialNumber)
		}
	}
	next := p.replaceServer(t)
	poll()
	wantSerial("a poll after the files were replaced", next)

	// Renamed into place: written in place, the watch could see the
	// truncated file first, a second broken version.
	tmp := testpki.WriteFile(t, filepath.Dir(p.files.CertFile), "garbage.pem", []byte("garbage"))
	if err := os.Rename(tmp, p.files.CertFile); err != nil {
		t.Fatal(err)
	}
	poll()
	if n := len(logs.Lines("not reloaded")); n != 1 {
		t.Fatalf("%d log lines of the broken file a poll after it was written, want 1:\n%s", n, logs.String())
	}
	for range 10 {
		poll()
	}
	if n := len(logs.Lines("not reloaded")); n != 1 {
		t.Errorf("%d log lines of the broken file ten polls later, want 1:\n%s", n, logs.String())
	}
	wantSerial("with a broken file", next)
	last := p.replaceServer(t)
	poll()
	wantSerial("a poll after the files were replaced again", last)
}

// TestTLSSlowHandshake: a client that connects and sends nothing holds up
// no other client's handshake, and is closed once the handshake timeout
// passed.
func TestTLSSlowHandshake(t *testing.T) {
	p := newPKI(t)
	certs := openCerts(t, p.files, nil)

	// Behind a silent client, a second one is handed over at once (a
	// handshake in the accept loop would wait the minute, and the dial
	// time out).
	l, conns := listenTLS(t, certs, time.Minute)
	silent, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = silent.Close() }()
	if _, err := dialTLS(t, l.Addr().String(), p.clientConfig()); err != nil {
		t.Fatalf("handshake behind a silent client: %v", err)
	}
	accepted(t, conns)

	// A silent client is closed after the timeout.
	const timeout = 300 * time.Millisecond
	l, _ = listenTLS(t, certs, timeout)
	silent, err = net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = silent.Close() }()
	_ = silent.SetReadDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	n, err := silent.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("a silent client still open after 10s, handshake timeout %v", timeout)
	}
	if d := time.Since(start); n != 0 || d < timeout/2 {
		t.Errorf("read %d bytes, %v after %v: want the end of the stream after the timeout", n, err, d)
	}
}

// TestOpenCertificatesErrors: the first load fails on a missing or
// broken file, naming it, and on settings that cannot work.
func TestOpenCertificatesErrors(t *testing.T) {
	p := newPKI(t)
	dir := filepath.Dir(p.files.CertFile)
	broken := testpki.WriteFile(t, dir, "broken.pem", []byte("-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n"))
	missing := filepath.Join(dir, "missing.pem")
	for _, tc := range []struct {
		name string
		mut  func(*TLSFiles)
		want string
	}{
		{"missing certificate", func(f *TLSFiles) { f.CertFile = missing }, missing},
		{"missing key", func(f *TLSFiles) { f.KeyFile = missing }, missing},
		{"missing client CA", func(f *TLSFiles) { f.ClientCAFile = missing }, missing},
		{"broken certificate", func(f *TLSFiles) { f.CertFile = broken }, broken},
		{"broken client CA", func(f *TLSFiles) { f.ClientCAFile = p.files.KeyFile }, p.files.KeyFile},
		{"no certificate", func(f *TLSFiles) { f.CertFile = "" }, "certificate file"},
		{"required without CA", func(f *TLSFiles) { f.ClientCAFile, f.RequireClientCert = "", true }, "client CA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := p.files
			tc.mut(&files)
			if _, err := OpenCertificates(files, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// TestCertIdentity: each field gives its value, the first of several
// subject alternative names; a missing one or an unknown field is an
// error.
func TestCertIdentity(t *testing.T) {
	ca := testpki.NewCA(t, "CA")
	u1, _ := url.Parse("spiffe://example.org/device/1")
	u2, _ := url.Parse("spiffe://example.org/device/2")
	full := ca.Issue(t, &x509.Certificate{
		Subject:        pkix.Name{CommonName: "sensor-1", Organization: []string{"Acme"}},
		DNSNames:       []string{"sensor-1.example.org", "sensor.example.org"},
		EmailAddresses: []string{"ops@example.org", "other@example.org"},
		URIs:           []*url.URL{u1, u2},
		ExtKeyUsage:    []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}).Cert
	bare := ca.Issue(t, &x509.Certificate{ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}).Cert
	for _, tc := range []struct{ field, want string }{
		{IdentityCN, "sensor-1"},
		{IdentitySANDNS, "sensor-1.example.org"},
		{IdentitySANEmail, "ops@example.org"},
		{IdentitySANURI, "spiffe://example.org/device/1"},
	} {
		got, err := CertIdentity(full, tc.field)
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.field, got, err, tc.want)
		}
		if err := CheckIdentityField(tc.field); err != nil {
			t.Errorf("CheckIdentityField(%q): %v", tc.field, err)
		}
		if got, err := CertIdentity(bare, tc.field); err == nil {
			t.Errorf("%s of a certificate without it: %q, want an error", tc.field, got)
		}
	}
	if _, err := CertIdentity(full, "serial"); err == nil || !strings.Contains(err.Error(), `"serial"`) {
		t.Errorf("unknown field: %v, want an error naming it", err)
	}
	if err := CheckIdentityField("CN"); err == nil {
		t.Error("CheckIdentityField(CN): nil, want an error (fields are lower case)")
	}
	if _, err := CertIdentity(nil, IdentityCN); err == nil {
		t.Error("no certificate: want an error")
	}
}

// listenWebSocket serves a WebSocket listener until the test ends.
func listenWebSocket(t *testing.T, opts WebSocketOptions, log *slog.Logger) (*WebSocket, <-chan Conn) {
	t.Helper()
	opts.ReadLimit, opts.HeaderTimeout = 1<<10, 5*time.Second
	l, err := ListenWebSocket("wss", "127.0.0.1:0", opts, log)
	if err != nil {
		t.Fatal(err)
	}
	return l, serve(t, l)
}

// dialWS opens a WebSocket to u with subprotocol mqtt; the response's
// status is 0 when there is none.
func dialWS(t *testing.T, u string, opts *websocket.DialOptions) (*websocket.Conn, int, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	opts.Subprotocols = []string{"mqtt"}
	ws, resp, err := websocket.Dial(ctx, u, opts)
	status := 0
	if resp != nil {
		status = resp.StatusCode
		if resp.Body != nil {
			_ = resp.Body.Close()
		}
	}
	if err == nil {
		t.Cleanup(func() { _ = ws.CloseNow() })
	}
	return ws, status, err
}

// TestWSS: MQTT over WebSocket over TLS, with a client certificate: the
// connection is handed over with its TLS state and the client's
// certificate.
func TestWSS(t *testing.T) {
	p := newPKI(t)
	l, conns := listenWebSocket(t, WebSocketOptions{TLS: openCerts(t, p.files, nil).ServerConfig()}, discard())
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: p.clientConfig(p.ca.Client(t, "browser"))}}
	ws, _, err := dialWS(t, "wss://"+l.Addr().String()+WebSocketPath, &websocket.DialOptions{HTTPClient: client})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ws.Write(ctx, websocket.MessageBinary, []byte("\x10\x00")); err != nil {
		t.Fatal(err)
	}
	c := accepted(t, conns)
	if c.Transport != TransportWSS || c.Raw != nil || c.TLS == nil || c.TLS.Version < tls.VersionTLS12 {
		t.Fatalf("transport %q, raw %v, TLS %+v: want wss, no raw socket, the TLS state", c.Transport, c.Raw, c.TLS)
	}
	if pc := c.PeerCertificate(); pc == nil || pc.Subject.CommonName != "browser" {
		t.Errorf("peer certificate %v, want the client's", pc)
	}
	if got := readN(t, c, 2); got != "\x10\x00" {
		t.Errorf("stream %q, want the client's message", got)
	}

	// A plain HTTP client on the TLS port gets no upgrade.
	if _, _, err := dialWS(t, "ws://"+l.Addr().String()+WebSocketPath, &websocket.DialOptions{}); err == nil {
		t.Error("a WebSocket without TLS upgraded on the wss listener")
	}
}

// TestWebSocketOrigin: a browser's upgrade from a foreign origin gets 403
// and a log line; one from the listener's own origin, from an allowed
// pattern, or without Origin (not a browser) is handed over.
func TestWebSocketOrigin(t *testing.T) {
	var logs testlog.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	l, conns := listenWebSocket(t, WebSocketOptions{AllowedOrigins: []string{"https://*.example.com", "dash.example.org"}}, log)
	u := "ws://" + l.Addr().String() + WebSocketPath
	for _, tc := range []struct {
		origin string
		ok     bool
	}{
		{"", true},
		{"http://" + l.Addr().String(), true}, // the page is served by the listener's own host
		{"https://app.example.com", true},
		{"http://app.example.com", false}, // the pattern names https
		{"https://example.com", false},
		{"http://dash.example.org", true}, // no scheme in the pattern: any
		{"https://evil.example.net", false},
		{"null", false}, // a sandboxed page, a file
	} {
		t.Run(tc.origin, func(t *testing.T) {
			h := http.Header{}
			if tc.origin != "" {
				h.Set("Origin", tc.origin)
			}
			_, status, err := dialWS(t, u, &websocket.DialOptions{HTTPHeader: h})
			if tc.ok {
				if err != nil {
					t.Fatalf("refused (status %d): %v", status, err)
				}
				accepted(t, conns)
				return
			}
			if err == nil || status != http.StatusForbidden {
				t.Fatalf("upgrade: %v, status %d; want 403", err, status)
			}
			if !bytes.Contains([]byte(logs.String()), []byte("websocket origin refused")) ||
				len(logs.Lines(`origin=`+tc.origin)) == 0 {
				t.Errorf("no log line of the refused origin %s:\n%s", tc.origin, logs.String())
			}
			select {
			case c := <-conns:
				t.Errorf("connection from %v handed over", c.ClientAddr)
			default:
			}
		})
	}
}

// TestWebSocketOriginPatternChecked: a malformed pattern is refused when
// the listener is made, not silently at each upgrade.
func TestWebSocketOriginPatternChecked(t *testing.T) {
	if _, err := ListenWebSocket("ws", "127.0.0.1:0", WebSocketOptions{AllowedOrigins: []string{"[a-"}}, discard()); err == nil || !strings.Contains(err.Error(), "[a-") {
		t.Fatalf("err %v, want the bad pattern named", err)
	}
	if err := CheckOrigins([]string{"*.example.com", "https://x.example.org"}); err != nil {
		t.Fatal(err)
	}
}
