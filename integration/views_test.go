//go:build integration

package integration

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/shoal-mqtt/shoal/compose/store/cqlstore"
	routersvc "github.com/shoal-mqtt/shoal/router-svc"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// TestViewsRebuildCQL is the design's claim on a distributed deployment
// (real Kafka, real Cassandra, separate shoal processes): the views
// rebuilt from the log equal the live ones in Cassandra key by key; a row
// deleted from the live view is the one difference reported; --swap puts
// the rebuilt rows in the live keyspace, which the restarted cluster
// serves.
func TestViewsRebuildCQL(t *testing.T) {
	c := newCluster(t)
	procs := c.startAll()
	gw := procs[0]

	// The workload: persistent (one offline with an inbox) and clean
	// sessions, wildcard and shared subscriptions, retained set and
	// cleared, a will, a session that expires.
	off, _ := dialMQTT(t, gw.mqtt, "acme-off", false, 3600)
	off.subscribe("fleet/+/temp", 1)
	off.subscribe("alerts/#", 2)
	on, _ := dialMQTT(t, gw.mqtt, "acme-on", false, 3600)
	on.subscribe("fleet/#", 2)
	w1, _ := dialMQTT(t, gw.mqtt, "acme-w1", false, 600)
	w1.subscribe("$share/g1/jobs/#", 1)
	w2, _ := dialMQTT(t, gw.mqtt, "acme-w2", true, 0)
	w2.subscribe("$share/g1/jobs/#", 1)
	dying := dialWill(t, gw.mqtt, "acme-dying")
	brief, _ := dialMQTT(t, gw.mqtt, "acme-brief", false, 1)
	brief.subscribe("brief/#", 1)
	_ = brief.Disconnect(&paho.Disconnect{})
	_ = off.Disconnect(&paho.Disconnect{})
	pub, _ := dialMQTT(t, gw.mqtt, "acme-pub", true, 0)
	for _, m := range []struct {
		topic, payload string
		retain         bool
	}{{"status/a", "on", true}, {"status/b", "x", true}, {"status/b", "", true}} {
		if err := pub.publish(m.topic, m.payload, 1, m.retain); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 300 {
		if err := pub.publish("fleet/"+string(rune('0'+i%4))+"/temp", "21.5", byte(i%3), false); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.publish("alerts/fire", "!", 2, false); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if err := pub.publish("jobs/build", "job", 1, false); err != nil {
			t.Fatal(err)
		}
	}
	_ = dying.Close() // no DISCONNECT: the will is published
	// acme-brief expires at a tick (session.expiry_check 1s).
	time.Sleep(3 * time.Second) // real time: shoal processes on a real Kafka and CQL store, on their real clocks
	if err := pub.publish("fleet/done", "1", 1, false); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(clusterWait)
	for drained := false; !drained; {
		select {
		case m := <-on.msgs:
			drained = m.Topic == "fleet/done"
		case <-deadline:
			t.Fatal("acme-on never got fleet/done")
		}
	}
	c.stopAll(procs)

	out, code := c.views(t, "--verify")
	if code != 0 || !strings.Contains(out, ": 0 differences") {
		t.Fatalf("rebuild --verify of the stopped cluster: exit %d", code)
	}

	// Damage: acme-on's fleet/# subscription leaves partition 0 of the live view.
	cfg := cqlConfigOf(t, c)
	live := openCQL(t, cfg)
	ctx := t.Context()
	offset, err := live.LoadShard(ctx, 0, nopShard{})
	if err != nil {
		t.Fatal(err)
	}
	if err := live.ApplyShard(ctx, 0, &routersvc.Mutations{Offset: offset, Subscriptions: []routersvc.SubscriptionMutation{{
		Subscription: routersvc.Subscription{SubscriptionKey: routersvc.SubscriptionKey{Tenant: "acme", Client: "acme-on", Filter: "fleet/#"}},
		Delete:       true,
	}}}); err != nil {
		t.Fatal(err)
	}
	out, code = c.views(t, "--verify")
	var diffs []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "DIFF ") {
			diffs = append(diffs, l)
		}
	}
	want := `DIFF subscription partition=0 tenant="acme" client="acme-on" filter="fleet/#": live (none), rebuilt options {`
	if code != 1 || len(diffs) != 1 || !strings.HasPrefix(diffs[0], want) {
		t.Fatalf("verify of a damaged view: exit %d, differences %q; want exit 1 and one starting %q", code, diffs, want)
	}

	out, code = c.views(t, "--verify", "--swap")
	if code != 1 || !strings.Contains(out, "swapped: keyspace "+cfg.Keyspace+" is live") {
		t.Fatalf("--swap: exit %d", code)
	}
	if _, code = c.views(t, "--verify"); code != 0 {
		t.Fatalf("verify after the swap: exit %d", code)
	}

	// Missing keyspace: one line, exit 1.
	cmd := exec.Command(c.bin, "views", "rebuild", "--verify", "--config", c.cfgPath,
		"--kafka-brokers", strings.Join(c.kafka.Brokers(), ","), "--cql-keyspace", "no_such_keyspace")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); cmd.ProcessState.ExitCode() != 1 || strings.Count(stderr.String(), "\n") != 1 ||
		!strings.Contains(stderr.String(), "keyspace does not exist") {
		t.Errorf("missing keyspace: %v, stderr %q", err, stderr.String())
	}

	// The restarted cluster serves the swapped views.
	procs = c.startAll()
	gw = procs[0]
	on, ca := dialMQTT(t, gw.mqtt, "acme-on", false, 3600)
	if !ca.SessionPresent {
		t.Fatal("acme-on: no session after the swap")
	}
	off, ca = dialMQTT(t, gw.mqtt, "acme-off", false, 3600)
	if !ca.SessionPresent {
		t.Fatal("acme-off: no session after the swap")
	}
	if _, ca := dialMQTT(t, gw.mqtt, "acme-brief", false, 1); ca.SessionPresent {
		t.Error("acme-brief: its expired session came back")
	}
	pub, _ = dialMQTT(t, gw.mqtt, "acme-pub", true, 0)
	if err := pub.publish("fleet/7/temp", "after", 1, false); err != nil {
		t.Fatal(err)
	}
	for got := false; !got; {
		select {
		case m := <-on.msgs:
			got = m.Topic == "fleet/7/temp"
		case <-time.After(clusterWait):
			t.Fatal("acme-on: nothing on fleet/7/temp: the restored subscription does not serve")
		}
	}
	for got := false; !got; {
		select {
		case m := <-off.msgs:
			got = m.Topic == "alerts/fire"
		case <-time.After(clusterWait):
			t.Fatal("acme-off: its queued alerts/fire did not come")
		}
	}
	viewer, _ := dialMQTT(t, gw.mqtt, "acme-viewer", true, 0)
	viewer.subscribe("status/a", 1)
	viewer.expectPayload("on")
}

