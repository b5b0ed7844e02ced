package broker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/shoal-mqtt/shoal/compose/broker"
	"github.com/shoal-mqtt/shoal/compose/broker/brokertest"
	"github.com/shoal-mqtt/shoal/compose/config"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/internal/testutil/pahoconn"
)

// wait bounds every wait in these tests.
const wait = 10 * time.Second

// startBroker runs `shoal all` on loopback ports in a temporary directory
// and stops it when the test ends; sessions are checked for expiry every
// 200 ms.
func startBroker(t *testing.T, mut ...func(*config.Config)) *broker.Broker {
	t.Helper()
	return brokertest.Start(t, append([]func(*config.Config){func(c *config.Config) {
		c.Session.ExpiryCheck = 200 * time.Millisecond
	}}, mut...)...)
}

func mqttAddr(b *broker.Broker) string { return b.Addr("mqtt").String() }

// v5Client is an Eclipse Paho MQTT 5.0 client with a channel of what it
// receives.
type v5Client struct {
	*paho.Client
	msgs chan *paho.Publish
	disc chan *paho.Disconnect

	errMu sync.Mutex
	errs  []error // what Paho reported through OnClientError
}

func dialV5(t *testing.T, addr, clientID string, mut ...func(*paho.Connect)) (*v5Client, *paho.Connack) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, wait)
	if err != nil {
		t.Fatal(err)
	}
	return connectV5(t, nc, clientID, mut...)
}

// connectV5 is dialV5 over a connection made already.
func connectV5(t *testing.T, nc net.Conn, clientID string, mut ...func(*paho.Connect)) (*v5Client, *paho.Connack) {
	t.Helper()
	c := &v5Client{msgs: make(chan *paho.Publish, 1000), disc: make(chan *paho.Disconnect, 1)}
	c.Client = paho.NewClient(paho.ClientConfig{
		// Each packet written whole: the pinger writes from a goroutine
		// of its own (TLS and WebSocket connections made malformed
		// packets of interleaved writes now and then).
		Conn: pahoconn.Locked(nc),
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			c.msgs <- pr.Packet
			return true, nil
		}},
		OnServerDisconnect: func(d *paho.Disconnect) {
			select {
			case c.disc <- d:
			default:
			}
		},
		OnClientError: func(err error) {
			c.errMu.Lock()
			c.errs = append(c.errs, err)
			c.errMu.Unlock()
		},
	})
	cp := &paho.Connect{ClientID: clientID, KeepAlive: 30, CleanStart: true}
	for _, m := range mut {
		m(cp)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	ca, err := c.Connect(ctx, cp)
	if err != nil {
		t.Fatalf("connect %q: %v", clientID, err)
	}
	t.Cleanup(func() {
		_ = c.Disconnect(&paho.Disconnect{ReasonCode: 0})
	})
	return c, ca
}

// clientErrors describes what Paho reported as errors of its own (a read
// or write that failed, a packet it could not decode), for a failure's
// message: a timeout alone does not say which side lost the exchange.
func (c *v5Client) clientErrors() string {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	if len(c.errs) == 0 {
		return "the client reported no error"
	}
	return fmt.Sprintf("the client reported %v", c.errs)
}

func (c *v5Client) subscribe(t *testing.T, opts ...paho.SubscribeOptions) *paho.Suback {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	sa, err := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: opts})
	if err != nil {
		t.Fatalf("subscribe: %v (%s)", err, c.clientErrors())
	}
	return sa
}

func (c *v5Client) publish(t *testing.T, p *paho.Publish) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if _, err := c.Publish(ctx, p); err != nil {
		select {
		case d := <-c.disc:
			t.Fatalf("publish %s: %v (the server had sent DISCONNECT %#x; %s)", p.Topic, err, d.ReasonCode, c.clientErrors())
		default:
			t.Fatalf("publish %s: %v (no DISCONNECT from the server; %s)", p.Topic, err, c.clientErrors())
		}
	}
}

