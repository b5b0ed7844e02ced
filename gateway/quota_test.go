package gateway

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/gateway/quota"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// quotaLog is a fakeLog that completes every asynchronous write at once
// and notes the Publish and SubscriptionChange records written, with the
// time each Publish was.
type quotaLog struct {
	*fakeLog
	mu      sync.Mutex
	pubs    []string    // payloads, in the order written
	pubAt   []time.Time // when each was written
	filters []string    // the filters of SubscriptionChange ADDs
	// persistent is each ADD's filter with its persistent_session.
	persistent map[string]bool
	// parts are the partitions of shoal.messages written to by each
	// client (its subscription changes and publishes), disconnects each
	// client's Disconnect.
	parts       map[string][]int32
	disconnects map[string]*eventspb.Disconnect
	// holdChanges leaves the writes of subscription changes unfinished.
	holdChanges bool
}

// ProduceSync notes the Disconnects, then writes rs as fakeLog does.
func (l *quotaLog) ProduceSync(ctx context.Context, rs ...*kafka.Record) error {
	for _, r := range rs {
		var env eventspb.Envelope
		if err := kafka.DecodeEnvelope(r, &env); err == nil && env.GetDisconnect() != nil {
			l.mu.Lock()
			if l.disconnects == nil {
				l.disconnects = map[string]*eventspb.Disconnect{}
			}
			l.disconnects[env.ClientId] = env.GetDisconnect()
			l.mu.Unlock()
		}
	}
	return l.fakeLog.ProduceSync(ctx, rs...)
}

// disconnect waits for client's Disconnect and returns it.
func (l *quotaLog) disconnect(t *testing.T, client string) *eventspb.Disconnect {
	t.Helper()
	var d *eventspb.Disconnect
	eventually.True(t, gatewayWait, "a Disconnect of "+client, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		d = l.disconnects[client]
		return d != nil
	})
	return d
}

func (l *quotaLog) Produce(_ context.Context, r *kafka.Record, done func(*kafka.Record, error)) {
	var env eventspb.Envelope
	if err := kafka.DecodeEnvelope(r, &env); err == nil {
		l.mu.Lock()
		if r.Topic == kafka.TopicMessages {
			if l.parts == nil {
				l.parts = map[string][]int32{}
			}
			part := r.Partition
			if part == kafka.PartitionByKey {
				part = kafka.PartitionForKey(r.Key, l.Partitions(r.Topic))
			}
			if !slices.Contains(l.parts[env.ClientId], part) {
				l.parts[env.ClientId] = append(l.parts[env.ClientId], part)
			}
		}
		switch {
		case env.GetPublish() != nil:
			l.pubs = append(l.pubs, string(env.GetPublish().GetMessage().GetPayload()))
			l.pubAt = append(l.pubAt, time.Now())
		case env.GetSubscriptionChange().GetOp() == eventspb.SubscriptionChange_OP_ADD:
			l.filters = append(l.filters, env.GetSubscriptionChange().GetFilter())
			if l.persistent == nil {
				l.persistent = map[string]bool{}
			}
			l.persistent[env.GetSubscriptionChange().GetFilter()] = env.GetSubscriptionChange().GetPersistentSession()
		}
		hold := l.holdChanges && env.GetSubscriptionChange() != nil
		l.mu.Unlock()
		if hold {
			return
		}
	}
	go done(r, nil)
}

// published returns the payloads of the Publish records written so far
// and when the last was.
func (l *quotaLog) published() ([]string, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var last time.Time
	if len(l.pubAt) > 0 {
		last = l.pubAt[len(l.pubAt)-1]
	}
	return append([]string(nil), l.pubs...), last
}

// startQuotaGateway runs a gateway with the tenants' limits q on a
// quotaLog until the test ends.
func startQuotaGateway(t *testing.T, q quota.Config, opts ...func(*Config)) (*Gateway, *quotaLog) {
	t.Helper()
	ql := &quotaLog{fakeLog: newFakeLog()}
	cfg := DefaultConfig()
	cfg.MQTTListen, cfg.WSListen, cfg.SysInterval = "127.0.0.1:0", "", 0
	for _, o := range opts {
		o(&cfg)
	}
	g, err := New(cfg, ql, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, "dev")
	if err != nil {
		t.Fatal(err)
	}
	WithQuotas(quota.New(q, nil))(g)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(testTimeout):
			t.Error("gateway did not stop")
		}
	})
	eventually.True(t, gatewayWait, "gateway ready", g.Ready)
	return g, ql
}

