//go:build integration

package integration

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
)

// skewBound is how far from the right time an expiry of the skewed
// gateway may fall: the session service's expiry check (1 s here) and the
// way through the log.
const skewBound = 1500 * time.Millisecond

// A will with a delay comes no earlier than the delay less willEarly (the
// clock correction's error, a round trip to the database at most) and no
// later than the delay plus willLate: the session service's check (every
// second here) and the way of the will through the log, the session row's
// QUORUM write, the router and the delivery, which under the fault load on
// the Cassandra ring took up to 2 s (a will 4.2 s after the close).
// Without the correction the will comes 30 s late.
const (
	willEarly = 500 * time.Millisecond
	willLate  = 3 * time.Second
)

// testClockSkew starts a gateway whose clock is 30 s ahead
// (--clock-offset) beside the cluster's, and checks what depends on its
// clock against the others (docs/gateway.md, "Clock"): a will of its client
// comes after its delay, a retained message published through it expires
// after its interval, and a message of another gateway's publisher is
// delivered through it, not dropped as expired, with its interval left.
// others is where the rest of the cluster's clients connect (HAProxy);
// vacate is a gateway stopped meanwhile, whose slot the skewed one takes
// (every slot has a gateway).
func testClockSkew(t *testing.T, c *cluster, others string, vacate *proc) {
	vacate.stop(t)
	defer vacate.restart()
	gs := c.startGateway("gw-skew", "--clock-offset", "30s")
	gs.waitReady()
	defer gs.stop(t) // SIGTERM: it releases the slot for vacate, at once
	eventually.True(t, clusterWait, "gw-skew to correct its clock by the database's", func() bool {
		b, _ := os.ReadFile(gs.log)
		return strings.Contains(string(b), "clock differs from the database's")
	})

	// A will with a 2 s delay, of a client of the skewed gateway.
	watcher, _ := dialMQTT(t, others, "skew-watch", true, 0)
	watcher.subscribe("skew/will", 1)
	nc, err := net.DialTimeout("tcp", gs.mqtt, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cp := &packet.Connect{Version: packet.V5, ClientID: []byte("skew-will"), CleanStart: true,
		KeepAlive: 30, WillFlag: true, WillQoS: 1, WillTopic: []byte("skew/will"), WillPayload: []byte("gone")}
	cp.Props.SessionExpiry = 10
	cp.Props.Set(packet.PropSessionExpiry)
	cp.WillProps.WillDelay = 2
	cp.WillProps.Set(packet.PropWillDelay)
	if _, err := nc.Write(cp.Append(nil, packet.V5)); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(clusterWait))
	if h, _, err := packet.NewReader(nc, 256).ReadPacket(); err != nil || h.Type != packet.CONNACK {
		t.Fatalf("want CONNACK, got %v (%v)", h.Type, err)
	}
	closed := time.Now()
	_ = nc.Close() // no DISCONNECT: the will is due after its delay
	select {
	case m := <-watcher.msgs:
		el := time.Since(closed)
		t.Logf("the will of a client of the skewed gateway (delay 2 s) arrived %s after the close", el.Round(time.Millisecond))
		if m.Topic != "skew/will" || el < 2*time.Second-willEarly || el > 2*time.Second+willLate {
			t.Errorf("will on %s arrived %s after the close, want 2 s, at most %s earlier and %s later", m.Topic, el.Round(time.Millisecond), willEarly, willLate)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("the will of a client of the skewed gateway (delay 2 s) did not come within 10 s")
	}

	// Retained messages published through the skewed gateway: one
	// expires after 3 s, one is kept 60 s.
	pub, _ := dialMQTT(t, gs.mqtt, "skew-pub", true, 0)
	for _, r := range []struct {
		topic  string
		expiry uint32
	}{{"skew/retained/short", 3}, {"skew/retained/long", 60}} {
		publishExpiring(t, pub, r.topic, r.expiry, true)
	}
	time.Sleep(3*time.Second + skewBound) // real time: past the short one's expiry
	late, _ := dialMQTT(t, others, "skew-late", true, 0)
	late.subscribe("skew/retained/#", 1)
	got := map[string]uint32{}
	for wait := time.After(3 * time.Second); ; {
		select {
		case m := <-late.msgs:
			got[m.Topic] = expiryOf(m)
			continue
		case <-wait:
		}
		break
	}
	if e, ok := got["skew/retained/short"]; ok {
		t.Errorf("a retained message with a 3 s expiry, published through the skewed gateway, still delivered %s later (expiry left %d s)",
			(3*time.Second + skewBound).Round(time.Second), e)
	}
	if e, ok := got["skew/retained/long"]; !ok || e > 60 || e < 50 {
		t.Errorf("the retained message with a 60 s expiry: delivered %v with %d s left, want 50-60", ok, e)
	}

	// A message of another gateway's publisher, with 20 s to live,
	// delivered through the skewed gateway.
	sub, _ := dialMQTT(t, gs.mqtt, "skew-sub", true, 0)
	sub.subscribe("skew/in", 1)
	other, _ := dialMQTT(t, others, "skew-other", true, 0)
	publishExpiring(t, other, "skew/in", 20, false)
	select {
	case m := <-sub.msgs:
		if e := expiryOf(m); e > 20 || e < 15 {
			t.Errorf("through the skewed gateway, a message with 20 s to live arrived with %d s left, want 15-20", e)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("a message with 20 s to live was not delivered through the skewed gateway (dropped as expired?)")
	}
}

// publishExpiring publishes a QoS 1 message with a message expiry
// interval of expiry seconds.
func publishExpiring(t *testing.T, c *mqttClient, topic string, expiry uint32, retain bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), clusterWait)
	defer cancel()
	if _, err := c.Publish(ctx, &paho.Publish{Topic: topic, QoS: 1, Retain: retain, Payload: []byte("x"),
		Properties: &paho.PublishProperties{MessageExpiry: &expiry}}); err != nil {
		t.Fatalf("publish %s: %v", topic, err)
	}
}

// expiryOf is a delivered message's expiry interval left, 0 without one.
func expiryOf(m *paho.Publish) uint32 {
	if m.Properties == nil || m.Properties.MessageExpiry == nil {
		return 0
	}
	return *m.Properties.MessageExpiry
}
