package qos2resend

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/eclipse/paho.golang/paho/session/state"
	mqtt3 "github.com/eclipse/paho.mqtt.golang"
)

// Scenario is one run of the resend scenario.
type Scenario struct {
	// Version is the publisher's protocol: 4 (MQTT 3.1.1, Eclipse Paho's
	// paho.mqtt.golang) or 5 (paho.golang).
	Version int
	// ClientID is the publisher's client identifier.
	ClientID string
	// Topic is where every message is published.
	Topic string
	// N is how many messages are sent before the drop (and again after).
	N int
	// Proxy is the publisher's way to the broker.
	Proxy *Proxy
	// SubscriberAddr returns where subscribers connect (called again after
	// Between: a restarted broker has new ports).
	SubscriberAddr func() string
	// Between runs after the drop and before the publisher reconnects:
	// restart the broker, point the proxy elsewhere. It reports whether
	// the subscribers' connections are gone (a restart).
	Between func() (restarted bool)
	// Wait bounds every wait (default 20 s).
	Wait time.Duration
}

// Run runs the scenario and fails t unless every subscriber got each
// message exactly once: the N messages before the drop, and one more
// message published after the resend, with nothing in between.
func (s Scenario) Run(t *testing.T) {
	t.Helper()
	if s.Wait == 0 {
		s.Wait = 20 * time.Second
	}
	first := s.subscribe(t, "a")
	pub := s.publisher(t)
	pub.connect(t)

	// The broker's answers are dropped: the publisher never reads a PUBREC.
	s.Proxy.Mute(true)
	for i := range s.N {
		pub.publishAsync(t, strconv.Itoa(i+1))
	}
	want := make([]string, s.N)
	for i := range want {
		want[i] = strconv.Itoa(i + 1)
	}
	// Once the subscriber has them all, the broker took them in.
	first.expect(t, want, s.Wait)

	// The connection drops; nothing gets through until Between is done.
	s.Proxy.Pause(true)
	s.Proxy.Cut()
	pub.lost(t, s.Wait)
	subs := []*subscriber{first}
	if s.Between != nil && s.Between() {
		subs = nil // the broker restarted: its connections are gone
	}
	subs = append(subs, s.subscribe(t, "b"))
	s.Proxy.Mute(false)
	s.Proxy.Pause(false)

	// The publisher resumes its session and sends the N messages again,
	// with DUP and their packet identifiers, then one more.
	pub.reconnect(t, s.Wait)
	pub.publishSync(t, "last", s.Wait)
	for _, sub := range subs {
		sub.expect(t, []string{"last"}, s.Wait)
		sub.expectNone(t, 200*time.Millisecond)
	}
	pub.close()
}

// subscriber is a 5.0 client subscribed to the scenario's topic at QoS 2,
// without a persistent session.
type subscriber struct {
	c    *paho.Client
	msgs chan *paho.Publish
}

func (s Scenario) subscribe(t *testing.T, suffix string) *subscriber {
	t.Helper()
	nc, err := net.DialTimeout("tcp", s.SubscriberAddr(), s.Wait)
	if err != nil {
		t.Fatal(err)
	}
	sub := &subscriber{msgs: make(chan *paho.Publish, 100)}
	sub.c = paho.NewClient(paho.ClientConfig{
		Conn: nc,
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			sub.msgs <- pr.Packet
			return true, nil
		}},
		OnClientError: func(error) {},
	})
	ctx, cancel := context.WithTimeout(context.Background(), s.Wait)
	defer cancel()
	if _, err := sub.c.Connect(ctx, &paho.Connect{ClientID: s.ClientID + "-sub-" + suffix, KeepAlive: 30, CleanStart: true}); err != nil {
		t.Fatalf("subscriber connect: %v", err)
	}
	t.Cleanup(func() { _ = sub.c.Disconnect(&paho.Disconnect{}) })
	if _, err := sub.c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: s.Topic, QoS: 2}}}); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	return sub
}

// expect requires the next messages to carry want, in order.
func (sub *subscriber) expect(t *testing.T, want []string, wait time.Duration) {
	t.Helper()
	var got []string
	deadline := time.After(wait)
	for len(got) < len(want) {
		select {
		case m := <-sub.msgs:
			got = append(got, string(m.Payload))
		case <-deadline:
			t.Fatalf("subscriber got %q, want %q", got, want)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("subscriber got %q, want %q: a message sent again was delivered again", got, want)
	}
}

func (sub *subscriber) expectNone(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case m := <-sub.msgs:
		t.Fatalf("subscriber got %q after the last message", m.Payload)
	case <-time.After(d):
	}
}

// publisher is the persistent QoS 2 publisher of either protocol version.
type publisher interface {
	connect(t *testing.T)
	publishAsync(t *testing.T, payload string)
	// lost waits until the client noticed the drop.
	lost(t *testing.T, wait time.Duration)
	// reconnect resumes the session (which sends the unacknowledged
	// messages again) and waits for the resends to complete.
	reconnect(t *testing.T, wait time.Duration)
	publishSync(t *testing.T, payload string, wait time.Duration)
	close()
}

