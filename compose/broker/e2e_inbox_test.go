package broker_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	dto "github.com/prometheus/client_model/go"

	"github.com/shoal-mqtt/shoal/compose/config"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

// TestOfflineInbox: QoS 1/2 messages published while a persistent session
// is offline are delivered when it resumes; QoS 0 ones are not queued. (The
// session machine's tests check the inbox keeps its order.)
func TestOfflineInbox(t *testing.T) {
	b := startBroker(t)
	persistent := func(clean bool) func(*paho.Connect) {
		return func(cp *paho.Connect) {
			cp.CleanStart = clean
			cp.Properties = &paho.ConnectProperties{SessionExpiryInterval: u32(300)}
		}
	}
	c, _ := dialV5(t, mqttAddr(b), "ib-sub", persistent(true))
	c.subscribe(t, paho.SubscribeOptions{Topic: "ib/#", QoS: 2})
	if err := c.Disconnect(&paho.Disconnect{ReasonCode: 0}); err != nil {
		t.Fatal(err)
	}
	pub, _ := dialV5(t, mqttAddr(b), "ib-pub")
	// Every QoS 1/2 message for a persistent session goes through its
	// inbox, whether the router still sees the client online or not, so no
	// wait is needed here.
	// One topic: MQTT orders messages per topic (another topic may live in
	// another partition).
	pub.publish(t, &paho.Publish{Topic: "ib/t", QoS: 1, Payload: []byte("1")})
	pub.publish(t, &paho.Publish{Topic: "ib/t", QoS: 0, Payload: []byte("qos0")})
	pub.publish(t, &paho.Publish{Topic: "ib/t", QoS: 2, Payload: []byte("2")})
	pub.publish(t, &paho.Publish{Topic: "ib/t", QoS: 1, Payload: []byte("3")})
	waitScrape(t, b, "the session to queue the three QoS 1/2 messages", func(fams map[string]*dto.MetricFamily) bool {
		return gaugeSum(fams, "shoal_session_inbox_depth") == 3
	})

	c2, ca := dialV5(t, mqttAddr(b), "ib-sub", persistent(false))
	if !ca.SessionPresent {
		t.Fatal("session not present")
	}
	// Every QoS 1/2 message arrives, in publish order; QoS 0 is not queued.
	var got []string
	for range 3 {
		got = append(got, string(c2.expect(t).Payload))
	}
	if want := []string{"1", "2", "3"}; !slices.Equal(got, want) {
		t.Fatalf("queued messages %v, want %v (QoS 0 not queued)", got, want)
	}
	c2.expectNone(t, 300*time.Millisecond)
}

// TestUnacknowledgedResentWithDup: a QoS 1 message the client received but
// did not acknowledge before its connection dropped is sent again, with
// DUP, when the session resumes.
func TestUnacknowledgedResentWithDup(t *testing.T) {
	b := startBroker(t)
	connect := func(clean bool) *rawClient { return dialPersistent(t, b, "dup-sub", clean) }
	r := connect(true)
	r.subscribeOne("dup/t", 1)
	pub, _ := dialV5(t, mqttAddr(b), "dup-pub")
	pub.publish(t, &paho.Publish{Topic: "dup/t", QoS: 1, Payload: []byte("unacked")})
	first := nextAs[*packet.Publish](r)
	if first.Dup || string(first.Payload) != "unacked" {
		t.Fatalf("first delivery: dup=%v %q", first.Dup, first.Payload)
	}
	_ = r.nc.Close() // no PUBACK

	r2 := connect(false)
	again := nextAs[*packet.Publish](r2)
	if !again.Dup || string(again.Payload) != "unacked" || again.QoS != 1 || again.PacketID != first.PacketID {
		t.Fatalf("after resume: dup=%v qos=%d id %d %q; want the unacknowledged message again with DUP and id %d",
			again.Dup, again.QoS, again.PacketID, again.Payload, first.PacketID)
	}
	r2.send(&packet.Ack{Kind: packet.PUBACK, PacketID: again.PacketID})
	if _, err := r2.read(300 * time.Millisecond); err == nil {
		t.Fatal("a further delivery after the acknowledged resend")
	}
	_ = r2.nc.Close()
	r3 := connect(false)
	if p, err := r3.read(500 * time.Millisecond); err == nil {
		t.Fatalf("a %v after the message was acknowledged", p.Type())
	}
}

