package broker_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	mqtt3 "github.com/eclipse/paho.mqtt.golang"

	"github.com/shoal-mqtt/shoal/compose/broker"
	"github.com/shoal-mqtt/shoal/compose/config"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// TestPersistentSessionKeepsSubscriptions: a 5.0 session with an expiry
// interval, and a 3.1.1 session without Clean Session, keep their
// subscriptions across a reconnect (session present), and a Clean Start
// ends them.
func TestPersistentSessionKeepsSubscriptions(t *testing.T) {
	b := startBroker(t)
	pub, _ := dialV5(t, mqttAddr(b), "ps-pub")

	t.Run("5.0", func(t *testing.T) {
		persistent := func(cp *paho.Connect) {
			cp.CleanStart = false
			cp.Properties = &paho.ConnectProperties{SessionExpiryInterval: u32(300)}
		}
		c, ca := dialV5(t, mqttAddr(b), "ps-v5", func(cp *paho.Connect) {
			cp.CleanStart = true
			cp.Properties = &paho.ConnectProperties{SessionExpiryInterval: u32(300)}
		})
		if ca.SessionPresent {
			t.Fatal("session present on a clean start")
		}
		c.subscribe(t, paho.SubscribeOptions{Topic: "ps/v5/#", QoS: 1})
		if err := c.Disconnect(&paho.Disconnect{ReasonCode: 0}); err != nil {
			t.Fatal(err)
		}
		c2, ca2 := dialV5(t, mqttAddr(b), "ps-v5", persistent)
		if !ca2.SessionPresent {
			t.Fatal("session not present on a reconnect without clean start")
		}
		// The subscription was kept: no SUBSCRIBE on this connection.
		publishAndReceive(t, pub, "ps/v5/x", func(d time.Duration) (string, bool) {
			select {
			case m := <-c2.msgs:
				return string(m.Payload), true
			case <-time.After(d):
				return "", false
			}
		})
		_ = c2.Disconnect(&paho.Disconnect{ReasonCode: 0})
		c3, ca3 := dialV5(t, mqttAddr(b), "ps-v5") // clean start
		if ca3.SessionPresent {
			t.Fatal("session present after a clean start")
		}
		pub.publish(t, &paho.Publish{Topic: "ps/v5/x", QoS: 1, Payload: []byte("after clean start")})
		c3.expectNone(t, 300*time.Millisecond)
	})

	t.Run("3.1.1", func(t *testing.T) {
		got := make(chan mqtt3.Message, 10)
		connect := func(clean bool) (mqtt3.Client, bool) {
			opts := mqtt3.NewClientOptions().AddBroker("tcp://" + mqttAddr(b)).SetClientID("ps-v311").
				SetProtocolVersion(4).SetCleanSession(clean).SetAutoReconnect(false).SetConnectTimeout(wait).
				SetDefaultPublishHandler(func(_ mqtt3.Client, m mqtt3.Message) { got <- m })
			c := mqtt3.NewClient(opts)
			tok := c.Connect()
			if !tok.WaitTimeout(wait) || tok.Error() != nil {
				t.Fatalf("connect: %v", tok.Error())
			}
			ct, ok := tok.(*mqtt3.ConnectToken)
			if !ok {
				t.Fatal("not a connect token")
			}
			return c, ct.SessionPresent()
		}
		c, present := connect(false)
		if present {
			t.Fatal("session present for a new client")
		}
		if tok := c.Subscribe("ps/v311", 1, nil); !tok.WaitTimeout(wait) || tok.Error() != nil {
			t.Fatal(tok.Error())
		}
		c.Disconnect(100)
		c, present = connect(false)
		defer c.Disconnect(100)
		if !present {
			t.Fatal("3.1.1 session without clean session not present on reconnect")
		}
		publishAndReceive(t, pub, "ps/v311", func(d time.Duration) (string, bool) {
			select {
			case m := <-got:
				return string(m.Payload()), true
			case <-time.After(d):
				return "", false
			}
		})
	})
}