// startAll starts a gateway, a router and a session service and waits
// until they are ready; the gateway is first.
func (c *cluster) startAll() []*proc {
	ps := []*proc{c.start("gateway", "gw-views"), c.start("router", "router-views"), c.start("session", "session-views")}
	for _, p := range ps {
		p.waitReady()
	}
	return ps
}

// stopAll stops the processes with SIGTERM, the gateway first, so that
// the back roles apply the connections' ends.
func (c *cluster) stopAll(ps []*proc) {
	c.t.Helper()
	for _, p := range ps {
		p.signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(clusterWait):
			c.t.Fatalf("%s did not stop", p.name)
		}
	}
}

// views runs `shoal views rebuild` with args on the cluster's
// configuration and returns its output and exit code.
func (c *cluster) views(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(c.bin, append([]string{"views", "rebuild", "--config", c.cfgPath,
		"--kafka-brokers", strings.Join(c.kafka.Brokers(), ",")}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	_ = cmd.Run()
	t.Logf("shoal views rebuild %s: exit %d\n%s%s", strings.Join(args, " "), cmd.ProcessState.ExitCode(), stdout.String(), stderr.String())
	return stdout.String(), cmd.ProcessState.ExitCode()
}

// cqlConfigOf is the CQL configuration of the cluster's keyspace.
func cqlConfigOf(t *testing.T, c *cluster) cqlstore.Config {
	t.Helper()
	cfg := cqlConfig(t) // a fresh name: take the cluster's from its file
	b, err := os.ReadFile(c.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), "keyspace: "); ok && k == "" {
			cfg.Keyspace = v
		}
	}
	return cfg
}

type nopShard struct{}

func (nopShard) LoadSubscription(routersvc.Subscription) error { return nil }
func (nopShard) LoadRetained(*eventspb.Envelope) error         { return nil }
func (nopShard) LoadUnreleased(routersvc.Unreleased) error     { return nil }

// dialWill connects id with a will and returns the raw connection, to be
// closed without a DISCONNECT.
func dialWill(t *testing.T, addr, id string) net.Conn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cl := paho.NewClient(paho.ClientConfig{Conn: nc, OnClientError: func(error) {}})
	ctx, cancel := context.WithTimeout(t.Context(), clusterWait)
	defer cancel()
	if _, err := cl.Connect(ctx, &paho.Connect{ClientID: id, CleanStart: true, KeepAlive: 30,
		WillMessage: &paho.WillMessage{Topic: "wills/" + id, Payload: []byte("gone"), QoS: 1, Retain: true}}); err != nil {
		t.Fatal(err)
	}
	return nc
}
