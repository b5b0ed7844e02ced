//go:build integration

package integration

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/eclipse/paho.golang/paho"

	"github.com/shoal-mqtt/shoal/internal/localserver/serverproc"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
	"github.com/shoal-mqtt/shoal/internal/testutil/testpki"
)

// haproxyProc is a real HAProxy (Debian's package) running Shoal's
// haproxy/haproxy.cfg with backends rendered by haproxy/render-backends.sh.
type haproxyProc struct {
	mqtt, log string
	// mqtts passes TLS through to the pools' TLS listeners; terminate,
	// when HAProxy was given a certificate, ends TLS at HAProxy.
	mqtts, terminate string
	// ws and wss are the WebSocket frontends (wss passes TLS through).
	ws, wss string
	// mapFile is the tenant map HAProxy loaded; runtime its runtime API.
	mapFile, runtime string
}

// haproxyBinary finds HAProxy; the test set-up (scripts/test-deps.sh)
// installs it.
func haproxyBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("haproxy"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/haproxy"); err == nil {
		return "/usr/sbin/haproxy"
	}
	t.Fatal("haproxy not found: run scripts/test-deps.sh (make test does)")
	return ""
}

// startHAProxy starts HAProxy in front of pools ("POOL=SERVER@MQTT@HEALTH,…",
// render-backends.sh's arguments) with a copy of haproxy/tenants.map, and
// waits until its MQTT port accepts connections.
func startHAProxy(t *testing.T, pools ...string) *haproxyProc {
	t.Helper()
	return startHAProxyTLS(t, nil, pools...)
}

// startHAProxyTLS is startHAProxy that also terminates TLS with certKey
// (HAProxy's certificate chain and key, PEM) when it is not nil.
func startHAProxyTLS(t *testing.T, certKey []byte, pools ...string) *haproxyProc {
	t.Helper()
	bin := haproxyBinary(t)
	dir := t.TempDir()
	out, err := exec.Command("../haproxy/render-backends.sh", pools...).Output()
	if err != nil {
		t.Fatalf("render-backends.sh: %v", err)
	}
	backends := filepath.Join(dir, "backends.cfg")
	mapFile := filepath.Join(dir, "tenants.map")
	src, err := os.ReadFile("../haproxy/tenants.map")
	if err != nil {
		t.Fatal(err)
	}
	for path, data := range map[string][]byte{backends: out, mapFile: src} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The frontends' ports are picked together, so that they are distinct:
	// HAProxy binds with SO_REUSEPORT, so two frontends given one port
	// would both listen on it and split its connections between them (a
	// TLS client once reached the wss frontend that way).
	ports, err := serverproc.FreePorts(5)
	if err != nil {
		t.Fatal(err)
	}
	addr := func(i int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[i])) }
	h := &haproxyProc{mqtt: addr(0), mqtts: addr(1), ws: addr(2), wss: addr(3),
		log: filepath.Join(dir, "haproxy.log"), mapFile: mapFile, runtime: filepath.Join(dir, "haproxy.sock")}
	env := []string{"SHOAL_HAPROXY_MQTT=" + h.mqtt, "SHOAL_HAPROXY_MQTTS=" + h.mqtts,
		"SHOAL_HAPROXY_WS=" + h.ws, "SHOAL_HAPROXY_WSS=" + h.wss,
		"SHOAL_HAPROXY_MAP=" + mapFile, "SHOAL_HAPROXY_RUNTIME=" + h.runtime}
	if certKey != nil {
		h.terminate = addr(4)
		env = append(env, "SHOAL_HAPROXY_MQTTS_TERMINATE="+h.terminate,
			"SHOAL_HAPROXY_TLS_CERT="+testpki.WriteFile(t, dir, "haproxy.pem", certKey))
	}
	logf, err := os.Create(h.log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-db", "-f", "../haproxy/haproxy.cfg", "-f", backends)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = logf.Close()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	dumpOnFailure(t, h.log)
	eventually.OK(t, 20*time.Second, func() string {
		nc, err := net.DialTimeout("tcp", h.mqtt, time.Second)
		if err == nil {
			_ = nc.Close()
			return ""
		}
		select {
		case <-done:
			t.Fatal("haproxy exited at start")
		default:
		}
		return fmt.Sprintf("haproxy does not accept connections: %v", err)
	})
	return h
}

