package qos2resend

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/eclipse/paho.golang/paho/session/state"
	"github.com/eclipse/paho.golang/paho/store/file"
	mqtt3 "github.com/eclipse/paho.mqtt.golang"
)

// Persisted is the persistence scenario of a client library's own test
// suite (Eclipse Paho's): one client subscribes at QoS 2 to the topic it
// publishes to, completes one message, sends N more and disconnects at
// once without reading anything the broker sends. A new client object
// made from the same file persistence resumes the session, with Clean
// Start 0 and (in 5.0) a session expiry of 0 on this connect, and resends
// the PUBLISHes it has no PUBREC for, with DUP. The client, and an
// observer subscribed on the observer's address, must get each of the
// N+1 messages exactly once.
type Persisted struct {
	// Version is the client's protocol: 4 (MQTT 3.1.1, paho.mqtt.golang
	// with its file store) or 5 (paho.golang with its file store).
	Version int
	// ClientID is the client's identifier.
	ClientID string
	// Topic is where the client publishes and subscribes.
	Topic string
	// N is how many messages are sent before the disconnect.
	N int
	// Proxy is the client's way to the broker.
	Proxy *Proxy
	// ObserverAddr is where the observer connects.
	ObserverAddr string
	// Between runs after the disconnect and before the new client object
	// connects: point the proxy at another gateway.
	Between func()
	// Dir keeps the client's file persistence.
	Dir string
	// Wait bounds every wait (default 20 s).
	Wait time.Duration
}

// Run runs the scenario and fails t unless the client and the observer
// each got every message exactly once.
func (s Persisted) Run(t *testing.T) {
	t.Helper()
	if s.Wait == 0 {
		s.Wait = 20 * time.Second
	}
	observer := s.observe(t)
	want := make([]string, 0, s.N+2)
	for i := range s.N + 1 {
		want = append(want, strconv.Itoa(i+1))
	}
	var c persistedClient
	switch s.Version {
	case 4:
		c = &v3Persisted{s: s}
	case 5:
		c = &v5Persisted{s: s}
	default:
		t.Fatalf("protocol version %d", s.Version)
	}
	got := newInbox()
	c.start(t, got)
	got.waitFor(t, "1", s.Wait)

	// What the broker sends from now on is never read.
	s.Proxy.Mute(true)
	for i := range s.N {
		c.publishAsync(t, strconv.Itoa(i+2))
	}
	// The observer seeing them all means the broker took them in.
	// paho.golang writes each PUBLISH before it returns, so its
	// DISCONNECT follows them at once; paho.mqtt.golang's writer may send
	// a DISCONNECT before the PUBLISHes queued ahead of it, so it waits.
	if s.Version == 5 {
		c.disconnectNow(t)
	}
	observer.expect(t, want, s.Wait)
	if s.Version == 4 {
		c.disconnectNow(t)
	}
	s.Proxy.Cut()
	s.Proxy.Mute(false)
	if s.Between != nil {
		s.Between()
	}

	c.resume(t, got)
	c.publishSync(t, "last", s.Wait)
	got.waitFor(t, "last", s.Wait)
	observer.expect(t, []string{"last"}, s.Wait)
	// Nothing may follow the last message: a late repeat would.
	time.Sleep(300 * time.Millisecond)
	observer.expectNone(t, 0)
	want = append(want, "last")
	if g := got.all(); !sameMessages(g, want) {
		t.Fatalf("client got %d messages %q, want each of %q exactly once", len(g), g, want)
	}
	c.close()
}

// sameMessages reports whether got holds each of want exactly once, in
// any order: the redelivered messages and the resent ones may interleave.
func sameMessages(got, want []string) bool {
	a, b := slices.Clone(got), slices.Clone(want)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// observe connects a clean 5.0 subscriber of the topic at QoS 2.
func (s Persisted) observe(t *testing.T) *subscriber {
	t.Helper()
	return Scenario{ClientID: s.ClientID, Topic: s.Topic, SubscriberAddr: func() string { return s.ObserverAddr }, Wait: s.Wait}.
		subscribe(t, "observer")
}

// inbox collects the payloads a client received, from every client
// object of the scenario.
type inbox struct {
	mu   sync.Mutex
	msgs []string
	seen chan string
}

func newInbox() *inbox { return &inbox{seen: make(chan string, 1000)} }

func (b *inbox) add(payload string) {
	b.mu.Lock()
	b.msgs = append(b.msgs, payload)
	b.mu.Unlock()
	select {
	case b.seen <- payload:
	default:
	}
}

func (b *inbox) all() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.msgs)
}

// waitFor waits until payload was received.
func (b *inbox) waitFor(t *testing.T, payload string, wait time.Duration) {
	t.Helper()
	if slices.Contains(b.all(), payload) {
		return
	}
	deadline := time.After(wait)
	for {
		select {
		case p := <-b.seen:
			if p == payload {
				return
			}
		case <-deadline:
			t.Fatalf("client never got %q (got %q)", payload, b.all())
		}
	}
}

