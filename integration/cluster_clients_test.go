//go:build integration

package integration

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
	"github.com/shoal-mqtt/shoal/internal/testutil/pahoconn"
)

// mqttClient is a Paho 5.0 client that collects what it receives.
type mqttClient struct {
	*paho.Client
	t    *testing.T
	id   string
	msgs chan *paho.Publish
	gone chan *paho.Disconnect // the server's DISCONNECT
}

// dialMQTT connects id to addr; expiry > 0 keeps its session.
func dialMQTT(t *testing.T, addr, id string, clean bool, expiry uint32) (*mqttClient, *paho.Connack) {
	t.Helper()
	return dialMQTTAs(t, addr, id, clean, expiry, "", "")
}

// dialMQTTAs is dialMQTT with a user name and password ("": none), and
// fails on a CONNACK that refuses (use connectCode to expect a refusal).
func dialMQTTAs(t *testing.T, addr, id string, clean bool, expiry uint32, user, pass string) (*mqttClient, *paho.Connack) {
	t.Helper()
	c, ca, err := tryDialMQTT(t, addr, id, clean, expiry, user, pass)
	if err != nil {
		t.Fatal(err)
	}
	return c, ca
}

// tryDialMQTT is dialMQTTAs returning its error instead of failing the
// test (for clients that retry while a gateway fails over).
func tryDialMQTT(t *testing.T, addr, id string, clean bool, expiry uint32, user, pass string) (*mqttClient, *paho.Connack, error) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, nil, err
	}
	return connectMQTT(t, nc, id, clean, expiry, user, pass)
}

// connectMQTT is tryDialMQTT over a connection already made (nc is closed
// when the CONNECT fails).
func connectMQTT(t *testing.T, nc net.Conn, id string, clean bool, expiry uint32, user, pass string) (*mqttClient, *paho.Connack, error) {
	t.Helper()
	c := &mqttClient{t: t, id: id, msgs: make(chan *paho.Publish, 100_000), gone: make(chan *paho.Disconnect, 1)}
	c.Client = paho.NewClient(paho.ClientConfig{
		Conn: pahoconn.Locked(nc), OnClientError: func(error) {}, // each packet written whole (TLS, WebSocket)
		OnServerDisconnect: func(d *paho.Disconnect) {
			select {
			case c.gone <- d:
			default:
			}
		},
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			c.msgs <- pr.Packet
			return true, nil
		}},
	})
	ctx, cancel := context.WithTimeout(t.Context(), clusterWait)
	defer cancel()
	cp := &paho.Connect{ClientID: id, CleanStart: clean, KeepAlive: 30,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry}}
	if user != "" {
		cp.Username, cp.UsernameFlag, cp.Password, cp.PasswordFlag = user, true, []byte(pass), true
	}
	ca, err := c.Connect(ctx, cp)
	if err != nil {
		_ = nc.Close()
		return nil, ca, fmt.Errorf("connect %s to %s: %w", id, nc.RemoteAddr(), err)
	}
	t.Cleanup(func() { _ = c.Disconnect(&paho.Disconnect{}) })
	return c, ca, nil
}

// connectCode connects as user and returns the CONNACK's reason code
// (0: accepted, then disconnected).
func connectCode(t *testing.T, addr, id, user, pass string) byte {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c := paho.NewClient(paho.ClientConfig{Conn: nc, OnClientError: func(error) {}})
	ctx, cancel := context.WithTimeout(t.Context(), clusterWait)
	defer cancel()
	ca, err := c.Connect(ctx, &paho.Connect{ClientID: id, CleanStart: true, KeepAlive: 30,
		Username: user, UsernameFlag: true, Password: []byte(pass), PasswordFlag: true})
	if ca == nil {
		t.Fatalf("connect %s to %s: %v", id, addr, err)
	}
	if ca.ReasonCode == 0 {
		_ = c.Disconnect(&paho.Disconnect{})
	}
	_ = nc.Close()
	return ca.ReasonCode
}

// tenantConnect connects id anonymously and returns the client (nil when
// refused; disconnected at the end of the test) and its CONNACK's reason
// code.
func tenantConnect(t *testing.T, addr, id string) (*paho.Client, byte) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c := paho.NewClient(paho.ClientConfig{Conn: nc, OnClientError: func(error) {}})
	ctx, cancel := context.WithTimeout(t.Context(), clusterWait)
	defer cancel()
	ca, err := c.Connect(ctx, &paho.Connect{ClientID: id, CleanStart: true, KeepAlive: 30})
	if ca == nil {
		t.Fatalf("connect %s to %s: %v", id, addr, err)
	}
	if ca.ReasonCode != 0 {
		_ = nc.Close()
		return nil, ca.ReasonCode
	}
	t.Cleanup(func() { _ = c.Disconnect(&paho.Disconnect{}) })
	return c, 0
}

