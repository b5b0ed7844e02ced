package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/shoal-mqtt/shoal/internal/localserver/serverproc"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

// TestMain lets the test binary stand in for the shoal binary: with
// SHOAL_TEST_RUN_MAIN set it runs main() with the arguments in
// SHOAL_TEST_ARGS (separated by U+001F), so restart tests can kill a real shoal
// process without a separate build.
func TestMain(m *testing.M) {
	if os.Getenv("SHOAL_TEST_RUN_MAIN") == "1" {
		os.Args = append([]string{"shoal"}, strings.Split(os.Getenv("SHOAL_TEST_ARGS"), "\x1f")...)
		main()
		return
	}
	os.Exit(m.Run())
}

const wait = 30 * time.Second

// shoalProc is a shoal all process on loopback ports and a data directory.
type shoalProc struct {
	t     *testing.T
	cmd   *exec.Cmd
	mqtt  string
	http  string
	admin string // the admin API's address
	dir   string
	log   string // its standard error: the log
	out   string // its standard output

	done    chan struct{} // closed when the process has exited
	waitErr error         // its exit status, once done is closed
}

func freePort(t *testing.T) string {
	t.Helper()
	addr, err := serverproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// startShoal starts shoal all on dir and waits until /readyz says ready.
// Its loopback ports are picked free just before the start, so another
// process may take one in between: a start that fails with "address
// already in use" is retried on new ports (a few times).
//
// env is added to the process's environment.
func startShoal(t *testing.T, dir string, env ...string) *shoalProc {
	t.Helper()
	for attempt := 1; ; attempt++ {
		p, busy := tryStartShoal(t, dir, env)
		if p != nil {
			return p
		}
		if !busy || attempt == 5 {
			t.Fatal("shoal did not start") // tryStartShoal logged why
		}
	}
}

// tryStartShoal starts shoal once; on failure it returns nil and whether
// the cause was a port taken meanwhile.
func tryStartShoal(t *testing.T, dir string, env []string) (*shoalProc, bool) {
	t.Helper()
	stamp := time.Now().UnixNano()
	p := &shoalProc{t: t, dir: dir, mqtt: freePort(t), http: freePort(t), admin: freePort(t), done: make(chan struct{}),
		log: filepath.Join(dir, fmt.Sprintf("shoal-%d.log", stamp)), out: filepath.Join(dir, fmt.Sprintf("shoal-%d.out", stamp))}
	args := []string{"all", "--data-dir", dir, "--mqtt-listen", p.mqtt, "--ws-listen", "", "--http-listen", p.http, "--admin-listen", p.admin,
		"--kafka-partitions", "4", "--log-level", logLevel()}
	p.cmd = exec.Command(os.Args[0], "-test.run=^$")
	p.cmd.Env = append(os.Environ(), "SHOAL_TEST_RUN_MAIN=1", "SHOAL_TEST_ARGS="+strings.Join(args, "\x1f"))
	p.cmd.Env = append(p.cmd.Env, env...)
	logf, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	outf, err := os.Create(p.out)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout, p.cmd.Stderr = outf, logf
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = logf.Close()
	_ = outf.Close()
	go func() { p.waitErr = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	deadline := time.Now().Add(wait)
	for {
		resp, err := http.Get("http://" + p.http + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, false
			}
		}
		select {
		case <-p.done:
			b, _ := os.ReadFile(p.log)
			busy := strings.Contains(string(b), "address already in use")
			t.Logf("shoal exited before it was ready (%v); its log:\n%s", p.waitErr, b)
			return nil, busy
		default:
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(p.log)
			t.Logf("shoal not ready after %v; its log:\n%s", wait, b)
			return nil, false
		}
		time.Sleep(50 * time.Millisecond) // a poll, not eventually: the caller retries a failed start
	}
}

// kill ends the process with SIGKILL.
func (p *shoalProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// stop ends the process with SIGTERM and requires a clean exit.
func (p *shoalProc) stop() {
	p.t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if p.waitErr != nil {
			b, _ := os.ReadFile(p.log)
			p.t.Fatalf("shoal exited with %v after SIGTERM; its log:\n%s", p.waitErr, b)
		}
	case <-time.After(wait):
		p.t.Fatal("shoal did not stop within 30 s of SIGTERM")
	}
}

type client struct {
	*paho.Client
	msgs chan *paho.Publish
}

func connect(t *testing.T, addr, id string, clean bool) (*client, *paho.Connack) {
	t.Helper()
	c := &client{msgs: make(chan *paho.Publish, 100)}
	var ca *paho.Connack
	c.Client, ca = connectPaho(t, addr, id, clean, func(p *paho.Publish) { c.msgs <- p })
	return c, ca
}

// connectPaho connects a Paho 5.0 client with client id id, its session
// kept for an hour (clean false resumes it), handing each PUBLISH it
// receives to received; it disconnects when the test ends.
func connectPaho(t *testing.T, addr, id string, clean bool, received func(*paho.Publish)) (*paho.Client, *paho.Connack) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, wait)
	if err != nil {
		t.Fatal(err)
	}
	c := paho.NewClient(paho.ClientConfig{Conn: nc, OnClientError: func(error) {},
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			received(pr.Packet)
			return true, nil
		}}})
	expiry := uint32(3600)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	ca, err := c.Connect(ctx, &paho.Connect{ClientID: id, CleanStart: clean, KeepAlive: 30,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry}})
	if err != nil {
		t.Fatalf("connect %s: %v", id, err)
	}
	t.Cleanup(func() { _ = c.Disconnect(&paho.Disconnect{}) })
	return c, ca
}