// expect returns the next message received, failing after wait.
func (c *v5Client) expect(t *testing.T) *paho.Publish {
	t.Helper()
	select {
	case m := <-c.msgs:
		return m
	case <-time.After(wait):
		t.Fatalf("no message within %v (%s)", wait, c.clientErrors())
		return nil
	}
}

// expectNone checks that nothing arrives for d.
func (c *v5Client) expectNone(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case m := <-c.msgs:
		t.Fatalf("unexpected message on %q: %q", m.Topic, m.Payload)
	case <-time.After(d):
	}
}

// rawClient speaks MQTT through Shoal's own codec, for what a library
// client cannot do on purpose (malformed packets, withheld acks, several
// subscription identifiers, topic aliases).
type rawClient struct {
	t  *testing.T
	nc net.Conn
	rd *packet.Reader
	v  packet.Version
	mu sync.Mutex
}

func dialRaw(t *testing.T, addr string, v packet.Version) *rawClient {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, wait)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	return &rawClient{t: t, nc: nc, rd: packet.NewReader(nc, 1024), v: v}
}

func (r *rawClient) send(p packet.Packet) {
	r.t.Helper()
	r.sendBytes(p.Append(nil, r.v))
}

func (r *rawClient) sendBytes(b []byte) {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.nc.SetWriteDeadline(time.Now().Add(wait))
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

// next reads the next packet, failing after d.
func (r *rawClient) next(d time.Duration) packet.Packet {
	r.t.Helper()
	p, err := r.read(d)
	if err != nil {
		r.t.Fatalf("read: %v", err)
	}
	return p
}

func (r *rawClient) read(d time.Duration) (packet.Packet, error) {
	_ = r.nc.SetReadDeadline(time.Now().Add(d))
	h, body, err := r.rd.ReadPacket()
	if err != nil {
		return nil, err
	}
	return packet.Decode(h, body, r.v)
}

// expectClosed reads until the server closes the connection and returns
// the DISCONNECT it sent first, if any.
func (r *rawClient) expectClosed(d time.Duration) *packet.Disconnect {
	r.t.Helper()
	var disc *packet.Disconnect
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		p, err := r.read(time.Until(deadline))
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				break
			}
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) || isReset(err) {
				return disc
			}
			r.t.Fatalf("read while waiting for close: %v", err)
		}
		if dp, ok := p.(*packet.Disconnect); ok {
			disc = dp
		}
	}
	r.t.Fatalf("connection still open after %v", d)
	return nil
}

func isReset(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe)
}

// connect sends CONNECT and returns the CONNACK.
func (r *rawClient) connect(cp *packet.Connect) *packet.Connack {
	r.t.Helper()
	cp.Version = r.v
	r.send(cp)
	p := r.next(wait)
	ca, ok := p.(*packet.Connack)
	if !ok {
		r.t.Fatalf("want CONNACK, got %v", p.Type())
	}
	return ca
}

type pahoPublish = paho.Publish

func pahoSub(topic string, qos byte) paho.SubscribeOptions {
	return paho.SubscribeOptions{Topic: topic, QoS: qos}
}

// nextAs reads the next packet and requires it to be a T.
func nextAs[T packet.Packet](r *rawClient) T {
	r.t.Helper()
	p := r.next(wait)
	v, ok := p.(T)
	if !ok {
		r.t.Fatalf("got %v, want %T", p.Type(), v)
	}
	return v
}

// subscribeOne subscribes to filter at qos (packet identifier 1) and waits
// for the SUBACK.
func (r *rawClient) subscribeOne(filter string, qos byte) {
	r.t.Helper()
	r.send(&packet.Subscribe{PacketID: 1, Filters: []packet.Subscription{{Filter: []byte(filter), QoS: qos}}})
	nextAs[*packet.Suback](r)
}