// connectCode sends a CONNECT of version v with client id id and returns
// the connection and the CONNACK's code as sent: a 5.0 reason code, or a
// 3.1.1 return code.
func connectCode(t *testing.T, g *Gateway, v packet.Version, id string) (net.Conn, *packet.Reader, byte) {
	t.Helper()
	nc, err := net.Dial("tcp", g.Addr("mqtt").String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	rd := packet.NewReader(nc, 256)
	cp := &packet.Connect{Version: v, ClientID: []byte(id), CleanStart: true}
	if _, err := nc.Write(cp.Append(nil, v)); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	h, body, err := rd.ReadPacket()
	if err != nil || h.Type != packet.CONNACK || len(body) < 2 {
		t.Fatalf("connect %s: %v %v, want CONNACK", id, h.Type, err)
	}
	return nc, rd, body[1]
}

// tenantStats returns the quota counters of tenant.
func tenantStats(g *Gateway, tenant string) quota.Stats {
	if tn := g.Quotas().Tenant(tenant); tn != nil {
		return tn.Stats()
	}
	return quota.Stats{}
}

// TestConnectionQuota: beyond max_connections a 5.0 client gets CONNACK
// 0x97 (quota exceeded), a 3.1.1 client 3 (server unavailable); another
// tenant has a count of its own; a connection that ends makes room.
func TestConnectionQuota(t *testing.T) {
	g, _ := startQuotaGateway(t, quota.Config{Default: quota.Limits{MaxConnections: 2}})
	first, _, code := connectCode(t, g, packet.V5, "t-1")
	if code != 0 {
		t.Fatalf("t-1: CONNACK 0x%02x, want 0", code)
	}
	if _, _, code := connectCode(t, g, packet.V311, "t-2"); code != 0 {
		t.Fatalf("t-2: CONNACK %d, want 0", code)
	}
	if _, _, code := connectCode(t, g, packet.V5, "t-3"); code != byte(packet.CodeQuotaExceeded) {
		t.Fatalf("t-3 (5.0) at the limit: CONNACK 0x%02x, want 0x97", code)
	}
	if _, _, code := connectCode(t, g, packet.V311, "t-4"); code != 3 {
		t.Fatalf("t-4 (3.1.1) at the limit: CONNACK %d, want 3 (server unavailable)", code)
	}
	if _, _, code := connectCode(t, g, packet.V5, "u-1"); code != 0 {
		t.Fatalf("u-1, another tenant: CONNACK 0x%02x, want 0", code)
	}
	if s := tenantStats(g, "t"); s.Connections != 2 || s.RefusedConnections != 2 {
		t.Fatalf("tenant t: %+v, want 2 connections, 2 refused", s)
	}

	write(t, first, &packet.Disconnect{})
	eventually.True(t, gatewayWait, "t-1's end released", func() bool { return tenantStats(g, "t").Connections == 1 })
	if _, _, code := connectCode(t, g, packet.V5, "t-3"); code != 0 {
		t.Fatalf("t-3 after t-1 left: CONNACK 0x%02x, want 0", code)
	}
	if s := tenantStats(g, "t"); s.Connections != 2 {
		t.Fatalf("tenant t: %+v, want 2 connections", s)
	}
}

// TestConnectionQuotaTakeover: a client identifier connecting again while
// its connection is still here takes it over: not refused at the limit,
// and each connection is uncounted once at its end, so the count returns
// to what the connections are.
func TestConnectionQuotaTakeover(t *testing.T) {
	g, _ := startQuotaGateway(t, quota.Config{Default: quota.Limits{MaxConnections: 1}})
	old, _, code := connectCode(t, g, packet.V5, "t-a")
	if code != 0 {
		t.Fatalf("t-a: CONNACK 0x%02x", code)
	}
	if _, _, code := connectCode(t, g, packet.V5, "t-b"); code != byte(packet.CodeQuotaExceeded) {
		t.Fatalf("t-b at the limit: CONNACK 0x%02x, want 0x97", code)
	}
	// The test's session service kicks no one: both t-a connections stay
	// until the test ends the old one.
	renewed, _, code := connectCode(t, g, packet.V5, "t-a")
	if code != 0 {
		t.Fatalf("t-a again (a takeover) at the limit: CONNACK 0x%02x, want 0", code)
	}
	if s := tenantStats(g, "t"); s.Connections != 2 {
		t.Fatalf("during the takeover: %+v, want both connections counted", s)
	}
	write(t, old, &packet.Disconnect{})
	eventually.True(t, gatewayWait, "the old connection's end", func() bool { return tenantStats(g, "t").Connections == 1 })
	if _, _, code := connectCode(t, g, packet.V5, "t-b"); code != byte(packet.CodeQuotaExceeded) {
		t.Fatalf("t-b while t-a's new connection is up: CONNACK 0x%02x, want 0x97", code)
	}
	write(t, renewed, &packet.Disconnect{})
	eventually.True(t, gatewayWait, "the new connection's end", func() bool { return tenantStats(g, "t").Connections == 0 })
	if _, _, code := connectCode(t, g, packet.V5, "t-b"); code != 0 {
		t.Fatalf("t-b once t-a left: CONNACK 0x%02x, want 0", code)
	}
}

// TestConnectionRateQuota: beyond max_connection_rate (its burst spent) a
// 5.0 client gets CONNACK 0x9F, a 3.1.1 client 3; a connection refused
// for the rate does not count against max_connections.
func TestConnectionRateQuota(t *testing.T) {
	// One connection per 100 s, a burst of 2: the third in a row is
	// refused however slow the machine.
	g, _ := startQuotaGateway(t, quota.Config{Default: quota.Limits{MaxConnections: 10, ConnectionRate: 0.01, ConnectionBurst: 2}})
	for _, id := range []string{"t-1", "t-2"} {
		if _, _, code := connectCode(t, g, packet.V5, id); code != 0 {
			t.Fatalf("%s: CONNACK 0x%02x, want 0", id, code)
		}
	}
	if _, _, code := connectCode(t, g, packet.V5, "t-3"); code != byte(packet.CodeConnectionRateExceeded) {
		t.Fatalf("t-3 beyond the rate: CONNACK 0x%02x, want 0x9F", code)
	}
	if _, _, code := connectCode(t, g, packet.V311, "t-4"); code != 3 {
		t.Fatalf("t-4 (3.1.1) beyond the rate: CONNACK %d, want 3", code)
	}
	if s := tenantStats(g, "t"); s.Connections != 2 || s.RefusedRate != 2 || s.RefusedConnections != 0 {
		t.Fatalf("tenant t: %+v, want 2 connections, 2 refused by the rate", s)
	}
}

// subscribeCodes sends a SUBSCRIBE of filters with packet identifier id in
// version v and returns the SUBACK's codes as sent.
func subscribeCodes(t *testing.T, nc net.Conn, rd *packet.Reader, v packet.Version, id uint16, filters ...string) []byte {
	t.Helper()
	s := &packet.Subscribe{PacketID: id}
	for _, f := range filters {
		s.Filters = append(s.Filters, packet.Subscription{Filter: []byte(f), QoS: 1})
	}
	if _, err := nc.Write(s.Append(nil, v)); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	h, body, err := rd.ReadPacket()
	if err != nil || h.Type != packet.SUBACK {
		t.Fatalf("subscribe %v: %v %v, want SUBACK", filters, h.Type, err)
	}
	var sa packet.Suback
	if err := sa.Decode(h, body, v); err != nil {
		t.Fatal(err)
	}
	if v == packet.V311 {
		return body[2:] // the return codes as sent
	}
	codes := make([]byte, len(sa.Codes))
	for i, c := range sa.Codes {
		codes[i] = byte(c)
	}
	return codes
}

// TestSubscriptionQuota: the filters of a SUBSCRIBE beyond
// max_subscriptions_per_client get 0x97 (5.0) or 0x80 (3.1.1) and are not
// written; a filter the client has already is replaced, not counted again;
// an UNSUBSCRIBE makes room.
func TestSubscriptionQuota(t *testing.T) {
	g, ql := startQuotaGateway(t, quota.Config{Default: quota.Limits{MaxSubscriptionsPerClient: 2}})
	nc, rd, _ := connectCode(t, g, packet.V5, "t-1")
	if got := subscribeCodes(t, nc, rd, packet.V5, 1, "a", "b", "c"); !bytes.Equal(got, []byte{1, 1, 0x97}) {
		t.Fatalf("SUBACK %x, want 01 01 97", got)
	}
	if got := subscribeCodes(t, nc, rd, packet.V5, 2, "a"); !bytes.Equal(got, []byte{1}) {
		t.Fatalf("subscribing to a again: SUBACK %x, want 01 (replaced)", got)
	}
	write(t, nc, &packet.Unsubscribe{PacketID: 3, Filters: [][]byte{[]byte("b")}})
	if p := read(t, nc, rd, 5*time.Second); p.Type() != packet.UNSUBACK {
		t.Fatalf("got %v, want UNSUBACK", p.Type())
	}
	if got := subscribeCodes(t, nc, rd, packet.V5, 4, "c", "d"); !bytes.Equal(got, []byte{1, 0x97}) {
		t.Fatalf("after unsubscribing b: SUBACK %x, want 01 97", got)
	}
	old, ord, _ := connectCode(t, g, packet.V311, "t-2")
	if got := subscribeCodes(t, old, ord, packet.V311, 1, "a", "b", "c"); !bytes.Equal(got, []byte{1, 1, 0x80}) {
		t.Fatalf("3.1.1 SUBACK %x, want 01 01 80", got)
	}
	ql.mu.Lock()
	filters := strings.Join(ql.filters, " ")
	ql.mu.Unlock()
	if filters != "a b a c a b" {
		t.Fatalf("subscriptions written: %s, want a b a c a b (none refused)", filters)
	}
	if s := tenantStats(g, "t"); s.RefusedSubscriptions != 3 {
		t.Fatalf("tenant t: %+v, want 3 subscriptions refused", s)
	}
}

// TestSubscriptionSaysPersistentSession: an ADD tells the router whether
// the client's session outlives its connection (a session expiry above 0),
// which the router needs before the session's presence reaches it.
func TestSubscriptionSaysPersistentSession(t *testing.T) {
	g, ql := startQuotaGateway(t, quota.Config{})
	clean, crd, _ := connectCode(t, g, packet.V5, "t-clean")
	if got := subscribeCodes(t, clean, crd, packet.V5, 1, "clean/#"); !bytes.Equal(got, []byte{1}) {
		t.Fatalf("SUBACK %x, want 01", got)
	}
	cp := &packet.Connect{Version: packet.V5, ClientID: []byte("t-kept"), CleanStart: true}
	cp.Props.SessionExpiry = 3600
	cp.Props.Set(packet.PropSessionExpiry)
	nc, rd, _ := connectWith(t, g, cp)
	if got := subscribeCodes(t, nc, rd, packet.V5, 1, "kept/#"); !bytes.Equal(got, []byte{1}) {
		t.Fatalf("SUBACK %x, want 01", got)
	}
	ql.mu.Lock()
	defer ql.mu.Unlock()
	if p, ok := ql.persistent["kept/#"]; !ok || !p {
		t.Errorf("ADD of a session with an expiry: persistent_session %v (written %v), want true", p, ok)
	}
	if p, ok := ql.persistent["clean/#"]; !ok || p {
		t.Errorf("ADD of a session without an expiry: persistent_session %v (written %v), want false", p, ok)
	}
}

// A Disconnect names the partitions of shoal.messages in which the
// connection left state for the routers: those of its subscription
// changes (every partition for a filter with wildcards) and of its QoS 2
// messages whose identifiers the routers keep, and nothing else, so that
// the session service removes a session that ends with the connection
// from those alone (Disconnect.router_partitions).
func TestDisconnectNamesRouterPartitions(t *testing.T) {
	g, ql := startQuotaGateway(t, quota.Config{})
	bye := func(nc net.Conn) {
		t.Helper()
		write(t, nc, &packet.Disconnect{})
	}
	check := func(client string, want []int32) {
		t.Helper()
		d := ql.disconnect(t, client)
		got := slices.Clone(d.GetRouterPartitions())
		slices.Sort(got)
		if !d.GetRouterPartitionsKnown() || !slices.Equal(got, want) {
			t.Errorf("%s: Disconnect names partitions %v (known %v), want %v", client, got, d.GetRouterPartitionsKnown(), want)
		}
	}
	// Nothing subscribed: no partition.
	nc, _, _ := connectCode(t, g, packet.V5, "t-none")
	bye(nc)
	check("t-none", nil)

	// A filter without wildcards: its topic's partition.
	nc, rd, _ := connectCode(t, g, packet.V5, "t-one")
	if got := subscribeCodes(t, nc, rd, packet.V5, 1, "a/b"); !bytes.Equal(got, []byte{1}) {
		t.Fatalf("SUBACK %x, want 01", got)
	}
	// QoS 0 and 1 publishes leave nothing with the router.
	write(t, nc, &packet.Publish{Topic: []byte("q/0"), Payload: []byte("x")})
	write(t, nc, &packet.Publish{QoS: 1, PacketID: 1, Topic: []byte("q/1"), Payload: []byte("x")})
	readAck(t, nc, rd)
	bye(nc)
	ql.mu.Lock()
	sub := ql.parts["t-one"][0] // the ADD's, written first
	ql.mu.Unlock()
	check("t-one", []int32{sub})

	// A filter with wildcards: every partition.
	nc, rd, _ = connectCode(t, g, packet.V5, "t-all")
	if got := subscribeCodes(t, nc, rd, packet.V5, 1, "a/#"); !bytes.Equal(got, []byte{1}) {
		t.Fatalf("SUBACK %x, want 01", got)
	}
	bye(nc)
	check("t-all", []int32{0, 1, 2, 3})

	// A QoS 2 message of a persistent session: the router keeps its
	// identifier in the partition of its topic.
	cp := &packet.Connect{Version: packet.V5, ClientID: []byte("t-kept"), CleanStart: true}
	cp.Props.SessionExpiry = 3600
	cp.Props.Set(packet.PropSessionExpiry)
	nc, rd, _ = connectWith(t, g, cp)
	write(t, nc, &packet.Publish{QoS: 2, PacketID: 7, Topic: []byte("k/2"), Payload: []byte("x")})
	readAck(t, nc, rd)
	bye(nc)
	ql.mu.Lock()
	kept := slices.Clone(ql.parts["t-kept"])
	ql.mu.Unlock()
	if len(kept) != 1 {
		t.Fatalf("t-kept wrote to partitions %v, want one", kept)
	}
	check("t-kept", kept)
}

// A connection whose writes are still pending when it ends (the wait for
// them timed out) cannot tell where its subscription changes will land
// after the Disconnect: its Disconnect names no partitions, and the
// session service removes the session from every one.
func TestDisconnectWithPendingWritesNamesNoPartitions(t *testing.T) {
	g, ql := startQuotaGateway(t, quota.Config{}, func(c *Config) { c.SessionTimeout = time.Second })
	ql.mu.Lock()
	ql.holdChanges = true
	ql.mu.Unlock()
	nc, _, _ := connectCode(t, g, packet.V5, "t-held")
	write(t, nc, &packet.Subscribe{PacketID: 1, Filters: []packet.Subscription{{Filter: []byte("a/b")}}})
	write(t, nc, &packet.Disconnect{})
	if d := ql.disconnect(t, "t-held"); d.GetRouterPartitionsKnown() || len(d.GetRouterPartitions()) != 0 {
		t.Errorf("Disconnect after pending writes names partitions %v (known %v), want none, not known",
			d.GetRouterPartitions(), d.GetRouterPartitionsKnown())
	}
}

// publishAll sends n QoS 1 PUBLISHes with payloads of size bytes and
// returns when every PUBACK came, failing after limit.
func publishAll(t *testing.T, nc net.Conn, rd *packet.Reader, n, size int, limit time.Duration) {
	t.Helper()
	var buf []byte
	for i := range n {
		payload := fmt.Appendf(nil, "%06d", i)
		payload = append(payload, bytes.Repeat([]byte{'x'}, max(0, size-len(payload)))...)
		buf = (&packet.Publish{QoS: 1, PacketID: uint16(i + 1), Topic: []byte("r"), Payload: payload}).Append(buf, packet.V5)
	}
	go func() { _, _ = nc.Write(buf) }() // blocks while the gateway holds its reads back
	_ = nc.SetReadDeadline(time.Now().Add(limit))
	for acked := 0; acked < n; {
		h, body, err := rd.ReadPacket()
		if err != nil {
			t.Fatalf("%d of %d PUBACKs, then %v", acked, n, err)
		}
		if h.Type != packet.PUBACK {
			t.Fatalf("got %v, want PUBACK", h.Type)
		}
		var a packet.Ack
		if err := a.Decode(h, body, packet.V5); err != nil || a.Code != 0 {
			t.Fatalf("PUBACK %+v %v, want success", a, err)
		}
		acked++
	}
}

// checkPublished requires the n payloads publishAll sent, each once, in
// order.
func checkPublished(t *testing.T, ql *quotaLog, n int) {
	t.Helper()
	pubs, _ := ql.published()
	if len(pubs) != n {
		t.Fatalf("%d messages written, want %d", len(pubs), n)
	}
	for i, p := range pubs {
		if want := fmt.Sprintf("%06d", i); !strings.HasPrefix(p, want) {
			t.Fatalf("message %d is %.6s, want %s", i, p, want)
		}
	}
}

// TestMessageRateQuota: a client publishing faster than its tenant's
// message or byte rate is slowed to the rate: every message is written
// and acknowledged (nothing refused, nothing lost), and the messages
// beyond the burst take at least their time at the rate. The upper bound
// is loose: it only says the client is not starved.
func TestMessageRateQuota(t *testing.T) {
	for _, tc := range []struct {
		name    string
		limits  quota.Limits
		n       int
		size    int
		atLeast time.Duration // (n × cost − burst) / rate
	}{
		// 250 messages at 100/s, burst 100: 1.5 s.
		{"messages", quota.Limits{MessagesRate: 100}, 250, 10, 1500 * time.Millisecond},
		// 100 packets of 210 bytes (payload 200, topic 1, header and
		// identifier 9) at 7000 B/s, burst 7000: 2 s.
		{"bytes", quota.Limits{BytesRate: 7000}, 100, 200, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, ql := startQuotaGateway(t, quota.Config{Default: tc.limits})
			nc, rd, _ := connectCode(t, g, packet.V5, "t-1")
			began := time.Now()
			publishAll(t, nc, rd, tc.n, tc.size, 4*tc.atLeast+10*time.Second)
			took := time.Since(began)
			checkPublished(t, ql, tc.n)
			if took < tc.atLeast*8/10 {
				t.Fatalf("%d messages took %v, want at least %v at the rate", tc.n, took, tc.atLeast)
			}
			if took > 3*tc.atLeast+5*time.Second {
				t.Fatalf("%d messages took %v, far beyond %v at the rate", tc.n, took, tc.atLeast)
			}
			if s := tenantStats(g, "t"); s.Throttles == 0 || s.Throttled < tc.atLeast/2 {
				t.Fatalf("tenant t: %+v, want throttles counted", s)
			}
		})
	}
}