// startGateway starts a gateway with extra arguments.
func (c *cluster) startGateway(name string, extra ...string) *proc {
	c.t.Helper()
	p := &proc{c: c, name: name, role: "gateway", http: freeAddr(c.t), mqtt: freeAddr(c.t)}
	p.args = append([]string{"gateway", "--config", c.cfgPath, "--kafka-brokers", strings.Join(c.kafka.Brokers(), ","),
		"--http-listen", p.http, "--mqtt-listen", p.mqtt, "--ws-listen", "", "--gateway-id", name, "--gateway-slot", "-1"}, extra...)
	p.launch()
	return p
}

// startTLSGateway starts a gateway that also listens for MQTT over TLS
// with the certificate and key files in tlsFiles (--tls-cert-file …).
func (c *cluster) startTLSGateway(name string, tlsFiles []string, extra ...string) *proc {
	c.t.Helper()
	mqtts := freeAddr(c.t)
	p := c.startGateway(name, append(append([]string{"--mqtts-listen", mqtts}, tlsFiles...), extra...)...)
	p.mqtts = mqtts
	return p
}

// startWSGateway starts a gateway that also listens for MQTT over
// WebSocket, and with tlsFiles for MQTT over TLS and MQTT over WebSocket
// over TLS too.
func (c *cluster) startWSGateway(name string, tlsFiles []string, extra ...string) *proc {
	c.t.Helper()
	ws := freeAddr(c.t)
	extra = append([]string{"--ws-listen", ws}, extra...)
	if tlsFiles == nil {
		p := c.startGateway(name, extra...)
		p.ws = ws
		return p
	}
	wss := freeAddr(c.t)
	p := c.startTLSGateway(name, tlsFiles, append([]string{"--wss-listen", wss}, extra...)...)
	p.ws, p.wss = ws, wss
	return p
}

// server is the gateway as render-backends.sh takes it:
// SERVER@MQTT@HEALTH[@MQTTS[@WS[@WSS]]], the listeners it lacks empty.
func (p *proc) server() string {
	_, port, _ := net.SplitHostPort(p.http)
	return strings.TrimRight(strings.Join([]string{p.name, p.mqtt, port, p.mqtts, p.ws, p.wss}, "@"), "@")
}

// command sends one command to HAProxy's runtime API and returns its
// answer.
func (h *haproxyProc) command(t *testing.T, cmd string) string {
	t.Helper()
	// HAProxy creates its runtime socket a moment after its listeners
	// answer (CI dialled it once before it existed).
	var nc net.Conn
	eventually.OK(t, 10*time.Second, func() string {
		var err error
		if nc, err = net.DialTimeout("unix", h.runtime, 5*time.Second); err != nil {
			return err.Error()
		}
		return ""
	})
	defer func() { _ = nc.Close() }()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(nc, cmd+"\n"); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(nc)
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return strings.TrimSpace(string(b))
}

