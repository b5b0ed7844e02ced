package views_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/shoal-mqtt/shoal/compose/broker"
	"github.com/shoal-mqtt/shoal/compose/config"
	"github.com/shoal-mqtt/shoal/compose/store/pebblestore"
	"github.com/shoal-mqtt/shoal/compose/views"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/internal/testutil/testlog"
	"github.com/shoal-mqtt/shoal/kafka"
	routersvc "github.com/shoal-mqtt/shoal/router-svc"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

const wait = 10 * time.Second

func testConfig(t *testing.T) config.Config {
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.HTTPListen = ""
	cfg.Gateway.MQTTListen = "127.0.0.1:0"
	cfg.Gateway.WSListen = ""
	cfg.Kafka.Partitions = 4
	cfg.Gateway.SysInterval = 0
	cfg.Session.ExpiryCheck = 200 * time.Millisecond
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// running is a `shoal all` the test stops when it wants to.
type running struct {
	b      *broker.Broker
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, cfg config.Config) *running {
	t.Helper()
	b := broker.New(cfg, testlog.New(t), "test")
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{b: b, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- b.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for !b.Ready() {
		select {
		case err := <-r.done:
			cancel()
			t.Fatalf("broker stopped before ready: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("broker not ready after 30s")
		}
	}
	t.Cleanup(r.stopQuietly)
	return r
}

func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("broker run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("broker did not stop within 20s")
	}
	r.done <- nil // for stopQuietly
}

func (r *running) stopQuietly() {
	r.cancel()
	select {
	case err := <-r.done:
		_ = err // the test has its verdict; a stop error was reported by stop
	case <-time.After(20 * time.Second):
	}
}

func (r *running) addr() string { return r.b.Addr("mqtt").String() }

// client is a Paho MQTT 5.0 client with a channel of what it receives.
type client struct {
	*paho.Client
	conn net.Conn
	msgs chan *paho.Publish
}

func dial(t *testing.T, addr, id string, mut ...func(*paho.Connect)) (*client, *paho.Connack) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, wait)
	if err != nil {
		t.Fatal(err)
	}
	c := &client{conn: nc, msgs: make(chan *paho.Publish, 10000)}
	c.Client = paho.NewClient(paho.ClientConfig{
		Conn: nc,
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			c.msgs <- pr.Packet
			return true, nil
		}},
		OnClientError: func(error) {},
	})
	cp := &paho.Connect{ClientID: id, KeepAlive: 30, CleanStart: true}
	for _, m := range mut {
		m(cp)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	ca, err := c.Connect(ctx, cp)
	if err != nil {
		t.Fatalf("connect %q: %v", id, err)
	}
	return c, ca
}

func persistent(expiry uint32) func(*paho.Connect) {
	return func(cp *paho.Connect) {
		cp.CleanStart = false
		cp.Properties = &paho.ConnectProperties{SessionExpiryInterval: &expiry}
	}
}

func (c *client) sub(t *testing.T, opts ...paho.SubscribeOptions) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if _, err := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: opts}); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
}

func (c *client) pub(t *testing.T, p *paho.Publish) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if _, err := c.Publish(ctx, p); err != nil {
		t.Fatalf("publish %s: %v", p.Topic, err)
	}
}

func (c *client) receive(t *testing.T, topic string) *paho.Publish {
	t.Helper()
	deadline := time.After(wait)
	for {
		select {
		case m := <-c.msgs:
			if m.Topic == topic {
				return m
			}
		case <-deadline:
			t.Fatalf("no message on %s", topic)
			return nil
		}
	}
}

func (c *client) disconnect() { _ = c.Disconnect(&paho.Disconnect{ReasonCode: 0}) }

// qos2InFlight publishes a QoS 2 message of a persistent session with raw
// packets and drops the connection before PUBREL: the router keeps its
// packet identifier (an unreleased row).
func qos2InFlight(t *testing.T, addr, id, topic string) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, wait)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = nc.Close() }()
	cp := packet.Connect{Version: packet.V5, ClientID: []byte(id), KeepAlive: 30}
	cp.Props.SessionExpiry = 3600
	cp.Props.Set(packet.PropSessionExpiry)
	buf := cp.Append(nil, packet.V5)
	pub := packet.Publish{QoS: 2, Topic: []byte(topic), PacketID: 7, Payload: []byte("in flight")}
	buf = pub.Append(buf, packet.V5)
	if _, err := nc.Write(buf); err != nil {
		t.Fatal(err)
	}
	// CONNACK, then PUBREC: the PUBREC comes once the Publish is durable.
	r := packet.NewReader(nc, 1<<16)
	_ = nc.SetReadDeadline(time.Now().Add(wait))
	for n := 0; n < 2; n++ {
		h, _, err := r.ReadPacket()
		if err != nil {
			t.Fatalf("raw client: %v", err)
		}
		if n == 1 && h.Type != packet.PUBREC {
			t.Fatalf("raw client: %v, want PUBREC", h.Type)
		}
	}
}