// TestThrottleKeepsKeepAlive: a client whose PUBLISH waits for its
// tenant's byte rate longer than its keep alive allows is not closed for
// keep alive (0x8D): its PINGREQ, sent behind the PUBLISH, is answered,
// and the message is written. The PUBLISH is larger than the read buffer,
// so its body is still in the socket when the wait ends, after the read
// deadline set before it.
func TestThrottleKeepsKeepAlive(t *testing.T) {
	g, ql := startQuotaGateway(t, quota.Config{Default: quota.Limits{BytesRate: 1000}})
	nc, rd, ca := connectAck(t, g, "t-1", 1) // keep alive 1 s: closed 1.5 s after the last packet
	if ca.Code != 0 {
		t.Fatalf("CONNACK 0x%02x", ca.Code)
	}
	// 3000 bytes at 1000 B/s with a burst of 1000: a 2 s wait.
	p := &packet.Publish{QoS: 1, PacketID: 1, Topic: []byte("r"), Payload: bytes.Repeat([]byte{'x'}, 2990)}
	began := time.Now()
	write(t, nc, p)
	write(t, nc, &packet.Pingreq{})
	var acked, ponged bool
	for !acked || !ponged {
		switch q := read(t, nc, rd, 10*time.Second).(type) {
		case *packet.Ack:
			acked = q.Kind == packet.PUBACK && q.Code == 0
		case *packet.Pingresp:
			ponged = true
		case *packet.Disconnect:
			t.Fatalf("DISCONNECT 0x%02x after %v, want the PUBACK and the PINGRESP", byte(q.Code), time.Since(began))
		default:
			t.Fatalf("got %v", q.Type())
		}
	}
	if took := time.Since(began); took < 1600*time.Millisecond {
		t.Fatalf("answered after %v, want the 2 s wait of the byte rate", took)
	}
	if pubs, _ := ql.published(); len(pubs) != 1 {
		t.Fatalf("%d messages written, want 1", len(pubs))
	}
	// Still connected: it keeps pinging.
	write(t, nc, &packet.Pingreq{})
	if q := read(t, nc, rd, 5*time.Second); q.Type() != packet.PINGRESP {
		t.Fatalf("got %v, want PINGRESP", q.Type())
	}
}