func (s Scenario) publisher(t *testing.T) publisher {
	switch s.Version {
	case 4:
		return &v3Publisher{s: s}
	case 5:
		return &v5Publisher{s: s, session: state.NewInMemory()}
	}
	t.Fatalf("protocol version %d", s.Version)
	return nil
}

// v5Publisher is paho.golang with one session state across its
// connections: it resends unacknowledged PUBLISHes (DUP) and PUBRELs when
// the CONNACK says the session is present.
type v5Publisher struct {
	s       Scenario
	session *state.State
	c       *paho.Client
}

// dial connects without Clean Start; a resumed session must be present.
func (p *v5Publisher) dial(t *testing.T, resume bool) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", p.s.Proxy.Addr(), p.s.Wait)
	if err != nil {
		t.Fatal(err)
	}
	p.c = paho.NewClient(paho.ClientConfig{Conn: nc, Session: p.session, OnClientError: func(error) {}})
	ctx, cancel := context.WithTimeout(context.Background(), p.s.Wait)
	defer cancel()
	expiry := uint32(300)
	ca, err := p.c.Connect(ctx, &paho.Connect{
		ClientID: p.s.ClientID, KeepAlive: 30, CleanStart: false,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry},
	})
	if err != nil {
		t.Fatalf("publisher connect: %v", err)
	}
	if resume && !ca.SessionPresent {
		t.Fatal("publisher: session not present after the reconnect")
	}
}

func (p *v5Publisher) connect(t *testing.T) { p.dial(t, false) }

func (p *v5Publisher) publishAsync(t *testing.T, payload string) {
	t.Helper()
	_, err := p.c.PublishWithOptions(context.Background(), &paho.Publish{Topic: p.s.Topic, QoS: 2, Payload: []byte(payload)},
		paho.PublishOptions{Method: paho.PublishMethod_AsyncSend})
	if err != nil {
		t.Fatalf("publish %s: %v", payload, err)
	}
}

func (p *v5Publisher) lost(t *testing.T, wait time.Duration) {
	t.Helper()
	select {
	case <-p.c.Done():
	case <-time.After(wait):
		t.Fatal("publisher did not notice the drop")
	}
}

// reconnect resumes the session: paho.golang sends the unacknowledged
// PUBLISHes again as soon as the CONNACK says the session is present.
func (p *v5Publisher) reconnect(t *testing.T, _ time.Duration) { p.dial(t, true) }

func (p *v5Publisher) publishSync(t *testing.T, payload string, wait time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if _, err := p.c.Publish(ctx, &paho.Publish{Topic: p.s.Topic, QoS: 2, Payload: []byte(payload)}); err != nil {
		t.Fatalf("publish %s: %v", payload, err)
	}
}

func (p *v5Publisher) close() { _ = p.c.Disconnect(&paho.Disconnect{}) }

// v3Publisher is paho.mqtt.golang without Clean Session and with automatic
// reconnects: it resends its stored PUBLISHes (DUP) and PUBRELs.
type v3Publisher struct {
	s      Scenario
	c      mqtt3.Client
	toks   []mqtt3.Token
	lostCh chan struct{}
}

func (p *v3Publisher) connect(t *testing.T) {
	t.Helper()
	p.lostCh = make(chan struct{}, 1)
	opts := mqtt3.NewClientOptions().AddBroker("tcp://" + p.s.Proxy.Addr()).SetClientID(p.s.ClientID).
		SetProtocolVersion(4).SetCleanSession(false).SetStore(mqtt3.NewMemoryStore()).
		SetAutoReconnect(true).SetMaxReconnectInterval(100 * time.Millisecond).SetConnectTimeout(p.s.Wait).
		SetKeepAlive(30 * time.Second).
		SetConnectionLostHandler(func(mqtt3.Client, error) {
			select {
			case p.lostCh <- struct{}{}:
			default:
			}
		})
	p.c = mqtt3.NewClient(opts)
	if tok := p.c.Connect(); !tok.WaitTimeout(p.s.Wait) || tok.Error() != nil {
		t.Fatalf("publisher connect: %v", tok.Error())
	}
}

func (p *v3Publisher) publishAsync(_ *testing.T, payload string) {
	p.toks = append(p.toks, p.c.Publish(p.s.Topic, 2, false, payload))
}

func (p *v3Publisher) lost(t *testing.T, wait time.Duration) {
	t.Helper()
	select {
	case <-p.lostCh:
	case <-time.After(wait):
		t.Fatal("publisher did not notice the drop")
	}
}

// reconnect waits for the automatic reconnect to complete every publish
// sent before the drop.
func (p *v3Publisher) reconnect(t *testing.T, wait time.Duration) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for i, tok := range p.toks {
		if !tok.WaitTimeout(time.Until(deadline)) {
			t.Fatalf("publish %d not completed after the reconnect", i+1)
		}
		if err := tok.Error(); err != nil {
			t.Fatalf("publish %d: %v", i+1, err)
		}
	}
}

func (p *v3Publisher) publishSync(t *testing.T, payload string, wait time.Duration) {
	t.Helper()
	if tok := p.c.Publish(p.s.Topic, 2, false, payload); !tok.WaitTimeout(wait) || tok.Error() != nil {
		t.Fatalf("publish %s: %v", payload, fmt.Sprint(tok.Error()))
	}
}

func (p *v3Publisher) close() { p.c.Disconnect(100) }