// workload runs a busy mix on a running `shoal all` and returns when the
// log is quiet: persistent and clean sessions, wildcard and shared
// subscriptions, retained messages set and cleared, a will, a session that
// expires, QoS 1/2 messages in flight and queued for offline sessions.
func workload(t *testing.T, r *running) {
	t.Helper()
	addr := r.addr()
	// A persistent subscriber that goes offline: its inbox fills.
	off, _ := dial(t, addr, "acme-off", persistent(3600))
	off.sub(t, paho.SubscribeOptions{Topic: "fleet/+/temp", QoS: 1}, paho.SubscribeOptions{Topic: "alerts/#", QoS: 2})
	// An online persistent subscriber, a shared group of two and a clean one.
	on, _ := dial(t, addr, "acme-on", persistent(3600))
	on.sub(t, paho.SubscribeOptions{Topic: "fleet/#", QoS: 2}, paho.SubscribeOptions{Topic: "status/#", QoS: 1})
	s1, _ := dial(t, addr, "acme-worker1", persistent(600))
	s1.sub(t, paho.SubscribeOptions{Topic: "$share/g1/jobs/#", QoS: 1})
	s2, _ := dial(t, addr, "acme-worker2")
	s2.sub(t, paho.SubscribeOptions{Topic: "$share/g1/jobs/#", QoS: 1})
	other, _ := dial(t, addr, "globex-viewer")
	other.sub(t, paho.SubscribeOptions{Topic: "fleet/1/temp", QoS: 0})
	// A will, published when its connection drops.
	w, _ := dial(t, addr, "acme-dying", func(cp *paho.Connect) {
		cp.WillMessage = &paho.WillMessage{Topic: "wills/acme-dying", Payload: []byte("gone"), QoS: 1, Retain: true}
	})
	// A session that expires one second after it ends.
	ex, _ := dial(t, addr, "acme-brief", persistent(1))
	ex.sub(t, paho.SubscribeOptions{Topic: "brief/#", QoS: 1})
	ex.disconnect()
	off.disconnect()

	pub, _ := dial(t, addr, "acme-pub")
	expiry := uint32(3600)
	pub.pub(t, &paho.Publish{Topic: "status/a", Payload: []byte("on"), QoS: 1, Retain: true})
	pub.pub(t, &paho.Publish{Topic: "status/b", Payload: []byte("x"), QoS: 1, Retain: true})
	pub.pub(t, &paho.Publish{Topic: "status/b", QoS: 1, Retain: true}) // cleared
	pub.pub(t, &paho.Publish{Topic: "status/c", Payload: []byte("lasting"), QoS: 1, Retain: true,
		Properties: &paho.PublishProperties{MessageExpiry: &expiry}})
	for i := range 200 {
		pub.pub(t, &paho.Publish{Topic: "fleet/" + string(rune('0'+i%4)) + "/temp", Payload: []byte("21.5"), QoS: byte(i % 3)})
	}
	pub.pub(t, &paho.Publish{Topic: "alerts/fire", Payload: []byte("!"), QoS: 2})
	for range 10 {
		pub.pub(t, &paho.Publish{Topic: "jobs/build", Payload: []byte("job"), QoS: 1})
	}
	_ = w.conn.Close() // no DISCONNECT: the will is published
	qos2InFlight(t, addr, "acme-raw", "fleet/9/temp")
	on.receive(t, "status/a")
	on.receive(t, "fleet/9/temp")
	time.Sleep(1500 * time.Millisecond) // acme-brief expires at a tick: real time, the broker runs on the real clock
	// Drained: a message published now reaches a subscriber through the log.
	pub.pub(t, &paho.Publish{Topic: "status/done", Payload: []byte("1"), QoS: 1})
	on.receive(t, "status/done")
	for _, c := range []*client{on, s1, s2, other, pub} {
		c.disconnect()
	}
	time.Sleep(300 * time.Millisecond) // a quiet period: the disconnects reach the log, which tells nothing when they have
}