// TestQoS2PubrelResumed: a subscriber PUBRECs a QoS 2 message and leaves
// before PUBCOMP; the resumed session gets the PUBREL again with the same
// packet identifier, not the message (MQTT-4.4.0-1, exactly once).
func TestQoS2PubrelResumed(t *testing.T) {
	b := startBroker(t)
	connect := func(clean bool) *rawClient { return dialPersistent(t, b, "rel-sub", clean) }
	r := connect(true)
	r.subscribeOne("rel/t", 2)
	pub, _ := dialV5(t, mqttAddr(b), "rel-pub")
	pub.publish(t, &paho.Publish{Topic: "rel/t", QoS: 2, Payload: []byte("once")})
	m := nextAs[*packet.Publish](r)
	r.send(&packet.Ack{Kind: packet.PUBREC, PacketID: m.PacketID})
	if rel := nextAs[*packet.Ack](r); rel.Kind != packet.PUBREL || rel.PacketID != m.PacketID {
		t.Fatalf("got %v %d, want PUBREL %d", rel.Kind, rel.PacketID, m.PacketID)
	}
	_ = r.nc.Close() // no PUBCOMP

	r2 := connect(false)
	rel := nextAs[*packet.Ack](r2)
	if rel.Kind != packet.PUBREL || rel.PacketID != m.PacketID {
		t.Fatalf("after resume: %v %d, want PUBREL %d", rel.Kind, rel.PacketID, m.PacketID)
	}
	r2.send(&packet.Ack{Kind: packet.PUBCOMP, PacketID: rel.PacketID})
	if p, err := r2.read(300 * time.Millisecond); err == nil {
		t.Fatalf("a %v after PUBCOMP", p.Type())
	}
	_ = r2.nc.Close()
	r3 := connect(false)
	if p, err := r3.read(500 * time.Millisecond); err == nil {
		t.Fatalf("a %v after the exchange completed", p.Type())
	}
}

// TestInboxOrderAcrossReconnect: a persistent subscriber leaves without
// acknowledging while a publisher keeps publishing on one topic; on resume
// it gets every message exactly once more, in publish order: those it had
// (with DUP), those queued meanwhile, then the live ones.
func TestInboxOrderAcrossReconnect(t *testing.T) {
	b := startBroker(t)
	connect := func(clean bool) *rawClient { return dialPersistent(t, b, "ord-sub", clean) }
	const total, before = 60, 15
	r := connect(true)
	r.subscribeOne("ord/t", 1)
	pub, _ := dialV5(t, mqttAddr(b), "ord-pub")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range total {
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			_, err := pub.Publish(ctx, &paho.Publish{Topic: "ord/t", QoS: 1, Payload: fmt.Appendf(nil, "m%03d", i)})
			cancel()
			if err != nil {
				t.Errorf("publish %d: %v", i, err)
				return
			}
		}
	}()
	for range before {
		nextAs[*packet.Publish](r) // not acknowledged
	}
	_ = r.nc.Close()

	r2 := connect(false)
	var got []string
	for len(got) < total {
		p, err := r2.read(wait)
		if err != nil {
			t.Fatalf("after %d messages: %v", len(got), err)
		}
		m, ok := p.(*packet.Publish)
		if !ok {
			continue
		}
		got = append(got, string(m.Payload))
		r2.send(&packet.Ack{Kind: packet.PUBACK, PacketID: m.PacketID})
	}
	<-done
	for i, g := range got {
		if want := fmt.Sprintf("m%03d", i); g != want {
			t.Fatalf("message %d on the resumed session is %s, want %s (order %v)", i, g, want, got)
		}
	}
	if p, err := r2.read(300 * time.Millisecond); err == nil {
		t.Fatalf("a %v after all %d messages", p.Type(), total)
	}
}