func (c *client) publish(t *testing.T, topic, payload string, qos byte, retain bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if _, err := c.Publish(ctx, &paho.Publish{Topic: topic, QoS: qos, Retain: retain, Payload: []byte(payload)}); err != nil {
		t.Fatalf("publish: %v", err)
	}
}

func (c *client) subscribe(t *testing.T, filter string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if _, err := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: filter, QoS: 1}}}); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
}

func (c *client) expect(t *testing.T, topic, payload string) {
	t.Helper()
	select {
	case m := <-c.msgs:
		if m.Topic != topic || string(m.Payload) != payload {
			t.Fatalf("got %q on %s, want %q on %s", m.Payload, m.Topic, payload, topic)
		}
	case <-time.After(wait):
		t.Fatalf("no message; want %q on %s", payload, topic)
	}
}

// expectSkipping is expect, ignoring messages on the topic skip (resends).
func (c *client) expectSkipping(t *testing.T, topic, payload, skip string) {
	t.Helper()
	deadline := time.After(wait)
	for {
		select {
		case m := <-c.msgs:
			if m.Topic == skip {
				continue
			}
			if m.Topic != topic || string(m.Payload) != payload {
				t.Fatalf("got %q on %s, want %q on %s", m.Payload, m.Topic, payload, topic)
			}
			return
		case <-deadline:
			t.Fatalf("no message; want %q on %s", payload, topic)
		}
	}
}

// dumpLogs shows the logs of every shoal process of the test when it fails.
func dumpLogs(t *testing.T, dir string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		logs, _ := filepath.Glob(filepath.Join(dir, "shoal-*.log"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			t.Logf("%s:\n%s", filepath.Base(l), b)
		}
	})
}

