package broker_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/shoal-mqtt/shoal/compose/broker"
	"github.com/shoal-mqtt/shoal/compose/config"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
)

// quotaBroker runs `shoal all` with the tenants' quotas: by default two
// connections and two subscriptions per client; tenant "free" without a
// connection limit.
func quotaBroker(t *testing.T, mut ...func(*config.Config)) *broker.Broker {
	t.Helper()
	return startBroker(t, append([]func(*config.Config){func(c *config.Config) {
		c.Tenants = config.Tenants{
			config.DefaultTenant: {MaxConnections: new(int64(2)), MaxSubscriptionsPerClient: new(int64(2))},
			"free":               {MaxConnections: new(int64(0))},
		}
	}}, mut...)...)
}

// tryV5 connects a Paho 5.0 client and returns its CONNACK's reason code
// (the client is closed when refused, and at the end of the test).
func tryV5(t *testing.T, addr, clientID string) (*v5Client, byte) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, wait)
	if err != nil {
		t.Fatal(err)
	}
	c := &v5Client{msgs: make(chan *paho.Publish, 1000), disc: make(chan *paho.Disconnect, 1)}
	c.Client = paho.NewClient(paho.ClientConfig{Conn: nc, OnClientError: func(error) {},
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			c.msgs <- pr.Packet
			return true, nil
		}}})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	ca, err := c.Connect(ctx, &paho.Connect{ClientID: clientID, KeepAlive: 30, CleanStart: true})
	if ca == nil {
		t.Fatalf("connect %q: %v", clientID, err)
	}
	if ca.ReasonCode != 0 {
		_ = nc.Close()
		return nil, ca.ReasonCode
	}
	t.Cleanup(func() { _ = c.Disconnect(&paho.Disconnect{}) })
	return c, 0
}

// metrics returns the broker's /metrics.
// TestConnectionQuotaEndToEnd: Paho 5.0 clients beyond their tenant's
// max_connections get CONNACK 0x97, a 3.1.1 client 3; another tenant
// is not limited by it; a client that leaves makes room; /metrics counts,
// and shows the limits in force (in `shoal all` the whole of each).
func TestConnectionQuotaEndToEnd(t *testing.T) {
	b := quotaBroker(t, func(c *config.Config) {
		c.Tenants["free"] = config.TenantLimits{MaxConnections: new(int64(0)), MaxConnectionRate: new(float64(50))}
	})
	addr := mqttAddr(b)
	first, code := tryV5(t, addr, "acme-1")
	if code != 0 {
		t.Fatalf("acme-1: CONNACK 0x%02x", code)
	}
	if _, code := tryV5(t, addr, "acme-2"); code != 0 {
		t.Fatalf("acme-2: CONNACK 0x%02x", code)
	}
	if _, code := tryV5(t, addr, "acme-3"); code != byte(packet.CodeQuotaExceeded) {
		t.Fatalf("acme-3 beyond max_connections: CONNACK 0x%02x, want 0x97", code)
	}
	old := dialRaw(t, addr, packet.V311)
	old.send(&packet.Connect{Version: packet.V311, ClientID: []byte("acme-4"), CleanStart: true})
	if err := old.nc.SetReadDeadline(time.Now().Add(wait)); err != nil {
		t.Fatal(err)
	}
	h, body, err := old.rd.ReadPacket()
	if err != nil || h.Type != packet.CONNACK || len(body) != 2 || body[1] != 3 {
		t.Fatalf("acme-4 (3.1.1) beyond max_connections: %v %x %v, want CONNACK return code 3", h.Type, body, err)
	}
	for i := range 3 {
		if _, code := tryV5(t, addr, fmt.Sprintf("free-%d", i)); code != 0 {
			t.Fatalf("free-%d, a tenant without the limit: CONNACK 0x%02x", i, code)
		}
	}
	expectMetrics(t, b,
		`shoal_gateway_quota_connections_refused_total{reason="max_connections",tenant="acme"} 2`,
		`shoal_gateway_tenant_connections{tenant="acme"} 2`,
		`shoal_gateway_tenant_connections{tenant="free"} 3`,
		`shoal_gateway_quota_tenant_connections{tenant="acme"} 2`,
		`shoal_gateway_quota_rate{rate="connections",tenant="free"} 50`)

	if err := first.Disconnect(&paho.Disconnect{}); err != nil {
		t.Fatal(err)
	}
	eventually.OK(t, wait, func() string {
		if _, code := tryV5(t, addr, "acme-3"); code != 0 {
			return fmt.Sprintf("acme-3 after acme-1 left: CONNACK 0x%02x, want 0", code)
		}
		return ""
	})
}