func rebuild(t *testing.T, cfg config.Config, verify, swap bool) (views.Result, string, error) {
	t.Helper()
	var out bytes.Buffer
	res, err := views.Run(context.Background(), views.Options{
		Config: cfg, Verify: verify, Swap: swap, Out: &out, Log: testlog.New(t),
	})
	t.Logf("shoal views rebuild (verify %v, swap %v):\n%s", verify, swap, out.String())
	return res, out.String(), err
}

// TestRebuildVerifySwap is the design's claim on Pebble: the views rebuilt
// from the log of a busy `shoal all` equal the live ones key by key; a
// damaged live view is reported, exactly; and a swapped view serves.
func TestRebuildVerifySwap(t *testing.T) {
	cfg := testConfig(t)
	r := start(t, cfg)
	workload(t, r)
	r.stop(t)

	res, out, err := rebuild(t, cfg, true, false)
	if err != nil {
		t.Fatalf("rebuild --verify: %v", err)
	}
	if res.Differences != 0 || !strings.Contains(out, ": 0 differences") {
		t.Fatalf("%d differences", res.Differences)
	}
	if res.Records < 300 {
		t.Errorf("rebuilt %d records: the workload wrote more", res.Records)
	}
	t.Logf("rebuild: %d records in %s, %.0f records/s", res.Records, res.Took, float64(res.Records)/res.Took.Seconds())
	for _, want := range []string{" subscriptions", " retained", " sessions"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary without %q", want)
		}
	}
	checkCounts(t, out)

	// Damage the live view: one subscription goes.
	damage(t, cfg)
	res, out, err = rebuild(t, cfg, true, false)
	if !errors.Is(err, views.ErrDifferences) || res.Differences != 1 {
		t.Fatalf("verify of a damaged view: %d differences, err %v; want exactly 1", res.Differences, err)
	}
	diffs := diffLines(out)
	want := `DIFF subscription partition=0 tenant="acme" client="acme-on" filter="fleet/#": live (none), rebuilt options {`
	if len(diffs) != 1 || !strings.HasPrefix(diffs[0], want) {
		t.Fatalf("differences %q, want one starting %q", diffs, want)
	}

	// Swap: the rebuilt view replaces the damaged one.
	res, _, err = rebuild(t, cfg, true, true)
	if !errors.Is(err, views.ErrDifferences) || res.Replaced == "" {
		t.Fatalf("swap: replaced %q, err %v", res.Replaced, err)
	}
	if _, _, err := rebuild(t, cfg, true, false); err != nil {
		t.Fatalf("verify after the swap: %v", err)
	}
	if m, _ := filepath.Glob(filepath.Join(cfg.DataDir, "views-replaced-*")); len(m) != 1 {
		t.Errorf("replaced views kept: %v", m)
	}

	// A restarted `shoal all` serves the sessions and retained messages.
	r = start(t, cfg)
	on, ca := dial(t, r.addr(), "acme-on", persistent(3600))
	if !ca.SessionPresent {
		t.Fatal("acme-on: no session present after the swap")
	}
	off, ca := dial(t, r.addr(), "acme-off", persistent(3600))
	if !ca.SessionPresent {
		t.Fatal("acme-off: no session present after the swap")
	}
	off.receive(t, "alerts/fire") // queued in its inbox
	if _, ca := dial(t, r.addr(), "acme-brief", persistent(1)); ca.SessionPresent {
		t.Error("acme-brief: its expired session came back")
	}
	pub, _ := dial(t, r.addr(), "acme-pub2")
	pub.pub(t, &paho.Publish{Topic: "fleet/1/temp", Payload: []byte("22"), QoS: 1})
	on.receive(t, "fleet/1/temp") // the subscription the damage removed is back
	viewer, _ := dial(t, r.addr(), "acme-viewer")
	viewer.sub(t, paho.SubscribeOptions{Topic: "status/#", QoS: 1})
	// status/a and status/c (its expiry an hour away): one shard holds
	// both (partition 1) and sends both for the one subscription record.
	got := map[string]string{}
	deadline := time.After(wait)
	for len(got) < 2 {
		select {
		case m := <-viewer.msgs:
			got[m.Topic] = string(m.Payload)
		case <-deadline:
			t.Fatalf("retained messages after the swap: %v, want status/a and status/c", got)
		}
	}
	cleared, _ := dial(t, r.addr(), "acme-viewer3")
	cleared.sub(t, paho.SubscribeOptions{Topic: "status/b", QoS: 1})
	select {
	case m := <-viewer.msgs:
		got[m.Topic] = string(m.Payload)
	case m := <-cleared.msgs:
		got[m.Topic] = string(m.Payload)
	case <-time.After(300 * time.Millisecond):
	}
	if got["status/a"] != "on" || got["status/c"] != "lasting" || got["status/b"] != "" {
		t.Errorf("retained messages after the swap: %v, want status/a=on, status/c=lasting and no status/b (cleared)", got)
	}
}

