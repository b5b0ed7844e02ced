package broker_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/eclipse/paho.golang/paho"

	"github.com/shoal-mqtt/shoal/compose/broker"
	"github.com/shoal-mqtt/shoal/compose/config"
	"github.com/shoal-mqtt/shoal/gateway"
	"github.com/shoal-mqtt/shoal/gateway/listener"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
	"github.com/shoal-mqtt/shoal/internal/testutil/testlog"
	"github.com/shoal-mqtt/shoal/internal/testutil/testpki"
)

// tlsFiles is a test's CA and the files of the certificates it issued:
// the server's (for localhost and 127.0.0.1), and a client's, alice's.
type tlsFiles struct {
	ca                              *testpki.CA
	dir                             string
	caFile, certFile, keyFile       string
	clientCertFile, clientKeyFile   string
	foreignCertFile, foreignKeyFile string // a client certificate of another CA
	client                          *testpki.Leaf
	serverSerial                    string
}

func newTLSFiles(t *testing.T) *tlsFiles {
	t.Helper()
	dir := t.TempDir()
	ca := testpki.NewCA(t, "shoal test CA")
	srv, alice := ca.Server(t), ca.Client(t, "t-alice") // an identity of tenant t
	foreign := testpki.NewCA(t, "other CA").Client(t, "mallory")
	w := func(name string, b []byte) string { return testpki.WriteFile(t, dir, name, b) }
	return &tlsFiles{
		ca: ca, dir: dir, client: alice, serverSerial: srv.Cert.SerialNumber.String(),
		caFile: w("ca.pem", ca.PEM), certFile: w("server.pem", srv.CertPEM), keyFile: w("server-key.pem", srv.KeyPEM),
		clientCertFile: w("alice.pem", alice.CertPEM), clientKeyFile: w("alice-key.pem", alice.KeyPEM),
		foreignCertFile: w("mallory.pem", foreign.CertPEM), foreignKeyFile: w("mallory-key.pem", foreign.KeyPEM),
	}
}

// startTLS runs `shoal all` with its TLS listeners on loopback, the client
// CA set, client certificates required or not. A client CA is an
// authentication source: clients without a certificate are anonymous,
// allowed here. The clients use identifiers of tenant t, alice's.
func startTLS(t *testing.T, f *tlsFiles, require bool, mut ...func(*config.Config)) *broker.Broker {
	t.Helper()
	return startBroker(t, append([]func(*config.Config){func(c *config.Config) {
		c.Gateway.MQTTSListen = "127.0.0.1:0"
		c.Gateway.WSSListen = "127.0.0.1:0"
		c.Gateway.TLS = gateway.TLS{CertFile: f.certFile, KeyFile: f.keyFile, ClientCAFile: f.caFile,
			RequireClientCert: require, Identity: listener.IdentityCN}
		c.Auth.AllowAnonymous = true
	}}, mut...)...)
}

// mosquitto returns the command of a Mosquitto client of the broker's
// mqtts listener, reached as localhost (a name of the server's
// certificate).
func mosquitto(ctx context.Context, b *broker.Broker, bin string, args ...string) *exec.Cmd {
	_, port, _ := net.SplitHostPort(b.Addr("mqtts").String())
	id := fmt.Sprintf("t-%s-%d", strings.TrimPrefix(bin, "mosquitto_"), mosquittoIDs.Add(1))
	return exec.CommandContext(ctx, bin, append([]string{"-h", "localhost", "-p", port, "-V", "mqttv5", "-i", id}, args...)...)
}

// mosquittoIDs numbers the Mosquitto clients' identifiers.
var mosquittoIDs atomic.Int64

func needMosquitto(t *testing.T) {
	t.Helper()
	for _, bin := range []string{"mosquitto_pub", "mosquitto_sub"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s not found: run scripts/test-deps.sh (make test does)", bin)
		}
	}
}

