//go:build integration

package integration

import (
	"bufio"
	"context"
	"errors"
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

	"github.com/eclipse/paho.golang/paho"

	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// haproxyProc is a real HAProxy (Debian's package) running Shoal's
// haproxy/haproxy.cfg with backends rendered by haproxy/render-backends.sh.
type haproxyProc struct {
	mqtt, log string
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
	h := &haproxyProc{mqtt: freeAddr(t), log: filepath.Join(dir, "haproxy.log")}
	logf, err := os.Create(h.log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-db", "-f", "../haproxy/haproxy.cfg", "-f", backends)
	cmd.Env = append(os.Environ(),
		"SHOAL_HAPROXY_MQTT="+h.mqtt, "SHOAL_HAPROXY_MQTTS="+freeAddr(t),
		"SHOAL_HAPROXY_MAP="+mapFile, "SHOAL_HAPROXY_RUNTIME="+filepath.Join(dir, "haproxy.sock"))
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
	deadline := time.Now().Add(20 * time.Second)
	for {
		if nc, err := net.DialTimeout("tcp", h.mqtt, time.Second); err == nil {
			_ = nc.Close()
			return h
		}
		select {
		case <-done:
			t.Fatal("haproxy exited at start")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("haproxy does not accept connections after 20s")
		}
		time.Sleep(50 * time.Millisecond)
	}
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

// server is the gateway as render-backends.sh takes it.
func (p *proc) server() string {
	_, port, _ := net.SplitHostPort(p.http)
	return p.name + "@" + p.mqtt + "@" + port
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
	deadline := time.Now().Add(clusterWait)
	for {
		got := map[string]int{
			"a":       int(a1.gauge(t, "shoal_gateway_connections") + a2.gauge(t, "shoal_gateway_connections")),
			"b":       int(b1.gauge(t, "shoal_gateway_connections")),
			"default": int(d.gauge(t, "shoal_gateway_connections")),
		}
		if fmt.Sprint(got) == fmt.Sprint(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("connections per pool %v, want %v", got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
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
	deadline = time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(h.log)
		if strings.Contains(string(b), "mqtt/<NOSRV>") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no refused connection (mqtt/<NOSRV>) in HAProxy's log:\n%s", b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestHAProxyFailover: kill -9 the gateway of a pool that holds a
// persistent subscriber, under a QoS 1 stream through HAProxy. The
// subscriber reconnects through HAProxy, lands on the pool's other
// gateway, resumes its session, and receives every acknowledged message
// (repeats only with DUP). The failover time (kill to CONNACK) is logged.
func TestHAProxyFailover(t *testing.T) {
	a1, a2, h := startPoolA(t)

	const n, topic, id = 300, "f/x", "acme-f-sub"
	sub, _ := dialMQTT(t, h.mqtt, id, true, 3600)
	sub.subscribe(topic, 1)
	victim, other := a1, a2
	if a1.gauge(t, "shoal_gateway_connections") != 1 {
		victim, other = a2, a1
	}
	if victim.gauge(t, "shoal_gateway_connections") != 1 {
		t.Fatalf("the subscriber is on neither gateway of pool a: %v, %v",
			a1.gauge(t, "shoal_gateway_connections"), a2.gauge(t, "shoal_gateway_connections"))
	}
	var moved *mqttClient
	var failover time.Duration
	stream(t, h.mqtt, "acme-f-pub", topic, n, func(i int) {
		if i != n/3 {
			return
		}
		killed := time.Now()
		victim.kill()
		t.Logf("%s killed under the stream; the subscriber reconnects through HAProxy", victim.name)
		moved = resume(t, h.mqtt, id, killed)
		failover = time.Since(killed)
	})
	before := sub.drain(topic)
	rest := moved.collectMore(topic, n, before)
	rest.check(t, "gateway killed, subscriber failed over through HAProxy", n)
	if got := other.gauge(t, "shoal_gateway_connections"); got < 1 {
		t.Errorf("%s holds %v connections after the failover, want the subscriber", other.name, got)
	}
	t.Logf("failover: %v from kill -9 to the resumed session's CONNACK; %d repeats (all with DUP)", failover.Round(time.Millisecond), rest.repeats)
}

// TestHAProxyRollingRestart: every gateway of a pool restarted one after
// the other (SIGTERM, wait until it is ready, next) under a QoS 1 stream
// through HAProxy between persistent sessions. Clients whose gateway
// stops reconnect through HAProxy and resume; nothing acknowledged is
// lost. The reconnect times and the repeats are logged.
func TestHAProxyRollingRestart(t *testing.T) {
	a1, a2, h := startPoolA(t)

	const n, topic, id = 400, "r/x", "acme-r-sub"
	sub, _ := dialMQTT(t, h.mqtt, id, true, 3600)
	sub.subscribe(topic, 1)
	subs := []*mqttClient{sub}
	var reconnects []time.Duration
	restart := func(g *proc) {
		began := time.Now()
		g.signal(syscall.SIGTERM)
		<-g.done
		g.restart()
		t.Logf("%s restarted in %v", g.name, time.Since(began).Round(time.Millisecond))
		// The subscriber, if it was there, was told 0x8B: it reconnects.
		// (Its client may see that a moment after the process ended.)
		select {
		case <-subs[len(subs)-1].gone:
		case <-time.After(2 * time.Second):
			return
		}
		subs = append(subs, resume(t, h.mqtt, id, began))
		reconnects = append(reconnects, time.Since(began))
	}
	stream(t, h.mqtt, "acme-r-pub", topic, n, func(i int) {
		switch i {
		case n / 4:
			restart(a1)
		case n / 2:
			restart(a2)
		}
	})
	known := map[string]bool{}
	for _, s := range subs[:len(subs)-1] {
		for p := range s.drain(topic) {
			known[p] = true
		}
	}
	rest := subs[len(subs)-1].collectMore(topic, n, known)
	rest.check(t, "rolling restart of pool a", n)
	t.Logf("rolling restart: the subscriber reconnected %d times (%v after its gateway was told to stop); %d repeats, all with DUP",
		len(reconnects), reconnects, rest.repeats)
}

// connectAddress reads shoal.sessions from the start until the Connect
// event of client id, and returns its client address.
func connectAddress(t *testing.T, c *cluster, id string) string {
	t.Helper()
	kc := newKafkaClient(t, c.kafka, kafka.Config{}, nil)
	ctx, cancel := context.WithTimeout(t.Context(), clusterWait)
	defer cancel()
	var addr string
	found := errors.New("found")
	err := kc.Consume(ctx, kafka.ConsumeConfig{Topic: kafka.TopicSessions, Partitions: []int32{0, 1, 2, 3}}, func(_ context.Context, b kafka.Batch) error {
		for _, r := range b.Records {
			var env eventspb.Envelope
			if kafka.DecodeEnvelope(r, &env) != nil {
				continue
			}
			if cn := env.GetConnect(); cn != nil && env.ClientId == id {
				addr = cn.GetClientAddress()
				return found
			}
		}
		return nil
	})
	if !errors.Is(err, found) {
		t.Fatalf("no Connect event of %s in %s: %v", id, kafka.TopicSessions, err)
	}
	return addr
}

// startPoolA starts a distributed cluster with pool a of two gateways and
// a default pool of one, every gateway requiring PROXY v2, behind HAProxy.
func startPoolA(t *testing.T) (a1, a2 *proc, h *haproxyProc) {
	t.Helper()
	c := newCluster(t)
	sess, r := c.start("session", "session"), c.start("router", "router")
	pp := []string{"--proxy-protocol", "required", "--proxy-trusted", "127.0.0.0/8"}
	a1, a2 = c.startGateway("gw-a1", pp...), c.startGateway("gw-a2", pp...)
	d := c.startGateway("gw-d", pp...)
	for _, p := range []*proc{sess, r, a1, a2, d} {
		p.waitReady()
	}
	return a1, a2, startHAProxy(t, "default="+d.server(), "a="+a1.server()+","+a2.server())
}

// resume reconnects a persistent client through addr until it is accepted
// (its gateway failed since, at most clusterWait ago).
func resume(t *testing.T, addr, id string, since time.Time) *mqttClient {
	t.Helper()
	for {
		cl, _, err := tryDialMQTT(t, addr, id, false, 3600, "", "")
		if err == nil {
			return cl
		}
		if time.Since(since) > clusterWait {
			t.Fatalf("%s could not reconnect through %s in %v: %v", id, addr, clusterWait, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