// TestSharedSubscriptionMemberLeaves: two members share a QoS 1
// subscription; one takes messages without acknowledging them and leaves.
// Every message reaches the group: what the leaver held goes to the other
// member, with DUP.
func TestSharedSubscriptionMemberLeaves(t *testing.T) {
	b := startBroker(t)
	stay, _ := dialV5(t, mqttAddr(b), "sh-stay")
	stay.subscribe(t, paho.SubscribeOptions{Topic: "$share/grp/sh/#", QoS: 1})
	leaver := dialRaw(t, mqttAddr(b), packet.V5)
	cp := &packet.Connect{ClientID: []byte("sh-leave"), CleanStart: true, KeepAlive: 30}
	cp.Props.ReceiveMax = 3
	cp.Props.Set(packet.PropReceiveMax)
	leaver.connect(cp)
	leaver.subscribeOne("$share/grp/sh/#", 1)

	pub, _ := dialV5(t, mqttAddr(b), "sh-pub")
	const n = 20
	for i := range n {
		pub.publish(t, &paho.Publish{Topic: "sh/t", QoS: 1, Payload: []byte{byte('a' + i)}})
	}
	// The leaver reads what it was sent, acknowledges nothing, and goes.
	held := 0
	for {
		p, err := leaver.read(300 * time.Millisecond)
		if err != nil {
			break
		}
		if _, ok := p.(*packet.Publish); ok {
			held++
		}
	}
	if held == 0 {
		t.Fatal("round robin sent the leaving member nothing")
	}
	_ = leaver.nc.Close()

	seen := map[byte]bool{}
	deadline := time.After(wait)
	for len(seen) < n {
		select {
		case m := <-stay.msgs:
			seen[m.Payload[0]] = true
		case <-deadline:
			t.Fatalf("the group got %d of %d messages after a member left holding %d", len(seen), n, held)
		}
	}
}

// TestInboxBound: beyond session.max_inbox, messages for an offline session
// are dropped, counted in /metrics, and the resuming 5.0 client is told in
// its CONNACK's reason string.
func TestInboxBound(t *testing.T) {
	b := startBroker(t, func(c *config.Config) { c.Session.MaxInbox = 1 })
	persistent := func(clean bool) func(*paho.Connect) {
		return func(cp *paho.Connect) {
			cp.CleanStart = clean
			cp.Properties = &paho.ConnectProperties{SessionExpiryInterval: u32(300), RequestProblemInfo: true}
		}
	}
	c, _ := dialV5(t, mqttAddr(b), "bound-sub", persistent(true))
	c.subscribe(t, paho.SubscribeOptions{Topic: "bound/t", QoS: 1})
	_ = c.Disconnect(&paho.Disconnect{})
	// The router learns the session is offline: real time, as nothing
	// outside the router tells when it has read the presence.
	time.Sleep(200 * time.Millisecond)
	pub, _ := dialV5(t, mqttAddr(b), "bound-pub")
	for _, p := range []string{"1", "2", "3"} {
		pub.publish(t, &paho.Publish{Topic: "bound/t", QoS: 1, Payload: []byte(p)})
	}
	waitScrape(t, b, "the session to keep one message and drop two", func(fams map[string]*dto.MetricFamily) bool {
		return gaugeSum(fams, "shoal_session_inbox_depth") == 1 && len(series(fams, "shoal_session_inbox_dropped_total")) == 1 &&
			series(fams, "shoal_session_inbox_dropped_total")[0].GetCounter().GetValue() == 2
	})
	c2, ca := dialV5(t, mqttAddr(b), "bound-sub", persistent(false))
	if ca.Properties == nil || !strings.HasPrefix(ca.Properties.ReasonString, "2 queued messages were dropped") {
		t.Fatalf("CONNACK reason string %+v, want the 2 dropped messages reported", ca.Properties)
	}
	// One message is kept (normally the first; docs/sessions.md, "The
	// inbox"), the other two were dropped.
	if m := c2.expect(t); len(m.Payload) != 1 {
		t.Fatalf("kept %q", m.Payload)
	}
	c2.expectNone(t, 200*time.Millisecond)
	expectMetrics(t, b, "shoal_session_inbox_dropped_total 2")
}