// waitMetric polls the process's /metrics until it has line.
func (p *proc) waitMetric(t *testing.T, line string) {
	t.Helper()
	var last string
	eventually.OK(t, clusterWait, func() string {
		resp, err := http.Get("http://" + p.http + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			last = string(b)
			if strings.Contains(last, "\n"+line+"\n") {
				return ""
			}
		}
		return fmt.Sprintf("%s: /metrics has no %q:\n%s", p.name, line, last)
	})
}

// expectPayload fails unless the next message c receives, within
// clusterWait, carries want.
func (c *mqttClient) expectPayload(want string) {
	c.t.Helper()
	select {
	case m := <-c.msgs:
		if string(m.Payload) != want {
			c.t.Fatalf("%s got %q on %s, want %q", c.id, m.Payload, m.Topic, want)
		}
	case <-time.After(clusterWait):
		c.t.Fatalf("%s got nothing in %v, want %q", c.id, clusterWait, want)
	}
}

func (c *mqttClient) subscribe(filter string, qos byte) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.t.Context(), clusterWait)
	defer cancel()
	if _, err := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: filter, QoS: qos}}}); err != nil {
		c.t.Fatalf("%s subscribe %s: %v", c.id, filter, err)
	}
}

func (c *mqttClient) publish(topic, payload string, qos byte, retain bool) error {
	ctx, cancel := context.WithTimeout(c.t.Context(), clusterWait)
	defer cancel()
	_, err := c.Publish(ctx, &paho.Publish{Topic: topic, QoS: qos, Retain: retain, Payload: []byte(payload)})
	return err
}

// tally counts what a subscriber received of a numbered stream.
type tally struct {
	first   map[string]bool // payloads seen
	repeats int             // seen again, with DUP
	bad     []string        // seen again without DUP
	order   []string
}

// collect reads c's messages on topic until want distinct payloads came (or
// clusterWait passed), then a little longer for repeats.
func (c *mqttClient) collect(topic string, want int) *tally {
	c.t.Helper()
	return c.collectMore(topic, want, nil)
}

// collectMore is collect for a client that takes over from another, which
// received known already: payloads in known are skipped (neither counted
// as repeats nor checked for DUP) and count towards want; they are in the
// tally's first set at the end.
func (c *mqttClient) collectMore(topic string, want int, known map[string]bool) *tally {
	c.t.Helper()
	tl := &tally{first: map[string]bool{}}
	defer func() {
		for p := range known {
			tl.first[p] = true
		}
	}()
	deadline := time.After(clusterWait)
	quiet := (<-chan time.Time)(nil)
	for {
		select {
		case m := <-c.msgs:
			if m.Topic != topic {
				continue
			}
			p := string(m.Payload)
			switch {
			case known[p]:
			case !tl.first[p]:
				tl.first[p] = true
				tl.order = append(tl.order, p)
			case m.Duplicate():
				tl.repeats++
			default:
				tl.bad = append(tl.bad, p)
			}
			if len(tl.first)+len(known) == want && quiet == nil {
				quiet = time.After(500 * time.Millisecond)
			}
		case <-quiet:
			return tl
		case <-deadline:
			return tl
		}
	}
}

// drain returns the payloads on topic already received, reading until the
// client has been quiet for a second.
func (c *mqttClient) drain(topic string) map[string]bool {
	got := map[string]bool{}
	for {
		select {
		case m := <-c.msgs:
			if m.Topic == topic {
				got[string(m.Payload)] = true
			}
		case <-time.After(time.Second):
			return got
		}
	}
}

// redial connects id with a clean session to addr, again every 100 ms
// until it is accepted, as a device does whose gateway failed (through
// HAProxy, a connection made while the failed gateway is not yet marked
// down can be cut), and fails the test after clusterWait.
func redial(t *testing.T, addr, id string) *mqttClient {
	t.Helper()
	began := time.Now()
	for {
		c, _, err := tryDialMQTT(t, addr, id, true, 0, "", "")
		if err == nil {
			return c
		}
		if time.Since(began) > clusterWait {
			t.Fatalf("%s could not reconnect in %v: %v", id, clusterWait, err)
		}
		time.Sleep(100 * time.Millisecond) // paced as a device reconnects, not a flood during the failover
	}
}

// check fails unless every one of want payloads arrived, and repeats
// carried DUP.
func (tl *tally) check(t *testing.T, what string, want int) {
	t.Helper()
	if len(tl.first) != want || len(tl.bad) > 0 {
		var missing []string
		for i := range want {
			if p := fmt.Sprintf("m%04d", i); !tl.first[p] {
				missing = append(missing, p)
			}
		}
		t.Fatalf("%s: %d of %d messages arrived (missing %v), %d repeats with DUP, repeats without DUP %v",
			what, len(tl.first), want, missing, tl.repeats, tl.bad)
	}
	t.Logf("%s: all %d messages arrived; %d repeats, all with DUP", what, want, tl.repeats)
}