// persistedClient is the scenario's client of either protocol version.
type persistedClient interface {
	// start connects a new session, subscribes and completes message "1".
	start(t *testing.T, got *inbox)
	publishAsync(t *testing.T, payload string)
	// disconnectNow sends DISCONNECT without waiting for anything.
	disconnectNow(t *testing.T)
	// resume makes a new client object from the same persistence and
	// connects it without a clean start.
	resume(t *testing.T, got *inbox)
	publishSync(t *testing.T, payload string, wait time.Duration)
	close()
}

// v5Persisted is paho.golang with its file store.
type v5Persisted struct {
	s Persisted
	c *paho.Client
}

func (p *v5Persisted) dial(t *testing.T, got *inbox, clean bool, expiry uint32) *paho.Connack {
	t.Helper()
	dir := filepath.Join(p.s.Dir, "paho5")
	cs, err := file.New(dir, "client", ".pkt")
	if err != nil {
		t.Fatal(err)
	}
	ss, err := file.New(dir, "server", ".pkt")
	if err != nil {
		t.Fatal(err)
	}
	nc, err := net.DialTimeout("tcp", p.s.Proxy.Addr(), p.s.Wait)
	if err != nil {
		t.Fatal(err)
	}
	p.c = paho.NewClient(paho.ClientConfig{
		Conn: nc, Session: state.New(cs, ss), OnClientError: func(error) {},
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			got.add(string(pr.Packet.Payload))
			return true, nil
		}},
	})
	ctx, cancel := context.WithTimeout(context.Background(), p.s.Wait)
	defer cancel()
	ca, err := p.c.Connect(ctx, &paho.Connect{
		ClientID: p.s.ClientID, KeepAlive: 30, CleanStart: clean,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry},
	})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	return ca
}

func (p *v5Persisted) start(t *testing.T, got *inbox) {
	t.Helper()
	p.dial(t, got, true, 300)
	ctx, cancel := context.WithTimeout(context.Background(), p.s.Wait)
	defer cancel()
	if _, err := p.c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: p.s.Topic, QoS: 2}}}); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	p.publishSync(t, "1", p.s.Wait)
}

func (p *v5Persisted) publishAsync(t *testing.T, payload string) {
	t.Helper()
	_, err := p.c.PublishWithOptions(context.Background(), &paho.Publish{Topic: p.s.Topic, QoS: 2, Payload: []byte(payload)},
		paho.PublishOptions{Method: paho.PublishMethod_AsyncSend})
	if err != nil {
		t.Fatalf("publish %s: %v", payload, err)
	}
}

func (p *v5Persisted) disconnectNow(t *testing.T) {
	t.Helper()
	if err := p.c.Disconnect(&paho.Disconnect{}); err != nil {
		t.Fatalf("disconnect: %v", err)
	}
}

func (p *v5Persisted) resume(t *testing.T, got *inbox) {
	t.Helper()
	if ca := p.dial(t, got, false, 0); !ca.SessionPresent {
		t.Fatal("session not present on the reconnect")
	}
}

func (p *v5Persisted) publishSync(t *testing.T, payload string, wait time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if _, err := p.c.Publish(ctx, &paho.Publish{Topic: p.s.Topic, QoS: 2, Payload: []byte(payload)}); err != nil {
		t.Fatalf("publish %s: %v", payload, err)
	}
}

func (p *v5Persisted) close() { _ = p.c.Disconnect(&paho.Disconnect{}) }

// v3Persisted is paho.mqtt.golang without Clean Session, with its file
// store and no automatic reconnect.
type v3Persisted struct {
	s Persisted
	c mqtt3.Client
}

func (p *v3Persisted) dial(t *testing.T, got *inbox) {
	t.Helper()
	opts := mqtt3.NewClientOptions().AddBroker("tcp://" + p.s.Proxy.Addr()).SetClientID(p.s.ClientID).
		SetProtocolVersion(4).SetCleanSession(false).SetStore(mqtt3.NewFileStore(filepath.Join(p.s.Dir, "paho3"))).
		SetAutoReconnect(false).SetConnectTimeout(p.s.Wait).SetKeepAlive(30 * time.Second).
		SetDefaultPublishHandler(func(_ mqtt3.Client, m mqtt3.Message) { got.add(string(m.Payload())) })
	p.c = mqtt3.NewClient(opts)
	if tok := p.c.Connect(); !tok.WaitTimeout(p.s.Wait) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
}

func (p *v3Persisted) start(t *testing.T, got *inbox) {
	t.Helper()
	p.dial(t, got)
	if tok := p.c.Subscribe(p.s.Topic, 2, nil); !tok.WaitTimeout(p.s.Wait) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	p.publishSync(t, "1", p.s.Wait)
}

func (p *v3Persisted) publishAsync(_ *testing.T, payload string) {
	p.c.Publish(p.s.Topic, 2, false, payload)
}

func (p *v3Persisted) disconnectNow(*testing.T) { p.c.Disconnect(0) }

func (p *v3Persisted) resume(t *testing.T, got *inbox) { p.dial(t, got) }

func (p *v3Persisted) publishSync(t *testing.T, payload string, wait time.Duration) {
	t.Helper()
	if tok := p.c.Publish(p.s.Topic, 2, false, payload); !tok.WaitTimeout(wait) || tok.Error() != nil {
		t.Fatalf("publish %s: %v", payload, fmt.Sprint(tok.Error()))
	}
}

func (p *v3Persisted) close() { p.c.Disconnect(100) }