// TestSessionExpiry: a session whose expiry interval passes while it is
// offline ends: no session present, no subscriptions left.
func TestSessionExpiry(t *testing.T) {
	b := startBroker(t)
	r := dialRaw(t, mqttAddr(b), packet.V5)
	cp := &packet.Connect{ClientID: []byte("exp-sess"), CleanStart: true, KeepAlive: 30}
	cp.Props.SessionExpiry = 1
	cp.Props.Set(packet.PropSessionExpiry)
	r.connect(cp)
	r.subscribeOne("es/t", 1)
	r.send(&packet.Disconnect{})
	r.expectClosed(wait)
	time.Sleep(1500 * time.Millisecond) // the 1 s expiry and a 200 ms tick

	r2 := dialRaw(t, mqttAddr(b), packet.V5)
	cp2 := &packet.Connect{ClientID: []byte("exp-sess"), CleanStart: false, KeepAlive: 30}
	cp2.Props.SessionExpiry = 1
	cp2.Props.Set(packet.PropSessionExpiry)
	if ca := r2.connect(cp2); ca.SessionPresent {
		t.Fatal("an expired session is present")
	}
	pub, _ := dialV5(t, mqttAddr(b), "exp-pub")
	pub.publish(t, &paho.Publish{Topic: "es/t", QoS: 1, Payload: []byte("late")})
	if _, err := r2.read(300 * time.Millisecond); err == nil {
		t.Fatal("the expired session's subscription still delivers")
	}
}

// publishAndReceive publishes "kept" to topic once and requires recv to
// report it: a resumed session's subscriptions are moved to the new
// connection before its CONNACK, so the first publish after it arrives.
func publishAndReceive(t *testing.T, pub *v5Client, topic string, recv func(time.Duration) (string, bool)) {
	t.Helper()
	pub.publish(t, &paho.Publish{Topic: topic, QoS: 1, Payload: []byte("kept")})
	payload, ok := recv(wait)
	if !ok {
		t.Fatalf("the resumed session's subscription to %s delivered nothing", topic)
	}
	if payload != "kept" {
		t.Fatalf("got %q", payload)
	}
}

// TestWillDelayEndToEnd: a will with a delay is published after the delay
// when the connection drops, and not at all when the session resumes first.
func TestWillDelayEndToEnd(t *testing.T) {
	b := startBroker(t)
	watcher, _ := dialV5(t, mqttAddr(b), "wd-watch")
	watcher.subscribe(t, paho.SubscribeOptions{Topic: "wd/#", QoS: 1})
	dropWithWill := func(id, topic string, clean bool) *rawClient {
		r := dialRaw(t, mqttAddr(b), packet.V5)
		cp := &packet.Connect{ClientID: []byte(id), CleanStart: clean, KeepAlive: 30, WillFlag: true, WillQoS: 1,
			WillTopic: []byte(topic), WillPayload: []byte("gone")}
		cp.Props.SessionExpiry = 60
		cp.Props.Set(packet.PropSessionExpiry)
		cp.WillProps.WillDelay = 1
		cp.WillProps.Set(packet.PropWillDelay)
		if ca := r.connect(cp); ca.Code != 0 {
			t.Fatalf("CONNACK %v", ca.Code)
		}
		_ = r.nc.Close() // no DISCONNECT: the will is due
		return r
	}

	start := time.Now()
	dropWithWill("wd-1", "wd/one", true)
	m := watcher.expect(t)
	if m.Topic != "wd/one" || string(m.Payload) != "gone" {
		t.Fatalf("got %q on %s", m.Payload, m.Topic)
	}
	if el := time.Since(start); el < 900*time.Millisecond {
		t.Fatalf("will published after %v, before its 1 s delay", el)
	}

	dropWithWill("wd-2", "wd/two", true)
	// Resume the session within the delay: the will must not come.
	again := dialRaw(t, mqttAddr(b), packet.V5)
	cp := &packet.Connect{ClientID: []byte("wd-2"), CleanStart: false, KeepAlive: 30}
	cp.Props.SessionExpiry = 60
	cp.Props.Set(packet.PropSessionExpiry)
	if ca := again.connect(cp); !ca.SessionPresent {
		t.Fatal("session not resumed")
	}
	watcher.expectNone(t, 2*time.Second)
}