// TestRestartKeepsRetainedAndSessions runs the real shoal process, kills it
// with SIGKILL right after the PUBACK of a retained message, and stops it
// gracefully after another: retained messages and a persistent session
// with its subscription survive both.
func TestRestartKeepsRetainedAndSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a real shoal process several times: skipped with -short")
	}
	dir := t.TempDir()
	dumpLogs(t, dir)
	p := startShoal(t, dir)
	sess, _ := connect(t, p.mqtt, "dur-session", true)
	sess.subscribe(t, "dur/live/#")
	_ = sess.Disconnect(&paho.Disconnect{})
	pub, _ := connect(t, p.mqtt, "dur-pub", true)
	pub.publish(t, "dur/a", "one", 1, true)
	p.kill() // right after the PUBACK

	p = startShoal(t, dir)
	sub, _ := connect(t, p.mqtt, "dur-sub", true)
	sub.subscribe(t, "dur/+")
	sub.expect(t, "dur/a", "one")
	s2, ca := connect(t, p.mqtt, "dur-session", false)
	if !ca.SessionPresent {
		t.Fatal("the persistent session did not survive SIGKILL")
	}
	pub, _ = connect(t, p.mqtt, "dur-pub", true)
	pub.publish(t, "dur/live/x", "to the session", 1, false)
	s2.expect(t, "dur/live/x", "to the session")
	// Queued while offline, then SIGKILL right after the PUBACK: the
	// message is still delivered when the session resumes.
	_ = s2.Disconnect(&paho.Disconnect{})
	time.Sleep(200 * time.Millisecond) // real time: a real shoal process, and nothing outside it tells when the router knows the session offline
	pub.publish(t, "dur/live/q", "queued", 1, false)
	p.kill()

	p = startShoal(t, dir)
	s3, ca := connect(t, p.mqtt, "dur-session", false)
	if !ca.SessionPresent {
		t.Fatal("the persistent session did not survive the second SIGKILL")
	}
	// "to the session" may come again first (DUP): the client's PUBACK may
	// not have reached the broker before it disconnected, and QoS 1 allows
	// a resend.
	s3.expectSkipping(t, "dur/live/q", "queued", "dur/live/x")
	pub, _ = connect(t, p.mqtt, "dur-pub", true)
	pub.publish(t, "dur/a", "two", 2, true)
	p.stop()

	p = startShoal(t, dir)
	sub, _ = connect(t, p.mqtt, "dur-sub2", true)
	sub.subscribe(t, "dur/+")
	sub.expect(t, "dur/a", "two")
	p.stop()
}

// logLevel is the shoal process's log level: debug with SHOAL_TEST_DEBUG.
func logLevel() string {
	if os.Getenv("SHOAL_TEST_DEBUG") != "" {
		return "debug"
	}
	return "warn"
}

// rawSession is a persistent MQTT 5.0 session spoken through Shoal's own
// codec, for a subscriber that withholds its acknowledgements.
type rawSession struct {
	t  *testing.T
	nc net.Conn
	rd *packet.Reader
}

// dialSession connects clientID with a session that outlives the
// connection and returns the client and the CONNACK.
func dialSession(t *testing.T, addr, clientID string, clean bool, mut ...func(*packet.Connect)) (*rawSession, *packet.Connack) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, wait)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	r := &rawSession{t: t, nc: nc, rd: packet.NewReader(nc, 1024)}
	cp := &packet.Connect{Version: packet.V5, ClientID: []byte(clientID), CleanStart: clean, KeepAlive: 60}
	cp.Props.SessionExpiry = 3600
	cp.Props.Set(packet.PropSessionExpiry)
	for _, m := range mut {
		m(cp)
	}
	r.send(cp)
	ca, ok := r.next().(*packet.Connack)
	if !ok || ca.Code != 0 {
		t.Fatalf("connect %s: %+v", clientID, ca)
	}
	return r, ca
}