// gauge reads one unlabelled sample of the process's /metrics (-1 when
// absent).
func (p *proc) gauge(t *testing.T, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + p.http + "/metrics")
	if err != nil {
		return -1
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

// TestHAProxyTenantPools: the real HAProxy in front of three pools of
// gateways (acme → a, globex → b, the rest → default), each gateway
// requiring PROXY v2 from HAProxy. Clients land only on their tenant's
// pool; clients of one tenant meet across the pool's gateways, never
// another tenant's; what is not MQTT never reaches a gateway.
func TestHAProxyTenantPools(t *testing.T) {
	c := newCluster(t)
	sess, r := c.start("session", "session"), c.start("router", "router")
	pp := []string{"--proxy-protocol", "required", "--proxy-trusted", "127.0.0.0/8"}
	a1, a2 := c.startGateway("gw-a1", pp...), c.startGateway("gw-a2", pp...)
	b1, d := c.startGateway("gw-b1", pp...), c.startGateway("gw-d", pp...)
	for _, p := range []*proc{sess, r, a1, a2, b1, d} {
		p.waitReady()
	}
	h := startHAProxy(t, "default="+d.server(), "a="+a1.server()+","+a2.server(), "b="+b1.server())

	// Clients of each tenant, through HAProxy.
	want := map[string]int{"a": 0, "b": 0, "default": 0}
	pool := func(id string) string {
		switch {
		case strings.HasPrefix(id, "acme-"):
			return "a"
		case strings.HasPrefix(id, "globex-"):
			return "b"
		}
		return "default"
	}
	clients := map[string]*mqttClient{}
	for _, id := range []string{"acme-sub", "acme-pub", "acme-3", "acme-4", "globex-sub", "globex-2", "initech-1", "notenant"} {
		clients[id], _ = dialMQTT(t, h.mqtt, id, true, 0)
		want[pool(id)]++
	}
	eventually.OK(t, clusterWait, func() string {
		got := map[string]int{
			"a":       int(a1.gauge(t, "shoal_gateway_connections") + a2.gauge(t, "shoal_gateway_connections")),
			"b":       int(b1.gauge(t, "shoal_gateway_connections")),
			"default": int(d.gauge(t, "shoal_gateway_connections")),
		}
		if fmt.Sprint(got) == fmt.Sprint(want) {
			return ""
		}
		return fmt.Sprintf("connections per pool %v, want %v", got, want)
	})
	if a1.gauge(t, "shoal_gateway_connections") == 0 || a2.gauge(t, "shoal_gateway_connections") == 0 {
		t.Logf("pool a: %v and %v connections (leastconn spreads them)", a1.gauge(t, "shoal_gateway_connections"), a2.gauge(t, "shoal_gateway_connections"))
	}

	// One tenant's clients meet; another tenant's subscriber sees nothing.
	clients["acme-sub"].subscribe("t/#", 1)
	clients["globex-sub"].subscribe("t/#", 1)
	if err := clients["acme-pub"].publish("t/1", "acme only", 1, false); err != nil {
		t.Fatal(err)
	}
	clients["acme-sub"].expectPayload("acme only")
	select {
	case m := <-clients["globex-sub"].msgs:
		t.Fatalf("globex-sub got acme's %q on %s", m.Payload, m.Topic)
	case <-time.After(time.Second):
	}

	// The gateway knows the client's own address from HAProxy's PROXY v2
	// header: the Connect event in shoal.sessions carries it.
	nc, err := net.DialTimeout("tcp", h.mqtt, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	own := nc.LocalAddr().String()
	pc := paho.NewClient(paho.ClientConfig{Conn: nc, OnClientError: func(error) {}})
	cctx, ccancel := context.WithTimeout(t.Context(), clusterWait)
	if _, err := pc.Connect(cctx, &paho.Connect{ClientID: "acme-addr", CleanStart: true, KeepAlive: 30}); err != nil {
		t.Fatal(err)
	}
	ccancel()
	t.Cleanup(func() { _ = pc.Disconnect(&paho.Disconnect{}) })
	if got := connectAddress(t, c, "acme-addr"); got != own {
		t.Errorf("the Connect event says the client is at %q; it is at %q (HAProxy's own address would be another port)", got, own)
	}

	// Not MQTT: HAProxy closes it, and no gateway sees a connection.
	before := a1.gauge(t, "shoal_gateway_connections_total") + a2.gauge(t, "shoal_gateway_connections_total") +
		b1.gauge(t, "shoal_gateway_connections_total") + d.gauge(t, "shoal_gateway_connections_total")
	nc, err = net.DialTimeout("tcp", h.mqtt, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = nc.Write([]byte("GET / HTTP/1.1\r\nHost: shoal\r\n\r\n"))
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := io.Copy(io.Discard, nc); err != nil || n != 0 {
		t.Errorf("HAProxy answered %d bytes to HTTP (err %v), want a close", n, err)
	}
	_ = nc.Close()
	after := a1.gauge(t, "shoal_gateway_connections_total") + a2.gauge(t, "shoal_gateway_connections_total") +
		b1.gauge(t, "shoal_gateway_connections_total") + d.gauge(t, "shoal_gateway_connections_total")
	if after != before {
		t.Errorf("gateways counted %v connections after the HTTP request, %v before", after, before)
	}
	// HAProxy's log line of that connection: refused before any server.
	waitLog(t, h.log, "mqtt/<NOSRV>")
}

// waitLog waits at most 10 s for HAProxy's log to hold line, such as
// "mqtt/<NOSRV>": a connection of frontend mqtt refused before any server.
func waitLog(t *testing.T, path, line string) {
	t.Helper()
	eventually.OK(t, 10*time.Second, func() string {
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), line) {
			return ""
		}
		return fmt.Sprintf("no %q in HAProxy's log:\n%s", line, b)
	})
}

// TestHAProxyTLS: MQTT over TLS through the real HAProxy, both ways its
// config offers. Passed through, the gateways' mqtts listeners terminate
// TLS with their own certificate, HAProxy routes by the SNI host's first
// label (no SNI, or a tenant the map does not name: the default pool), and
// the gateway still learns the client's address from the PROXY v2 header
// in front of the TLS bytes. Terminated at HAProxy, the CONNECT is read in
// the clear and routed by the client identifier, as plain MQTT is.
func TestHAProxyTLS(t *testing.T) {
	ca := testpki.NewCA(t, "shoal test CA")
	dir := t.TempDir()
	gwLeaf := ca.Issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: "gateway"},
		DNSNames: []string{"*.shoal.test"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	edgeLeaf := ca.Issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: "haproxy"},
		DNSNames: []string{"edge.shoal.test"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	tlsFiles := []string{"--tls-cert-file", testpki.WriteFile(t, dir, "gw.pem", gwLeaf.CertPEM),
		"--tls-key-file", testpki.WriteFile(t, dir, "gw.key", gwLeaf.KeyPEM)}

	c := newCluster(t)
	sess, r := c.start("session", "session"), c.start("router", "router")
	pp := []string{"--proxy-protocol", "required", "--proxy-trusted", "127.0.0.0/8"}
	a, b, d := c.startTLSGateway("gw-a", tlsFiles, pp...), c.startTLSGateway("gw-b", tlsFiles, pp...), c.startTLSGateway("gw-d", tlsFiles, pp...)
	for _, p := range []*proc{sess, r, a, b, d} {
		p.waitReady()
	}
	h := startHAProxyTLS(t, append(append([]byte{}, edgeLeaf.CertPEM...), edgeLeaf.KeyPEM...),
		"default="+d.server(), "a="+a.server(), "b="+b.server())

	clients := map[string]*mqttClient{}
	for _, tc := range []struct {
		how, addr, sni, id string
		gw                 *proc
		peer               *testpki.Leaf // the certificate the client must see
	}{
		{"passed through", h.mqtts, "acme.shoal.test", "acme-pt", a, gwLeaf},
		{"passed through, SNI in capitals", h.mqtts, "GLOBEX.shoal.test", "globex-pt", b, gwLeaf},
		{"passed through, a tenant the map does not name", h.mqtts, "initech.shoal.test", "initech-pt", d, gwLeaf},
		{"passed through, no SNI", h.mqtts, "127.0.0.1", "acme-nosni", d, gwLeaf},
		{"terminated at HAProxy", h.terminate, "edge.shoal.test", "acme-term", a, edgeLeaf},
		{"terminated at HAProxy", h.terminate, "edge.shoal.test", "globex-term", b, edgeLeaf},
	} {
		before := tc.gw.gauge(t, "shoal_gateway_connections_total")
		nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", tc.addr,
			&tls.Config{ServerName: tc.sni, RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12})
		if err != nil {
			t.Fatalf("%s (%s): %v", tc.id, tc.how, err)
		}
		if got := nc.ConnectionState().PeerCertificates[0]; !got.Equal(tc.peer.Cert) {
			t.Errorf("%s (%s): the client saw %q's certificate, want %q's", tc.id, tc.how, got.Subject.CommonName, tc.peer.Cert.Subject.CommonName)
		}
		own := nc.LocalAddr().String()
		cl, _, err := connectMQTT(t, nc, tc.id, true, 0, "", "")
		if err != nil {
			t.Fatalf("%s (%s): %v", tc.id, tc.how, err)
		}
		clients[tc.id] = cl
		checkLanded(t, c, tc.gw, tc.id, tc.how, before, own)
	}

	// A tenant's clients meet whichever way they came; another's does not.
	clients["acme-pt"].subscribe("tls/#", 1)
	clients["globex-pt"].subscribe("tls/#", 1)
	if err := clients["acme-term"].publish("tls/1", "acme over TLS", 1, false); err != nil {
		t.Fatal(err)
	}
	clients["acme-pt"].expectPayload("acme over TLS")
	select {
	case m := <-clients["globex-pt"].msgs:
		t.Fatalf("globex-pt got acme's %q on %s", m.Payload, m.Topic)
	case <-time.After(time.Second):
	}

	// Not TLS on the pass-through port: refused before any gateway.
	nc, err := net.DialTimeout("tcp", h.mqtts, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = nc.Write([]byte{0x10, 0x0c, 0x00, 0x04, 'M', 'Q', 'T', 'T', 0x04, 0x02, 0x00, 0x1e, 0x00, 0x00})
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := io.Copy(io.Discard, nc); err != nil || n != 0 {
		t.Errorf("HAProxy answered %d bytes to plain MQTT on its TLS port (err %v), want a close", n, err)
	}
	_ = nc.Close()
	waitLog(t, h.log, "mqtts/<NOSRV>")
}

// TestHAProxyWebSocket: MQTT over WebSocket through the real HAProxy, to
// gateways that require PROXY v2 on their ws and wss listeners too. The
// ws frontend speaks HTTP up to the upgrade and routes by the Host
// header's first label, the wss frontend passes TLS through and routes by
// the SNI's (a tenant the map does not name, an address, no SNI: the
// default pool); tenants added through the runtime API route at once. A
// WebSocket subscriber receives what a plain MQTT client of its tenant
// publishes, and the gateway knows the client's own address. A request
// that is not a WebSocket upgrade is answered by HAProxy and never reaches
// a gateway.
func TestHAProxyWebSocket(t *testing.T) {
	ca := testpki.NewCA(t, "shoal test CA")
	dir := t.TempDir()
	gwLeaf := ca.Issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: "gateway"},
		DNSNames: []string{"*.shoal.test"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	tlsFiles := []string{"--tls-cert-file", testpki.WriteFile(t, dir, "gw.pem", gwLeaf.CertPEM),
		"--tls-key-file", testpki.WriteFile(t, dir, "gw.key", gwLeaf.KeyPEM)}

	c := newCluster(t)
	sess, r := c.start("session", "session"), c.start("router", "router")
	pp := []string{"--proxy-protocol", "required", "--proxy-trusted", "127.0.0.0/8"}
	a, b := c.startWSGateway("gw-a", tlsFiles, pp...), c.startWSGateway("gw-b", tlsFiles, pp...)
	d := c.startWSGateway("gw-d", nil, pp...) // no TLS: its wss backend is empty
	for _, p := range []*proc{sess, r, a, b, d} {
		p.waitReady()
	}
	h := startHAProxy(t, "default="+d.server(), "a="+a.server(), "b="+b.server())
	// Two tenants the repository's map does not name, added as an operator
	// would: every frontend follows at once.
	for _, cmd := range []string{"add map " + h.mapFile + " ta a", "add map " + h.mapFile + " tb b"} {
		if out := h.command(t, cmd); out != "" {
			t.Fatalf("%s: %s", cmd, out)
		}
	}

	tlsConf := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	clients := map[string]*mqttClient{}
	for _, tc := range []struct {
		how, addr, url, id string
		gw                 *proc
	}{
		{"ws", h.ws, "ws://ta.example/mqtt", "ta-ws", a},
		{"ws, Host in capitals with a port", h.ws, "ws://TB.example:8083/mqtt", "tb-ws", b},
		{"ws, a tenant the map does not name", h.ws, "ws://tc.example/mqtt", "tc-ws", d},
		{"ws, Host an address", h.ws, "ws://127.0.0.1:8083/mqtt", "ta-ws-addr", d},
		{"wss passed through", h.wss, "wss://ta.shoal.test/mqtt", "ta-wss", a},
		{"wss passed through, no SNI", h.wss, "wss://127.0.0.1/mqtt", "tb-wss-nosni", nil},
	} {
		var before float64
		if tc.gw != nil {
			before = tc.gw.gauge(t, "shoal_gateway_connections_total")
		}
		cl, own, err := dialWSMQTT(t, tc.addr, tc.url, tlsConf, tc.id)
		if tc.gw == nil {
			// The default pool's gateway has no wss listener: nothing to
			// reach, so HAProxy closes the connection.
			if err == nil {
				t.Errorf("%s (%s): connected through an empty wss backend", tc.id, tc.how)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s (%s): %v", tc.id, tc.how, err)
		}
		clients[tc.id] = cl
		checkLanded(t, c, tc.gw, tc.id, tc.how, before, own)
	}

	// A plain MQTT client of tenant ta (routed by its client identifier to
	// pool a) reaches ta's WebSocket subscribers; tb's sees nothing.
	pub, _ := dialMQTT(t, h.mqtt, "ta-pub", true, 0)
	for _, id := range []string{"ta-ws", "ta-wss", "tb-ws"} {
		clients[id].subscribe("w/#", 1)
	}
	if err := pub.publish("w/1", "to ta over websocket", 1, false); err != nil {
		t.Fatal(err)
	}
	clients["ta-ws"].expectPayload("to ta over websocket")
	clients["ta-wss"].expectPayload("to ta over websocket")
	select {
	case m := <-clients["tb-ws"].msgs:
		t.Fatalf("tb-ws got ta's %q on %s", m.Payload, m.Topic)
	case <-time.After(time.Second):
	}

	// Not a WebSocket upgrade: HAProxy answers 426, no gateway sees it.
	total := func() float64 {
		return a.gauge(t, "shoal_gateway_connections_total") + b.gauge(t, "shoal_gateway_connections_total") +
			d.gauge(t, "shoal_gateway_connections_total")
	}
	before := total()
	hc := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	resp, err := hc.Get("http://" + h.ws + "/mqtt")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	hc.CloseIdleConnections()
	if resp.StatusCode != http.StatusUpgradeRequired || resp.Header.Get("Upgrade") != "websocket" {
		t.Errorf("a GET without upgrade: %s, Upgrade %q; want 426 and websocket", resp.Status, resp.Header.Get("Upgrade"))
	}
	if after := total(); after != before {
		t.Errorf("gateways counted %v connections after the plain GET, %v before", after, before)
	}
	waitLog(t, h.log, " ws/<NOSRV>")
}

// dialWSMQTT connects id with MQTT over WebSocket to HAProxy's frontend at
// addr as a client of url would (its host is the Host header, and the SNI
// with wss), and returns the local address of its TCP connection.
func dialWSMQTT(t *testing.T, addr, url string, tlsConf *tls.Config, id string) (*mqttClient, string, error) {
	t.Helper()
	var local string
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			nc, err := (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, network, addr)
			if err == nil {
				local = nc.LocalAddr().String()
			}
			return nc, err
		},
		TLSClientConfig: tlsConf,
	}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(t.Context(), clusterWait)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}, Subprotocols: []string{"mqtt"}})
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		return nil, "", fmt.Errorf("websocket %s through %s: %w", url, addr, err)
	}
	cl, _, err := connectMQTT(t, websocket.NetConn(context.Background(), ws, websocket.MessageBinary), id, true, 0, "", "")
	return cl, local, err
}