// TestTLSMosquittoClients: mosquitto_sub and mosquitto_pub reach the
// mqtts listener trusting the test CA (--cafile), with a client
// certificate (--cert, --key) or without one, as none is required; a
// client that does not trust the CA, one that speaks plain MQTT to the
// TLS port, and one with a certificate of another CA get nowhere.
func TestTLSMosquittoClients(t *testing.T) {
	needMosquitto(t)
	f := newTLSFiles(t)
	b := startTLS(t, f, false)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var out testlog.Buffer
	sub := mosquitto(ctx, b, "mosquitto_sub", "--cafile", f.caFile, "--cert", f.clientCertFile, "--key", f.clientKeyFile,
		"-t", "tls/#", "-q", "1", "-v", "-C", "2", "-W", "30")
	sub.Stdout, sub.Stderr = &out, &out
	if err := sub.Start(); err != nil {
		t.Fatal(err)
	}
	// The messages are retained: each reaches mosquitto_sub once, live or
	// when it subscribes, whichever comes first.
	pub := func(args ...string) error {
		t.Helper()
		o, err := mosquitto(ctx, b, "mosquitto_pub", append([]string{"-q", "1"}, args...)...).CombinedOutput()
		if err != nil {
			t.Logf("mosquitto_pub %v: %v\n%s", args, err, o)
		}
		return err
	}
	if err := pub("--cafile", f.caFile, "-t", "tls/anonymous", "-m", "no client certificate", "-r"); err != nil {
		t.Fatal("TLS without a client certificate refused")
	}
	if err := pub("--cafile", f.caFile, "--cert", f.clientCertFile, "--key", f.clientKeyFile, "-t", "tls/alice", "-m", "with alice's certificate", "-r"); err != nil {
		t.Fatal("TLS with a client certificate of the CA refused")
	}
	if err := sub.Wait(); err != nil {
		t.Fatalf("mosquitto_sub: %v\n%s", err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	slices.Sort(lines)
	if want := []string{"tls/alice with alice's certificate", "tls/anonymous no client certificate"}; !slices.Equal(lines, want) {
		t.Errorf("mosquitto_sub printed\n%s\nwant %q", out.String(), want)
	}

	// Refusals: each publish would go to tls/refused.
	if err := pub("--capath", t.TempDir(), "-t", "tls/refused", "-m", "untrusted server"); err == nil {
		t.Error("a client that does not trust the server's CA connected")
	}
	if err := pub("--cafile", f.caFile, "--cert", f.foreignCertFile, "--key", f.foreignKeyFile, "-t", "tls/refused", "-m", "foreign"); err == nil {
		t.Error("a client certificate of another CA was accepted")
	}
	_, port, _ := net.SplitHostPort(b.Addr("mqtts").String())
	plain := exec.CommandContext(ctx, "mosquitto_pub", "-h", "127.0.0.1", "-p", port, "-t", "tls/refused", "-m", "plain")
	if o, err := plain.CombinedOutput(); err == nil {
		t.Errorf("plain MQTT on the TLS port succeeded: %s", o)
	}
	// Nothing of the refused was published: a fresh subscriber gets the
	// two retained messages only.
	o, _ := mosquitto(ctx, b, "mosquitto_sub", "--cafile", f.caFile, "-t", "tls/#", "-v", "-W", "2").CombinedOutput() // exits 27: timed out
	var msgs []string
	for _, l := range strings.Split(string(o), "\n") {
		if strings.HasPrefix(l, "tls/") {
			msgs = append(msgs, l)
		}
	}
	if len(msgs) != 2 || strings.Contains(string(o), "refused") {
		t.Errorf("retained after the refusals:\n%s\nwant the two of before", o)
	}
}

// TestTLSRequireClientCert: with tls.require_client_cert, mosquitto_pub
// without a client certificate is refused in the handshake; with alice's
// it publishes.
func TestTLSRequireClientCert(t *testing.T) {
	needMosquitto(t)
	f := newTLSFiles(t)
	b := startTLS(t, f, true)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if o, err := mosquitto(ctx, b, "mosquitto_pub", "--cafile", f.caFile, "-t", "mtls/x", "-m", "no cert", "-r").CombinedOutput(); err == nil {
		t.Errorf("published without a client certificate: %s", o)
	}
	if o, err := mosquitto(ctx, b, "mosquitto_pub", "--cafile", f.caFile, "--cert", f.clientCertFile, "--key", f.clientKeyFile,
		"-t", "mtls/x", "-m", "alice", "-r", "-q", "1").CombinedOutput(); err != nil {
		t.Fatalf("mosquitto_pub with alice's certificate: %v\n%s", err, o)
	}
	o, err := mosquitto(ctx, b, "mosquitto_sub", "--cafile", f.caFile, "--cert", f.clientCertFile, "--key", f.clientKeyFile,
		"-t", "mtls/#", "-v", "-C", "1", "-W", "10").CombinedOutput()
	if err != nil || strings.TrimSpace(string(o)) != "mtls/x alice" {
		t.Errorf("mosquitto_sub: %v\n%s\nwant only alice's retained message", err, o)
	}
}

// dialTLSV5 connects a Paho MQTT 5.0 client through a TLS connection to
// the broker's mqtts listener, with alice's certificate. (Clients that
// are to meet share a tenant: their identifiers' prefix up to "-".)
func dialTLSV5(t *testing.T, b *broker.Broker, f *tlsFiles, clientID string) (*v5Client, *tls.ConnectionState) {
	t.Helper()
	nc, err := tls.DialWithDialer(&net.Dialer{Timeout: wait}, "tcp", b.Addr("mqtts").String(),
		&tls.Config{RootCAs: f.ca.Pool(), ServerName: "localhost", Certificates: []tls.Certificate{f.client.TLS}})
	if err != nil {
		t.Fatal(err)
	}
	st := nc.ConnectionState()
	c, _ := connectV5(t, nc, clientID)
	return c, &st
}

// TestTLSReloadEndToEnd: a server certificate replaced on disk is picked
// up by the broker's watch: new handshakes see its serial, while a client
// connected before keeps its session and receives.
func TestTLSReloadEndToEnd(t *testing.T) {
	f := newTLSFiles(t)
	b := startTLS(t, f, false)
	before, st := dialTLSV5(t, b, f, "t-before")
	if got := st.PeerCertificates[0].SerialNumber.String(); got != f.serverSerial {
		t.Fatalf("serial %s, want the first certificate's %s", got, f.serverSerial)
	}
	before.subscribe(t, pahoSub("reload/#", 1))

	next := f.ca.Server(t)
	for path, pem := range map[string][]byte{f.certFile: next.CertPEM, f.keyFile: next.KeyPEM} {
		tmp := testpki.WriteFile(t, f.dir, filepath.Base(path)+".new", pem)
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	want := next.Cert.SerialNumber.String()
	var after *v5Client
	eventually.OK(t, wait, func() string {
		c, st := dialTLSV5(t, b, f, "t-after")
		if got := st.PeerCertificates[0].SerialNumber.String(); got != want {
			_ = c.Disconnect(&paho.Disconnect{})
			return fmt.Sprintf("a new handshake still sees serial %s, want %s", got, want)
		}
		after = c
		return ""
	})
	after.publish(t, &paho.Publish{Topic: "reload/new", QoS: 1, Payload: []byte("from the new certificate")})
	if m := before.expect(t); string(m.Payload) != "from the new certificate" {
		t.Errorf("the connection of before received %q", m.Payload)
	}
	before.publish(t, &paho.Publish{Topic: "reload/old", QoS: 1, Payload: []byte("still here")})
	if m := before.expect(t); string(m.Payload) != "still here" {
		t.Errorf("the connection of before received %q", m.Payload)
	}
}

// wsRaw speaks MQTT 5.0 through Shoal's codec over a WebSocket. (Paho's
// client over coder/websocket's NetConn lost a SUBACK now and then: its
// pinger's PINGREQ written between a packet's parts, which
// internal/testutil/pahoconn now prevents for the Paho clients.)
func wsRaw(t *testing.T, ws *websocket.Conn) *rawClient {
	nc := websocket.NetConn(context.Background(), ws, websocket.MessageBinary)
	return &rawClient{t: t, nc: nc, rd: packet.NewReader(nc, 1024), v: packet.V5}
}

// TestTLSWebSocketEndToEnd: a Go WebSocket client over TLS (wss) with a
// client certificate speaks MQTT with the broker, and meets a client of
// the mqtts listener.
func TestTLSWebSocketEndToEnd(t *testing.T) {
	f := newTLSFiles(t)
	b := startTLS(t, f, true)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: f.ca.Pool(), ServerName: "localhost", Certificates: []tls.Certificate{f.client.TLS},
	}}}
	u := "wss://" + b.Addr("wss").String() + listener.WebSocketPath
	ws, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: client, Subprotocols: []string{"mqtt"}}) //nolint:bodyclose // coder/websocket: nil after a successful dial
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.CloseNow() })
	sub := wsRaw(t, ws)
	sub.connect(&packet.Connect{ClientID: []byte("t-wss-sub"), CleanStart: true, KeepAlive: 30})
	sub.subscribeOne("wss/#", 1)
	pub, _ := dialTLSV5(t, b, f, "t-mqtts-pub")
	pub.publish(t, &paho.Publish{Topic: "wss/x", QoS: 1, Payload: []byte("over wss")})
	if m := nextAs[*packet.Publish](sub); string(m.Topic) != "wss/x" || string(m.Payload) != "over wss" {
		t.Errorf("the wss client received %q on %q", m.Payload, m.Topic)
	}

	// Without a client certificate, required here, no upgrade.
	bare := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: f.ca.Pool(), ServerName: "localhost"}}}
	if _, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: bare, Subprotocols: []string{"mqtt"}}); err == nil { //nolint:bodyclose // no body without a response
		t.Error("a wss client without the required certificate upgraded")
	}
}

