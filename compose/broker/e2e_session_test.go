package broker_test

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	mqtt3 "github.com/eclipse/paho.mqtt.golang"
	dto "github.com/prometheus/client_model/go"

	"github.com/shoal-mqtt/shoal/compose/config"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
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
	// The session expires 1 s after its end, on the broker's real clock;
	// then a tick (every 200 ms) removes it and the service holds none.
	closed := time.Now()
	waitScrape(t, b, "the session to expire", func(fams map[string]*dto.MetricFamily) bool {
		return time.Since(closed) >= time.Second && gaugeSum(fams, "shoal_session_sessions") == 0
	})

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