func (r *rawSession) send(p packet.Packet) {
	r.t.Helper()
	_ = r.nc.SetWriteDeadline(time.Now().Add(wait))
	if _, err := r.nc.Write(p.Append(nil, packet.V5)); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

func (r *rawSession) next() packet.Packet {
	r.t.Helper()
	_ = r.nc.SetReadDeadline(time.Now().Add(wait))
	h, body, err := r.rd.ReadPacket()
	if err != nil {
		r.t.Fatalf("read: %v", err)
	}
	p, err := packet.Decode(h, body, packet.V5)
	if err != nil {
		r.t.Fatalf("decode: %v", err)
	}
	return p
}

// nextOf reads packets until one of kind arrives and returns it as a T.
func nextOf[T packet.Packet](r *rawSession, kind packet.Type) T {
	r.t.Helper()
	for range 100 {
		p := r.next()
		if p.Type() != kind {
			continue
		}
		v, ok := p.(T)
		if !ok {
			r.t.Fatalf("a %v decoded as %T", kind, p)
		}
		return v
	}
	r.t.Fatalf("no %v in 100 packets", kind)
	var zero T
	return zero
}

// TestRestartKeepsMessagesInFlight kills shoal with SIGKILL while a QoS 1
// and a QoS 2 message are in flight to an online persistent subscriber that
// has not acknowledged them (the QoS 2 one PUBREC'd): after the restart the
// resumed session gets the QoS 1 message again with DUP and its packet
// identifier, and the PUBREL of the QoS 2 one (MQTT-4.4.0-1).
func TestRestartKeepsMessagesInFlight(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a real shoal process: skipped with -short")
	}
	dir := t.TempDir()
	dumpLogs(t, dir)
	p := startShoal(t, dir)
	// A client with a retained will is online when the process dies: the
	// restarted gateway's first heartbeat tells the session service that
	// the connections of the earlier run are gone, so the will is
	// published.
	dialSession(t, p.mqtt, "fly-will", true, func(cp *packet.Connect) {
		cp.WillFlag, cp.WillQoS, cp.WillRetain = true, 1, true
		cp.WillTopic, cp.WillPayload = []byte("fly-will/status"), []byte("gone")
	})
	sub, _ := dialSession(t, p.mqtt, "fly-sub", true)
	sub.send(&packet.Subscribe{PacketID: 1, Filters: []packet.Subscription{{Filter: []byte("fly/#"), QoS: 2}}})
	nextOf[*packet.Suback](sub, packet.SUBACK)
	pub, _ := connect(t, p.mqtt, "fly-pub", true)
	pub.publish(t, "fly/1", "one", 1, false)
	first := nextOf[*packet.Publish](sub, packet.PUBLISH)
	pub.publish(t, "fly/2", "two", 2, false)
	second := nextOf[*packet.Publish](sub, packet.PUBLISH)
	sub.send(&packet.Ack{Kind: packet.PUBREC, PacketID: second.PacketID})
	if rel := nextOf[*packet.Ack](sub, packet.PUBREL); rel.PacketID != second.PacketID {
		t.Fatalf("PUBREL for %d, want %d", rel.PacketID, second.PacketID)
	}
	// The PUBREC must be in the log before the kill: the PUBREL above
	// comes from the gateway at once, its record a little later.
	time.Sleep(300 * time.Millisecond) // real time: a real shoal process, whose log tells nothing outside it when it holds the record
	p.kill()

	p = startShoal(t, dir)
	sub, ca := dialSession(t, p.mqtt, "fly-sub", false)
	if !ca.SessionPresent {
		t.Fatal("the persistent session did not survive SIGKILL")
	}
	again := nextOf[*packet.Publish](sub, packet.PUBLISH)
	if !again.Dup || again.PacketID != first.PacketID || string(again.Payload) != "one" || again.QoS != 1 {
		t.Fatalf("after the restart: %q qos %d dup %v id %d; want %q again with DUP and id %d",
			again.Payload, again.QoS, again.Dup, again.PacketID, "one", first.PacketID)
	}
	rel := nextOf[*packet.Ack](sub, packet.PUBREL)
	if rel.PacketID != second.PacketID {
		t.Fatalf("PUBREL for %d after the restart, want %d", rel.PacketID, second.PacketID)
	}
	sub.send(&packet.Ack{Kind: packet.PUBACK, PacketID: again.PacketID})
	sub.send(&packet.Ack{Kind: packet.PUBCOMP, PacketID: rel.PacketID})
	time.Sleep(300 * time.Millisecond) // real time: the acknowledgements reach the log of a real shoal process, which tells nothing when they have
	_ = sub.nc.Close()

	pub, _ = connect(t, p.mqtt, "fly-pub", true)
	pub.subscribe(t, "fly-will/status")
	select {
	case m := <-pub.msgs:
		if string(m.Payload) != "gone" || !m.Retain {
			t.Fatalf("will %q retain %v, want %q retained", m.Payload, m.Retain, "gone")
		}
	case <-time.After(wait):
		t.Fatal("the will of a client connected when shoal was killed was not published after the restart")
	}

	// Acknowledged: nothing comes again.
	sub, _ = dialSession(t, p.mqtt, "fly-sub", false)
	_ = sub.nc.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if h, _, err := sub.rd.ReadPacket(); err == nil {
		t.Fatalf("a %v after everything was acknowledged", h.Type)
	}
	p.stop()
}