// TestOriginEndToEnd: the broker's WebSocket listeners refuse a browser's
// upgrade from a foreign origin with 403 and accept one that
// gateway.ws_allowed_origins allows, over ws and wss alike.
func TestOriginEndToEnd(t *testing.T) {
	f := newTLSFiles(t)
	b := startTLS(t, f, false, func(c *config.Config) {
		c.Gateway.WSAllowedOrigins = []string{"https://*.example.com"}
	})
	tlsClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: f.ca.Pool(), ServerName: "localhost"}}}
	for _, l := range []struct {
		url    string
		client *http.Client
	}{
		{"ws://" + b.Addr("ws").String() + listener.WebSocketPath, nil},
		{"wss://" + b.Addr("wss").String() + listener.WebSocketPath, tlsClient},
	} {
		for _, tc := range []struct {
			origin string
			ok     bool
		}{
			{"https://evil.example.net", false},
			{"https://dashboard.example.com", true},
		} {
			t.Run(l.url[:strings.Index(l.url, ":")]+" "+tc.origin, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), wait)
				defer cancel()
				ws, resp, err := websocket.Dial(ctx, l.url, &websocket.DialOptions{
					HTTPClient: l.client, Subprotocols: []string{"mqtt"}, HTTPHeader: http.Header{"Origin": {tc.origin}},
				})
				if resp != nil && resp.Body != nil {
					_ = resp.Body.Close()
				}
				if !tc.ok {
					if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
						t.Fatalf("foreign origin: %v (response %v), want 403", err, resp)
					}
					return
				}
				if err != nil {
					t.Fatalf("allowed origin: %v", err)
				}
				defer func() { _ = ws.CloseNow() }()
				c := wsRaw(t, ws)
				if ca := c.connect(&packet.Connect{ClientID: []byte("origin-1"), CleanStart: true}); ca.Code != 0 {
					t.Fatalf("CONNACK %v", ca.Code)
				}
				c.subscribeOne("origin/x", 0)
			})
		}
	}
}