// TestSubscriptionQuotaEndToEnd: a Paho client subscribing beyond its
// tenant's max_subscriptions_per_client gets 0x97 for those filters and no
// message of them; the granted ones work; subscribing again to a filter
// it has is not refused.
func TestSubscriptionQuotaEndToEnd(t *testing.T) {
	b := quotaBroker(t)
	addr := mqttAddr(b)
	sub, _ := tryV5(t, addr, "acme-sub")
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	sa, err := sub.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{
		pahoSub("q/a", 1), pahoSub("q/b", 1), pahoSub("q/c", 1),
	}})
	if sa == nil || !bytes.Equal(sa.Reasons, []byte{1, 1, 0x97}) {
		t.Fatalf("SUBACK %v (%v), want [1 1 151]", sa, err)
	}
	if sa := sub.subscribe(t, pahoSub("q/a", 0)); !bytes.Equal(sa.Reasons, []byte{0}) {
		t.Fatalf("subscribing to q/a again: SUBACK %v, want [0]", sa.Reasons)
	}
	pub, _ := tryV5(t, addr, "acme-pub")
	for _, topic := range []string{"q/c", "q/b"} {
		pub.publish(t, &paho.Publish{Topic: topic, QoS: 1, Payload: []byte(topic)})
	}
	if m := sub.expect(t); m.Topic != "q/b" {
		t.Fatalf("received %q, want q/b only (q/c was refused)", m.Topic)
	}
	sub.expectNone(t, 200*time.Millisecond)
	expectMetrics(t, b, `shoal_gateway_quota_subscriptions_refused_total{tenant="acme"} 1`)
}

// TestRetainedQuotaEndToEnd: retained messages on new topics beyond the
// tenant's max_retained are delivered but not kept: a later subscriber
// gets at most max_retained of them, and /metrics counts the others.
// With 4 partitions and max_retained 4, each router shard keeps one.
func TestRetainedQuotaEndToEnd(t *testing.T) {
	b := quotaBroker(t, func(c *config.Config) {
		c.Tenants["acme"] = config.TenantLimits{MaxRetained: new(int64(4)), MaxConnections: new(int64(10))}
	})
	addr := mqttAddr(b)
	live, _ := tryV5(t, addr, "acme-live")
	live.subscribe(t, pahoSub("r/#", 1))
	pub, _ := tryV5(t, addr, "acme-pub")
	const n = 20
	for i := range n {
		pub.publish(t, &paho.Publish{Topic: fmt.Sprintf("r/%d", i), QoS: 1, Retain: true, Payload: []byte("v")})
	}
	for range n {
		live.expect(t) // every one delivered
	}
	later, _ := tryV5(t, addr, "acme-later")
	later.subscribe(t, pahoSub("r/#", 1))
	kept := 0
	for {
		select {
		case <-later.msgs:
			kept++
			continue
		case <-time.After(500 * time.Millisecond):
		}
		break
	}
	if kept < 1 || kept > 4 {
		t.Fatalf("%d retained messages kept, want 1 to 4 (one per shard at most)", kept)
	}
	expectMetrics(t, b, fmt.Sprintf(`shoal_router_quota_retained_refused_total{tenant="acme"} %d`, n-kept))
}