// TestWillDelayTiming: a delayed will arrives min(will delay, session
// expiry) after its connection's socket closed abruptly, within 0.5 s
// (MQTT-3.1.3-9), with the default session.expiry_check: the service
// wakes for the will rather than waiting for its periodic tick. One will
// is due at its delay (3 s, expiry 5 s), the other at its session's end
// (delay 4 s, expiry 2 s). The bound counts from the moment the test
// closes the socket, which is before the server can notice it.
func TestWillDelayTiming(t *testing.T) {
	b := startBroker(t, func(c *config.Config) { c.Session.ExpiryCheck = config.Default().Session.ExpiryCheck })
	watcher, _ := dialV5(t, mqttAddr(b), "wt-watch")
	watcher.subscribe(t, paho.SubscribeOptions{Topic: "wt/#", QoS: 1})
	const late = 500 * time.Millisecond
	type willCase struct{ delay, expiry uint32 } // seconds
	cases := map[string]willCase{"wt/delay": {3, 5}, "wt/expiry": {4, 2}}
	closed := make(map[string]time.Time, len(cases))
	for topic, c := range cases {
		r := dialRaw(t, mqttAddr(b), packet.V5)
		cp := &packet.Connect{ClientID: []byte("wt-" + topic[3:]), CleanStart: true, KeepAlive: 30, WillFlag: true,
			WillQoS: 1, WillTopic: []byte(topic), WillPayload: []byte("gone")}
		cp.Props.SessionExpiry = c.expiry
		cp.Props.Set(packet.PropSessionExpiry)
		cp.WillProps.WillDelay = c.delay
		cp.WillProps.Set(packet.PropWillDelay)
		if ca := r.connect(cp); ca.Code != 0 {
			t.Fatalf("CONNACK %v", ca.Code)
		}
		closed[topic] = time.Now()
		_ = r.nc.Close() // no DISCONNECT: the will is due
	}
	for range cases {
		m := watcher.expect(t)
		arrived := time.Now()
		c, ok := cases[m.Topic]
		if !ok {
			t.Fatalf("unexpected message on %s", m.Topic)
		}
		due := time.Duration(min(c.delay, c.expiry)) * time.Second
		el := arrived.Sub(closed[m.Topic])
		t.Logf("%s: will delay %ds, session expiry %ds: arrived %v after the close", m.Topic, c.delay, c.expiry, el)
		if el < due || el > due+late {
			t.Errorf("%s: will arrived %v after the close, want %v to %v", m.Topic, el, due, due+late)
		}
	}
}

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
	time.Sleep(300 * time.Millisecond) // let the session queue them

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