// TestThrottleInterruptedByClose: a reader waiting for its tenant's rate
// stops waiting when the gateway closes the connection (a takeover, a
// shutdown): the connection ends at once, not when the wait would.
func TestThrottleInterruptedByClose(t *testing.T) {
	g, _ := startQuotaGateway(t, quota.Config{Default: quota.Limits{MessagesRate: 0.05, MaxConnections: 5}}) // 20 s a message
	nc, rd, _ := connectCode(t, g, packet.V5, "t-1")
	write(t, nc, &packet.Publish{Topic: []byte("r"), Payload: []byte("1")})
	write(t, nc, &packet.Publish{Topic: []byte("r"), Payload: []byte("2")}) // waits 20 s
	eventually.True(t, gatewayWait, "the reader waiting", func() bool { return tenantStats(g, "t").Throttles == 1 })
	c := connOf(t, g, "t-1")
	began := time.Now()
	c.kick(packet.CodeSessionTakenOver)
	if d, ok := read(t, nc, rd, 5*time.Second).(*packet.Disconnect); !ok || d.Code != packet.CodeSessionTakenOver {
		t.Fatalf("got %+v, want DISCONNECT 0x8E", d)
	}
	eventually.True(t, 3*time.Second-time.Since(began), "the connection to end within 3 s of its close (else its reader still waits for the rate)", func() bool {
		g.mu.RLock()
		_, registered := g.byID[c.id]
		g.mu.RUnlock()
		return !registered && tenantStats(g, "t").Connections == 0
	})
}

// TestThrottleAllocations: charging a PUBLISH to the tenant's rates, from
// its fixed header in the read buffer, allocates nothing.
func TestThrottleAllocations(t *testing.T) {
	g := &Gateway{clock: time.Now}
	pub := (&packet.Publish{Topic: []byte("a/b"), Payload: []byte("hello")}).Append(nil, packet.V5)
	c := &conn{g: g}
	c.rd.Init(bytes.NewReader(pub), readBufferSize)
	tn := quota.New(quota.Config{Default: quota.Limits{MessagesRate: 1e9, BytesRate: 1e12}}, nil).Tenant("t")
	c.q = &connQuota{t: tn, wake: make(chan struct{}, 1)}
	if n := testing.AllocsPerRun(1000, func() {
		c.readQuota() // the previous one was read
		if c.throttle() {
			t.Fatal("throttled within the rate")
		}
	}); n != 0 {
		t.Fatalf("the check of a PUBLISH allocates %v times", n)
	}
	if !c.q.paid {
		t.Fatal("the PUBLISH was not charged")
	}
}