// stream publishes n numbered QoS 1 messages on topic, one at a time (each
// after the previous PUBACK), calling at(i) before message i; it returns
// when all are acknowledged. A failed publish is retried on a new
// connection.
func stream(t *testing.T, addr, id, topic string, n int, at func(i int)) {
	t.Helper()
	pub, _ := dialMQTT(t, addr, id, true, 0)
	for i := range n {
		if at != nil {
			at(i)
		}
		payload := fmt.Sprintf("m%04d", i)
		for attempt := 1; ; attempt++ {
			err := pub.publish(topic, payload, 1, false)
			if err == nil {
				break
			}
			if attempt == 5 {
				t.Fatalf("publish %s: %v (after %d attempts)", payload, err, attempt)
			}
			t.Logf("publish %s: %v; reconnecting", payload, err)
			pub = redial(t, addr, id)
		}
	}
}

// quantiles formats the median, 90th and 99th percentiles and the maximum
// of ds.
func quantiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "no samples"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	q := func(f float64) time.Duration {
		return s[min(len(s)-1, int(f*float64(len(s))))].Round(10 * time.Microsecond)
	}
	return fmt.Sprintf("p50 %v, p90 %v, p99 %v, max %v (%d samples)", q(0.5), q(0.9), q(0.99), s[len(s)-1].Round(10*time.Microsecond), len(s))
}

// rawSub is a 5.0 subscriber on Shoal's own codec: it knows when the
// gateway read its SUBSCRIBE (a library client writes it from a goroutine
// of its own and hides the PINGRESP), and the SUBACK's arrival is timed.
type rawSub struct {
	t      *testing.T
	nc     net.Conn
	msgs   chan *packet.Publish
	sent   time.Time
	suback chan time.Duration
	pong   chan struct{} // a PINGRESP came
	done   chan struct{}
}

func dialRawSub(t *testing.T, addr, id string) *rawSub {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	s := &rawSub{t: t, nc: nc, msgs: make(chan *packet.Publish, 1000), suback: make(chan time.Duration, 1), pong: make(chan struct{}, 1), done: make(chan struct{})}
	rd := packet.NewReader(nc, 1024)
	if _, err := nc.Write((&packet.Connect{Version: packet.V5, ClientID: []byte(id), CleanStart: true, KeepAlive: 30}).Append(nil, packet.V5)); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(clusterWait))
	h, body, err := rd.ReadPacket()
	if err != nil {
		t.Fatalf("%s: connack: %v", id, err)
	}
	if p, err := packet.Decode(h, body, packet.V5); err != nil || p.Type() != packet.CONNACK {
		t.Fatalf("%s: want CONNACK, got %v (%v)", id, h.Type, err)
	}
	_ = nc.SetReadDeadline(time.Time{})
	go func() {
		defer close(s.done)
		for {
			h, body, err := rd.ReadPacket()
			if err != nil {
				return
			}
			p, err := packet.Decode(h, body, packet.V5)
			if err != nil {
				return
			}
			switch p := p.(type) {
			case *packet.Suback:
				s.suback <- time.Since(s.sent)
			case *packet.Pingresp:
				s.pong <- struct{}{}
			case *packet.Publish:
				m := *p
				m.Topic, m.Payload = slices.Clone(p.Topic), slices.Clone(p.Payload)
				if p.QoS == 1 {
					_, _ = nc.Write((&packet.Ack{Kind: packet.PUBACK, PacketID: p.PacketID}).Append(nil, packet.V5))
				}
				s.msgs <- &m
			}
		}
	}()
	return s
}

// subscribeRead writes a SUBSCRIBE of filters (QoS 1) and a PINGREQ in
// one write, and returns once the PINGRESP came: the gateway reads a
// connection's packets in order and answers a PINGREQ without waiting for
// the log, so by then it had read the SUBSCRIBE and handed its records to
// its producer, and the SUBACK, which waits for the log, usually has not
// come yet (acked says whether it had).
func (s *rawSub) subscribeRead(filters ...string) (acked bool) {
	sub := &packet.Subscribe{PacketID: 1}
	for _, f := range filters {
		sub.Filters = append(sub.Filters, packet.Subscription{Filter: []byte(f), QoS: 1})
	}
	b := (&packet.Pingreq{}).Append(sub.Append(nil, packet.V5), packet.V5)
	s.sent = time.Now()
	if _, err := s.nc.Write(b); err != nil {
		s.t.Fatal(err)
	}
	select {
	case <-s.pong:
	case <-time.After(clusterWait):
		s.t.Fatal("no PINGRESP after SUBSCRIBE and PINGREQ")
	}
	return len(s.suback) > 0
}

// subackAfter is how long the SUBACK took, 0 when none came within 10 s.
func (s *rawSub) subackAfter() time.Duration {
	select {
	case d := <-s.suback:
		return d
	case <-time.After(10 * time.Second):
		return 0
	}
}

func (s *rawSub) close() {
	_, _ = s.nc.Write((&packet.Disconnect{}).Append(nil, packet.V5))
	_ = s.nc.Close()
	<-s.done
}