// TestTakeoverRace connects many clients with one client identifier at
// once: exactly one connection survives, every other one is closed (5.0:
// with DISCONNECT 0x8E), and the survivor works.
func TestTakeoverRace(t *testing.T) {
	b := startBroker(t)
	const n = 12
	type result struct {
		r  *rawClient
		ok bool
	}
	results := make(chan result, n)
	for range n {
		go func() {
			r := dialRaw(t, mqttAddr(b), packet.V5)
			cp := &packet.Connect{Version: packet.V5, ClientID: []byte("race-one"), CleanStart: true, KeepAlive: 30}
			r.sendBytes(cp.Append(nil, packet.V5))
			p, err := r.read(wait)
			ca, isAck := p.(*packet.Connack)
			results <- result{r, err == nil && isAck && ca.Code == 0}
		}()
	}
	var conns []*rawClient
	for range n {
		res := <-results
		if res.ok {
			conns = append(conns, res.r)
		}
	}
	if len(conns) == 0 {
		t.Fatal("no connection was accepted")
	}
	// Every accepted connection but one is taken over: count the live ones
	// once the kicks have had time to land.
	deadline := time.Now().Add(wait)
	live := conns
	for len(live) > 1 && time.Now().Before(deadline) {
		var still []*rawClient
		for _, r := range live {
			if _, err := r.read(50 * time.Millisecond); err != nil && isTimeout(err) {
				still = append(still, r) // nothing read: still open
			} else if err == nil {
				still = append(still, r) // read a packet (a DISCONNECT is followed by close)
			}
		}
		live = still
	}
	if len(live) != 1 {
		t.Fatalf("%d connections of one client id are alive, want exactly 1", len(live))
	}
	survivor := live[0]
	survivor.subscribeOne("race/t", 1)
	pub, _ := dialV5(t, mqttAddr(b), "race-pub")
	pub.publish(t, &paho.Publish{Topic: "race/t", QoS: 1, Payload: []byte("to the survivor")})
	if p := nextAs[*packet.Publish](survivor); string(p.Payload) != "to the survivor" {
		t.Fatalf("survivor got %q", p.Payload)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestCrossTenantProbes: a client of one tenant sees nothing of another's
// live, retained, will or shared-subscription traffic, even with '#'.
func TestCrossTenantProbes(t *testing.T) {
	b := startBroker(t)
	spy, _ := dialV5(t, mqttAddr(b), "acme-spy")
	spy.subscribe(t, paho.SubscribeOptions{Topic: "#", QoS: 1})
	spyShared, _ := dialV5(t, mqttAddr(b), "acme-member")
	spyShared.subscribe(t, paho.SubscribeOptions{Topic: "$share/g/probe/#", QoS: 1})

	member, _ := dialV5(t, mqttAddr(b), "globex-member")
	member.subscribe(t, paho.SubscribeOptions{Topic: "$share/g/probe/#", QoS: 1})
	pub, _ := dialV5(t, mqttAddr(b), "globex-pub")
	pub.publish(t, &paho.Publish{Topic: "probe/live", QoS: 1, Payload: []byte("live")})
	pub.publish(t, &paho.Publish{Topic: "probe/retained", QoS: 1, Retain: true, Payload: []byte("retained")})
	// A will of the other tenant.
	r := dialRaw(t, mqttAddr(b), packet.V5)
	r.connect(&packet.Connect{ClientID: []byte("globex-dying"), CleanStart: true, KeepAlive: 30, WillFlag: true,
		WillTopic: []byte("probe/will"), WillPayload: []byte("will")})
	_ = r.nc.Close()

	// The other tenant's shared member gets the live and retained messages
	// and the will; the spies get nothing.
	got := map[string]bool{}
	for range 3 {
		got[string(member.expect(t).Payload)] = true
	}
	if !got["live"] || !got["retained"] || !got["will"] {
		t.Fatalf("the tenant's own shared member got %v", got)
	}
	late, _ := dialV5(t, mqttAddr(b), "acme-late")
	late.subscribe(t, paho.SubscribeOptions{Topic: "#", QoS: 1})
	spy.expectNone(t, 300*time.Millisecond)
	spyShared.expectNone(t, 10*time.Millisecond)
	late.expectNone(t, 10*time.Millisecond) // no retained message of the other tenant
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
	time.Sleep(200 * time.Millisecond) // the router learns the session is offline
	pub, _ := dialV5(t, mqttAddr(b), "bound-pub")
	for _, p := range []string{"1", "2", "3"} {
		pub.publish(t, &paho.Publish{Topic: "bound/t", QoS: 1, Payload: []byte(p)})
	}
	time.Sleep(300 * time.Millisecond)
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

// dialPersistent connects id as a 5.0 raw client with a session that
// outlives the connection (expiry 300 s).
func dialPersistent(t *testing.T, b *broker.Broker, id string, clean bool) *rawClient {
	t.Helper()
	r := dialRaw(t, mqttAddr(b), packet.V5)
	cp := &packet.Connect{ClientID: []byte(id), CleanStart: clean, KeepAlive: 30}
	cp.Props.SessionExpiry = 300
	cp.Props.Set(packet.PropSessionExpiry)
	r.connect(cp)
	return r
}

// A session that ends with its connection leaves the routers' shards by a
// REMOVE_ALL to the partitions of shoal.messages its connection wrote to
// alone (Disconnect.router_partitions): none for a client that never
// subscribed, its topic's partition for a filter without wildcards, every
// partition for one with wildcards. And a new session of the same client
// gets none of the old one's messages. The routers forget the presence of
// each (a tombstone).
func TestSessionEndLeavesItsPartitionsOnly(t *testing.T) {
	var dataDir string
	b := startBroker(t, func(c *config.Config) { dataDir = c.DataDir })
	none, _ := dialV5(t, mqttAddr(b), "end-none")
	one, _ := dialV5(t, mqttAddr(b), "end-one")
	one.subscribe(t, paho.SubscribeOptions{Topic: "end/one", QoS: 1})
	all, _ := dialV5(t, mqttAddr(b), "end-all")
	all.subscribe(t, paho.SubscribeOptions{Topic: "end/+/w", QoS: 1})
	for _, c := range []*v5Client{none, one, all} {
		if err := c.Disconnect(&paho.Disconnect{}); err != nil {
			t.Fatal(err)
		}
	}

	tool, _ := attachLog(t, filepath.Join(dataDir, "kafka"))
	ends, err := tool.EndOffsets(t.Context(), kafka.TopicMessages)
	if err != nil {
		t.Fatal(err)
	}
	parts := int32(len(ends)) // the broker's, not the catalogue's default
	// The session service has answered every Disconnect once each client's
	// presence tombstone is in the log (written after the removals: the
	// routers forget a client whose session ended with its connection).
	var removals map[string][]int32
	eventually.OK(t, wait, func() string {
		var gone map[string]bool
		removals, gone = logRemovals(t, tool, nil)
		if !gone["end-none"] || !gone["end-one"] || !gone["end-all"] {
			return "the session service has not answered every Disconnect"
		}
		return ""
	})
	every := make([]int32, parts)
	for p := range every {
		every[p] = int32(p)
	}
	oneKey := kafka.Key("end", "end/one")
	for client, want := range map[string][]int32{
		"end-none": nil,
		"end-one":  {kafka.PartitionForKey(oneKey, parts)},
		"end-all":  every,
	} {
		if got := removals[client]; !slices.Equal(got, want) {
			t.Errorf("%s: REMOVE_ALL to partitions %v, want %v", client, got, want)
		}
	}

	// Its subscriptions gone, a new session of end-one gets nothing of
	// end/one, and a subscriber that stayed does.
	watch, _ := dialV5(t, mqttAddr(b), "end-watch")
	watch.subscribe(t, paho.SubscribeOptions{Topic: "end/#", QoS: 1})
	again, _ := dialV5(t, mqttAddr(b), "end-one")
	pub, _ := dialV5(t, mqttAddr(b), "end-pub")
	pub.publish(t, &paho.Publish{Topic: "end/one", QoS: 1, Payload: []byte("x")})
	pub.publish(t, &paho.Publish{Topic: "end/a/w", QoS: 1, Payload: []byte("y")})
	watch.expect(t)
	watch.expect(t)
	again.expectNone(t, 300*time.Millisecond)
}

// logRemovals reads the embedded log of a broker: the partitions of
// shoal.messages of the REMOVE_ALLs of each client written so far (of
// those whose generation keep accepts; nil: all), and the clients whose
// presence has a tombstone. An offline presence fails the test: every
// session of these tests ends with the connection it began with.
func logRemovals(t *testing.T, tool *kafka.Client, keep func(gen uint64) bool) (map[string][]int32, map[string]bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	removals := map[string][]int32{}
	gone := map[string]bool{}
	for _, topic := range []string{kafka.TopicMessages, kafka.TopicPresence} {
		ends, err := tool.EndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		var ps []int32
		left := 0
		for p, end := range ends {
			if end > 0 {
				ps = append(ps, p)
				left++
			}
		}
		if left == 0 {
			continue
		}
		cctx, stop := context.WithCancel(ctx)
		err = tool.Consume(cctx, kafka.ConsumeConfig{Topic: topic, Partitions: ps}, func(_ context.Context, b kafka.Batch) error {
			for _, r := range b.Records {
				var env eventspb.Envelope
				if err := kafka.DecodeEnvelope(r, &env); err != nil {
					return err
				}
				if ch := env.GetSubscriptionChange(); ch.GetOp() == eventspb.SubscriptionChange_OP_REMOVE_ALL &&
					(keep == nil || keep(ch.GetRoute().GetGeneration())) {
					removals[env.ClientId] = append(removals[env.ClientId], r.Partition)
				}
				if pr := env.GetPresence(); pr != nil && !pr.GetOnline() {
					t.Errorf("%s: an offline presence, want its tombstone", env.ClientId)
				}
				if topic == kafka.TopicPresence && r.Value == nil {
					_, client, err := kafka.SplitKey(r.Key)
					if err != nil {
						return err
					}
					gone[string(client)] = true
				}
				if r.Offset == ends[r.Partition]-1 {
					if left--; left == 0 {
						stop()
					}
				}
			}
			return nil
		})
		stop()
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	}
	for _, ps := range removals {
		slices.Sort(ps)
	}
	return removals, gone
}

// A takeover leaves the removal of the session it ended to the end of its
// connection, which names where that connection subscribed: the old
// session's REMOVE_ALL goes to those partitions alone, and meanwhile the
// new session gets nothing of the old one's subscriptions, while its own
// subscription to a filter the old session had is a new one (retain
// handling 1 sends the retained message).
func TestTakeoverRemovesTheOldSessionWhereItSubscribed(t *testing.T) {
	var dataDir string
	b := startBroker(t, func(c *config.Config) { dataDir = c.DataDir })
	pub, _ := dialV5(t, mqttAddr(b), "tk-pub")
	pub.publish(t, &paho.Publish{Topic: "tk/r", QoS: 1, Retain: true, Payload: []byte("kept")})
	old, _ := dialV5(t, mqttAddr(b), "tk-dev")
	old.subscribe(t, paho.SubscribeOptions{Topic: "tk/r", QoS: 1, RetainHandling: 1})
	old.expect(t)
	old.subscribe(t, paho.SubscribeOptions{Topic: "tk/a", QoS: 1})

	taker, _ := dialV5(t, mqttAddr(b), "tk-dev")
	taker.subscribe(t, paho.SubscribeOptions{Topic: "tk/r", QoS: 1, RetainHandling: 1})
	if m := taker.expect(t); string(m.Payload) != "kept" || !m.Retain {
		t.Errorf("the new session's subscription got %q (retain %v), want the retained message", m.Payload, m.Retain)
	}
	pub.publish(t, &paho.Publish{Topic: "tk/a", QoS: 1, Payload: []byte("old session's")})
	taker.expectNone(t, 300*time.Millisecond)

	tool, _ := attachLog(t, filepath.Join(dataDir, "kafka"))
	ends, err := tool.EndOffsets(t.Context(), kafka.TopicMessages)
	if err != nil {
		t.Fatal(err)
	}
	parts := int32(len(ends))
	want := []int32{kafka.PartitionForKey(kafka.Key("tk", "tk/r"), parts), kafka.PartitionForKey(kafka.Key("tk", "tk/a"), parts)}
	slices.Sort(want)
	want = slices.Compact(want)
	eventually.OK(t, wait, func() string {
		removals, _ := logRemovals(t, tool, func(gen uint64) bool { return gen == 1 })
		if got := removals["tk-dev"]; !slices.Equal(got, want) {
			return fmt.Sprintf("REMOVE_ALL of the session taken over in partitions %v, want %v", got, want)
		}
		return ""
	})
	pub.publish(t, &paho.Publish{Topic: "tk/r", QoS: 1, Payload: []byte("live")})
	if m := taker.expect(t); string(m.Payload) != "live" {
		t.Errorf("after the old session's removal the new one got %q, want live", m.Payload)
	}
}