// TestTLSBadFilesAtStart: a TLS listener whose certificate file is missing
// or broken stops the broker at start, the file named.
func TestTLSBadFilesAtStart(t *testing.T) {
	f := newTLSFiles(t)
	broken := testpki.WriteFile(t, f.dir, "broken.pem", []byte("not PEM"))
	for name, certFile := range map[string]string{"missing": filepath.Join(f.dir, "missing.pem"), "broken": broken} {
		t.Run(name, func(t *testing.T) {
			cfg := config.Default()
			cfg.DataDir = t.TempDir()
			cfg.HTTPListen, cfg.Admin.Listen = "", "" // no fixed port that a parallel run may hold
			cfg.Kafka.Partitions = 4
			cfg.Gateway.SysInterval = 0
			cfg.Gateway.MQTTListen, cfg.Gateway.WSListen = "127.0.0.1:0", ""
			cfg.Gateway.MQTTSListen = "127.0.0.1:0"
			cfg.Gateway.TLS.CertFile, cfg.Gateway.TLS.KeyFile = certFile, f.keyFile
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := broker.New(cfg, testlog.New(t), "test").Run(ctx)
			if err == nil || !strings.Contains(err.Error(), certFile) {
				t.Fatalf("run: %v, want an error naming %s", err, certFile)
			}
		})
	}
}

// TestCertIdentityTenant: a verified client certificate is an identity
// (its CN here) whose tenant binds the client identifiers: alice's
// certificate, of tenant t, may use t-… and not another tenant's, and
// needs no password.
func TestCertIdentityTenant(t *testing.T) {
	f := newTLSFiles(t)
	b := startTLS(t, f, false, func(c *config.Config) { c.Auth.AllowAnonymous = false })
	for id, want := range map[string]packet.ReasonCode{"t-1": packet.CodeSuccess, "globex-1": packet.CodeClientIdentifierNotValid} {
		nc, err := tls.DialWithDialer(&net.Dialer{Timeout: wait}, "tcp", b.Addr("mqtts").String(),
			&tls.Config{RootCAs: f.ca.Pool(), ServerName: "localhost", Certificates: []tls.Certificate{f.client.TLS}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = nc.Close() })
		r := &rawClient{t: t, nc: nc, rd: packet.NewReader(nc, 1024), v: packet.V5}
		if ca := r.connect(&packet.Connect{ClientID: []byte(id), CleanStart: true}); ca.Code != want {
			t.Errorf("client id %s with alice's certificate: CONNACK %v, want %v", id, ca.Code, want)
		}
	}
	// Without a certificate, and anonymous clients not allowed: refused.
	nc, err := tls.DialWithDialer(&net.Dialer{Timeout: wait}, "tcp", b.Addr("mqtts").String(),
		&tls.Config{RootCAs: f.ca.Pool(), ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	r := &rawClient{t: t, nc: nc, rd: packet.NewReader(nc, 1024), v: packet.V5}
	if ca := r.connect(&packet.Connect{ClientID: []byte("t-2"), CleanStart: true}); ca.Code != packet.CodeNotAuthorized {
		t.Errorf("no certificate, no credentials: CONNACK %v, want 0x87", ca.Code)
	}
}