// TestHAProxyConfigValid: haproxy -c accepts haproxy.cfg with every
// optional listener, and with none (unset or empty).
func TestHAProxyConfigValid(t *testing.T) {
	bin := haproxyBinary(t)
	dir := t.TempDir()
	out, err := exec.Command("../haproxy/render-backends.sh", "default=gw-0@127.0.0.1:1883@9090@127.0.0.1:8883@127.0.0.1:8083@127.0.0.1:8084",
		"a=gw-1@127.0.0.1:2883@9091@@127.0.0.1:9083").Output()
	if err != nil {
		t.Fatalf("render-backends.sh: %v", err)
	}
	backends := filepath.Join(dir, "backends.cfg")
	if err := os.WriteFile(backends, out, 0o600); err != nil {
		t.Fatal(err)
	}
	cert := testpki.NewCA(t, "shoal test CA").Issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: "haproxy"},
		DNSNames: []string{"edge.shoal.test"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	base := []string{"SHOAL_HAPROXY_MQTT=127.0.0.1:1883", "SHOAL_HAPROXY_MAP=../haproxy/tenants.map",
		"SHOAL_HAPROXY_RUNTIME=" + filepath.Join(dir, "haproxy.sock")}
	for name, env := range map[string][]string{
		"none":  nil,
		"empty": {"SHOAL_HAPROXY_MQTTS=", "SHOAL_HAPROXY_MQTTS_TERMINATE=", "SHOAL_HAPROXY_WS=", "SHOAL_HAPROXY_WSS="},
		"all": {"SHOAL_HAPROXY_MQTTS=127.0.0.1:8883", "SHOAL_HAPROXY_MQTTS_TERMINATE=127.0.0.1:8884",
			"SHOAL_HAPROXY_TLS_CERT=" + testpki.WriteFile(t, dir, "haproxy.pem", append(append([]byte{}, cert.CertPEM...), cert.KeyPEM...)),
			"SHOAL_HAPROXY_WS=127.0.0.1:8083", "SHOAL_HAPROXY_WSS=127.0.0.1:8084"},
	} {
		cmd := exec.Command(bin, "-c", "-f", "../haproxy/haproxy.cfg", "-f", backends)
		cmd.Env = append(append(os.Environ(), base...), env...)
		if out, err := cmd.CombinedOutput(); err != nil || strings.Contains(string(out), "WARNING") {
			t.Errorf("%s: haproxy -c: %v\n%s", name, err, out)
		}
	}
}