// checkCounts wants the summary to have counted what the workload made.
func checkCounts(t *testing.T, out string) {
	t.Helper()
	for _, s := range []string{"0 subscriptions", "0 retained", "0 unreleased", "0 sessions"} {
		if strings.Contains(out, " "+s) {
			t.Errorf("summary says %q: the workload made some", s)
		}
	}
}

func diffLines(out string) []string {
	var d []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "DIFF ") {
			d = append(d, l)
		}
	}
	return d
}

// damage deletes acme-on's fleet/# subscription from partition 0 of the
// live view, through the store port, keeping the shard's offset.
func damage(t *testing.T, cfg config.Config) {
	t.Helper()
	db, err := pebblestore.Open(filepath.Join(cfg.DataDir, "views"), testlog.New(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	}()
	ctx := context.Background()
	off, err := db.LoadShard(ctx, 0, nopLoader{})
	if err != nil {
		t.Fatal(err)
	}
	m := &routersvc.Mutations{Offset: off, Subscriptions: []routersvc.SubscriptionMutation{{
		Subscription: routersvc.Subscription{SubscriptionKey: routersvc.SubscriptionKey{Tenant: "acme", Client: "acme-on", Filter: "fleet/#"}},
		Delete:       true,
	}}}
	if err := db.ApplyShard(ctx, 0, m); err != nil {
		t.Fatal(err)
	}
}

type nopLoader struct{}

func (nopLoader) LoadSubscription(routersvc.Subscription) error { return nil }
func (nopLoader) LoadRetained(*eventspb.Envelope) error         { return nil }
func (nopLoader) LoadUnreleased(routersvc.Unreleased) error     { return nil }

// TestBadInput: what cannot be rebuilt is said in one error.
func TestBadInput(t *testing.T) {
	cfg := testConfig(t)
	cfg.DataDir = filepath.Join(t.TempDir(), "missing")
	_, err := views.Run(context.Background(), views.Options{Config: cfg, Out: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing data directory: %v", err)
	}
	// A running `shoal all`: a rebuild works, --verify refuses.
	cfg = testConfig(t)
	r := start(t, cfg)
	pub, _ := dial(t, r.addr(), "acme-pub")
	pub.pub(t, &paho.Publish{Topic: "status/a", Payload: []byte("on"), QoS: 1, Retain: true})
	if _, _, err := rebuild(t, cfg, false, false); err != nil {
		t.Errorf("rebuild while running: %v", err)
	}
	_, _, err = rebuild(t, cfg, true, false)
	if err == nil || !strings.Contains(err.Error(), "is running") {
		t.Errorf("verify while running: %v", err)
	}
}

// TestRebuildAdoptsPartitions: a data directory made with more partitions
// than a new one gets by default, rebuilt with kafka.partitions unset, is
// read with its own count: the rebuild verifies against the live views
// without a difference (with the default count it would leave the last
// partitions out).
func TestRebuildAdoptsPartitions(t *testing.T) {
	cfg := testConfig(t)
	cfg.Kafka.Partitions = kafka.EmbeddedPartitions(runtime.GOMAXPROCS(0)) + 2
	r := start(t, cfg)
	workload(t, r)
	r.stop(t)

	cfg.Kafka.Partitions = 0
	res, out, err := rebuild(t, cfg, true, false)
	if err != nil || res.Differences != 0 {
		t.Fatalf("rebuild --verify with kafka.partitions unset: %d differences, err %v\n%s", res.Differences, err, out)
	}
	if res.Records < 300 {
		t.Errorf("rebuilt %d records: the workload wrote more", res.Records)
	}
}
