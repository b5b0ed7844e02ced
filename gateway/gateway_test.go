package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
	"github.com/shoal-mqtt/shoal/internal/tracectx"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// fakeLog stands in for Kafka in tests about the gateway's own ordering:
// it answers every Connect at once and holds every asynchronous produce
// until the test completes it.
type fakeLog struct {
	mu       sync.Mutex
	held     []heldProduce
	slot     chan kafka.Batch
	produced chan struct{}
	// replayed makes every answer follow a stale one with the same
	// request id for another run's connection, as a session service
	// replaying the log after a crash writes.
	replayed bool
	// disconnectDelay makes every Disconnect record take that long to
	// write; disconnects counts those written.
	disconnectDelay time.Duration
	disconnects     atomic.Int64
	// answer, when set, changes every answer before it is sent.
	answer func(*eventspb.ConnectResult)
	// cut makes Reachable fail: no broker answers (kafkawatch.go).
	cut atomic.Bool
}

type heldProduce struct {
	rec  *kafka.Record
	done func(*kafka.Record, error)
}

func newFakeLog() *fakeLog {
	return &fakeLog{slot: make(chan kafka.Batch, 100), produced: make(chan struct{}, 1000)}
}

func (f *fakeLog) Partitions(string) int32 { return 4 }

func (f *fakeLog) Reachable(context.Context) error {
	if f.cut.Load() {
		return errors.New("no broker answered (the test cut the log off)")
	}
	return nil
}

func (f *fakeLog) Catalogue() kafka.Catalogue { return kafka.DefaultCatalogue() }

func (f *fakeLog) Produce(_ context.Context, r *kafka.Record, done func(*kafka.Record, error)) {
	f.mu.Lock()
	f.held = append(f.held, heldProduce{r, done})
	f.mu.Unlock()
	f.produced <- struct{}{}
}

func (f *fakeLog) ProduceSync(_ context.Context, rs ...*kafka.Record) error {
	for _, r := range rs {
		var env eventspb.Envelope
		if err := kafka.DecodeEnvelope(r, &env); err != nil {
			return err
		}
		if env.GetDisconnect() != nil {
			time.Sleep(f.disconnectDelay) // a slow write (on the bubble's clock in TestShutdownReportsEveryEnd)
			f.disconnects.Add(1)
		}
		if c := env.GetConnect(); c != nil {
			if f.replayed {
				stale := &eventspb.Envelope{Event: &eventspb.Envelope_ConnectResult{ConnectResult: &eventspb.ConnectResult{
					RequestId: c.RequestId, Connection: c.Route.Connection ^ 1<<40, Generation: 7, SessionPresent: true,
				}}}
				f.slot <- kafka.Batch{Records: []*kafka.Record{kafka.NewRecord(kafka.TopicDeliveries, nil, 0, stale)}}
			}
			cr := &eventspb.ConnectResult{RequestId: c.RequestId, Connection: c.Route.Connection, Generation: 1}
			if f.answer != nil {
				f.answer(cr)
			}
			res := &eventspb.Envelope{Event: &eventspb.Envelope_ConnectResult{ConnectResult: cr}}
			f.slot <- kafka.Batch{Records: []*kafka.Record{kafka.NewRecord(kafka.TopicDeliveries, nil, 0, res)}}
		}
	}
	return nil
}

func (f *fakeLog) Consume(ctx context.Context, _ kafka.ConsumeConfig, handle func(context.Context, kafka.Batch) error) error {
	// The first batch positions the consumer (the gateway's marker).
	if err := handle(ctx, kafka.Batch{}); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case b := <-f.slot:
			if err := handle(ctx, b); err != nil {
				return err
			}
		}
	}
}

// heldEnvelope returns the i-th held produce's record and its decoded
// envelope.
func (f *fakeLog) heldEnvelope(t *testing.T, i int) (*kafka.Record, *eventspb.Envelope) {
	t.Helper()
	f.mu.Lock()
	rec := f.held[i].rec
	f.mu.Unlock()
	env := &eventspb.Envelope{}
	if err := kafka.DecodeEnvelope(rec, env); err != nil {
		t.Fatal(err)
	}
	return rec, env
}

// complete finishes the i-th held produce.
func (f *fakeLog) complete(i int, err error) {
	f.mu.Lock()
	h := f.held[i]
	f.mu.Unlock()
	h.done(h.rec, err)
}

func (f *fakeLog) waitProduced(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-f.produced:
		case <-time.After(5 * time.Second):
			t.Fatal("record not produced")
		}
	}
}

// startGateway runs a gateway on fl until the test ends, and requires Run
// to return nil then.
func startGateway(t testing.TB, fl *fakeLog, opts ...func(*Config)) *Gateway {
	t.Helper()
	g, stop := runGateway(t, fl, opts...)
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	return g
}

// runGateway starts a gateway on fl and waits until it is ready; stop
// ends Run and returns its result (failing the test if Run takes more
// than 10 s to return).
func runGateway(t testing.TB, fl *fakeLog, opts ...func(*Config)) (g *Gateway, stop func() error) {
	t.Helper()
	return runGatewayWith(t, fl, nil, opts...)
}

// runGatewayWith is runGateway with setup, when not nil, called on the
// gateway before it runs (to set test hooks).
func runGatewayWith(t testing.TB, fl *fakeLog, setup func(*Gateway), opts ...func(*Config)) (g *Gateway, stop func() error) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.MQTTListen, cfg.WSListen, cfg.SysInterval = "127.0.0.1:0", "", 0
	for _, o := range opts {
		o(&cfg)
	}
	g, err := New(cfg, fl, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, "dev")
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(g)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	stop = func() error {
		cancel()
		select {
		case err := <-done:
			done <- err // a second stop returns the same
			return err
		case <-time.After(10 * time.Second):
			t.Error("Run did not return within 10 s of its context's end")
			return nil
		}
	}
	ready := false
	defer func() {
		if !ready {
			_ = stop() // the test fails: end Run first
		}
	}()
	eventually.True(t, gatewayWait, "the gateway to be ready", g.Ready)
	ready = true
	return g, stop
}

// connectAck opens a 5.0 connection with client id id (tenant "t") and
// returns it with its CONNACK.
func connectAck(t *testing.T, g *Gateway, id string, keepAlive uint16) (net.Conn, *packet.Reader, *packet.Connack) {
	t.Helper()
	return connectWith(t, g, &packet.Connect{Version: packet.V5, ClientID: []byte(id), CleanStart: true, KeepAlive: keepAlive})
}

// connectWith opens a connection that sends cp (in cp.Version) and returns
// it with its CONNACK.
func connectWith(t *testing.T, g *Gateway, cp *packet.Connect) (net.Conn, *packet.Reader, *packet.Connack) {
	t.Helper()
	nc, err := net.Dial("tcp", g.Addr("mqtt").String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	rd := packet.NewReader(nc, 256)
	write(t, nc, cp)
	ca, ok := read(t, nc, rd, 5*time.Second).(*packet.Connack)
	if !ok {
		t.Fatal("want CONNACK")
	}
	return nc, rd, ca
}

// connectAs is connectAck without the CONNACK.
func connectAs(t *testing.T, g *Gateway, id string, keepAlive uint16) (net.Conn, *packet.Reader) {
	t.Helper()
	nc, rd, _ := connectAck(t, g, id, keepAlive)
	return nc, rd
}

// dial connects as t-1.
// gatewayWait bounds what the gateway's tests wait for (eventually).
const gatewayWait = 5 * time.Second

func dial(t *testing.T, g *Gateway) (net.Conn, *packet.Reader) {
	t.Helper()
	return connectAs(t, g, "t-1", 0)
}

func write(t *testing.T, nc net.Conn, p packet.Packet) {
	t.Helper()
	if _, err := nc.Write(p.Append(nil, packet.V5)); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, nc net.Conn, rd *packet.Reader, d time.Duration) packet.Packet {
	t.Helper()
	_ = nc.SetReadDeadline(time.Now().Add(d))
	h, body, err := rd.ReadPacket()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	p, err := packet.Decode(h, body, packet.V5)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func expectSilence(t *testing.T, nc net.Conn, rd *packet.Reader, d time.Duration) {
	t.Helper()
	_ = nc.SetReadDeadline(time.Now().Add(d))
	if h, _, err := rd.ReadPacket(); err == nil {
		t.Fatalf("unexpected %v", h.Type)
	} else {
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("read: %v", err)
		}
	}
}

// TestAckOnlyAfterLogWrite: a QoS 1 PUBACK and a QoS 2 PUBREC leave only
// once the log has the message, and in the order the PUBLISHes came even
// when the writes complete out of order.
func TestAckOnlyAfterLogWrite(t *testing.T) {
	fl := newFakeLog()
	g := startGateway(t, fl)
	nc, rd := dial(t, g)
	write(t, nc, &packet.Publish{QoS: 1, PacketID: 7, Topic: []byte("a"), Payload: []byte("1")})
	write(t, nc, &packet.Publish{QoS: 2, PacketID: 8, Topic: []byte("b"), Payload: []byte("2")})
	fl.waitProduced(t, 2)
	expectSilence(t, nc, rd, 200*time.Millisecond)

	fl.complete(1, nil) // the second write completes first
	expectSilence(t, nc, rd, 200*time.Millisecond)
	fl.complete(0, nil)
	a := readAck(t, nc, rd)
	if a.Kind != packet.PUBACK || a.PacketID != 7 {
		t.Fatalf("first ack %v %d, want PUBACK 7", a.Kind, a.PacketID)
	}
	a = readAck(t, nc, rd)
	if a.Kind != packet.PUBREC || a.PacketID != 8 {
		t.Fatalf("second ack %v %d, want PUBREC 8", a.Kind, a.PacketID)
	}
	// A retransmitted QoS 2 PUBLISH is acknowledged, not written again.
	write(t, nc, &packet.Publish{QoS: 2, PacketID: 8, Dup: true, Topic: []byte("b"), Payload: []byte("2")})
	if a := readAck(t, nc, rd); a.Kind != packet.PUBREC || a.PacketID != 8 {
		t.Fatalf("retransmission: %v %d, want PUBREC 8", a.Kind, a.PacketID)
	}
	write(t, nc, &packet.Ack{Kind: packet.PUBREL, PacketID: 8})
	if a := readAck(t, nc, rd); a.Kind != packet.PUBCOMP || a.PacketID != 8 || a.Code != 0 {
		t.Fatalf("PUBREL answered %v %d %v, want PUBCOMP 8", a.Kind, a.PacketID, a.Code)
	}
	fl.mu.Lock()
	n := len(fl.held)
	fl.mu.Unlock()
	if n != 2 {
		t.Fatalf("%d records produced, want 2 (the retransmission is not published again)", n)
	}
}

// TestStaleConnectResultIgnored: request ids start again with every run,
// so a session service replaying the log (after a crash lost its stored
// offsets) answers an old run's Connect with a request id a new
// connection is waiting on. Only the answer for the waiting connection
// counts.
func TestStaleConnectResultIgnored(t *testing.T) {
	fl := newFakeLog()
	fl.replayed = true
	g := startGateway(t, fl)
	_, _, ca := connectAck(t, g, "t-1", 0)
	if ca.SessionPresent || ca.Code != 0 {
		t.Fatalf("CONNACK session present %v code %v: the stale answer was taken", ca.SessionPresent, ca.Code)
	}
	// The connection is registered with the generation of its own answer.
	if c := connOf(t, g, "t-1"); c.generation != 1 {
		t.Fatalf("registered with generation %d, want 1 (the stale answer's is 7)", c.generation)
	}
}

// TestShutdownReportsEveryEnd: Run returns only after every connection's
// Disconnect record is written, so that the process does not close its
// log client under them (the session service would learn of the ends
// only from the next run's heartbeat).
// It runs in a synctest bubble, the clients over net.Pipe: the slow
// writes take their time on the bubble's clock.
func TestShutdownReportsEveryEnd(t *testing.T) { synctest.Test(t, testShutdownReportsEveryEnd) }

func testShutdownReportsEveryEnd(t *testing.T) {
	fl := newFakeLog()
	fl.disconnectDelay = 200 * time.Millisecond
	g, stop := runGatewayWith(t, fl, forBubble)
	const n = 5
	for i := range n {
		nc, _ := connectPipe(t, g, fmt.Sprintf("t-%d", i), 0)
		go func() { _, _ = io.Copy(io.Discard, nc) }() // the shutdown's DISCONNECT
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := fl.disconnects.Load(); got != n {
		t.Fatalf("%d Disconnect records written when Run returned, want %d", got, n)
	}
}

// TestFailedLogWriteClosesWithoutAck: when the log refuses a message the
// client gets no acknowledgement and the connection closes, so the client
// sends it again on its next connection.
func TestFailedLogWriteClosesWithoutAck(t *testing.T) {
	fl := newFakeLog()
	g := startGateway(t, fl)
	nc, rd := dial(t, g)
	write(t, nc, &packet.Publish{QoS: 1, PacketID: 1, Topic: []byte("a"), Payload: []byte("x")})
	fl.waitProduced(t, 1)
	fl.complete(0, errors.New("log unavailable"))
	_ = nc.SetReadDeadline(time.Now().Add(2 * time.Second))
	for {
		h, _, err := rd.ReadPacket()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("connection still open after a failed log write")
			}
			return // closed
		}
		if h.Type == packet.PUBACK {
			t.Fatal("PUBACK for a message the log did not take")
		}
	}
}

// TestFailedLogWriteDisconnectsV5: a 5.0 client whose message the log
// refused is told why before the close: DISCONNECT 0x95 (packet too large)
// when the log refused the record as too large, 0x80 for any other failure.
func TestFailedLogWriteDisconnectsV5(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want packet.ReasonCode
	}{
		{errors.New("log unavailable"), packet.CodeUnspecifiedError},
		{fmt.Errorf("produce: %w", kafka.ErrTooLarge), packet.CodePacketTooLarge},
	} {
		fl := newFakeLog()
		g := startGateway(t, fl)
		nc, rd, _ := connectWith(t, g, &packet.Connect{Version: packet.V5, ClientID: []byte("t-big"), CleanStart: true})
		write(t, nc, &packet.Publish{QoS: 1, PacketID: 1, Topic: []byte("a"), Payload: []byte("x")})
		fl.waitProduced(t, 1)
		fl.complete(0, tc.err)
		expectDisconnect(t, nc, rd, tc.want)
	}
}

func TestTenant(t *testing.T) {
	for _, c := range []struct{ id, sep, want string }{
		{"acme-dev1", "-", "acme"},
		{"acme-dev-1", "-", "acme"},
		{"nodash", "-", ""},
		{"-lead", "-", ""},
		{"a::b", "::", "a"},
		{"acme-dev1", "", ""},
	} {
		if got := Tenant(c.id, c.sep); got != c.want {
			t.Errorf("Tenant(%q, %q) = %q, want %q", c.id, c.sep, got, c.want)
		}
	}
}

func TestConfigValidateNamesKeys(t *testing.T) {
	c := DefaultConfig()
	c.ReceiveMaximum = 0
	c.MaxPacketSize = 1
	c.ExpressLinger = -time.Millisecond
	err := c.Validate()
	for _, key := range []string{"gateway.receive_maximum", "gateway.max_packet_size", "gateway.express_linger"} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("Validate() = %v, want %s named", err, key)
		}
	}
}

func readAck(t *testing.T, nc net.Conn, rd *packet.Reader) *packet.Ack {
	t.Helper()
	p := read(t, nc, rd, time.Second)
	a, ok := p.(*packet.Ack)
	if !ok {
		t.Fatalf("got %v, want an acknowledgement", p.Type())
	}
	return a
}

// TestPublishStartsTrace: every Publish record carries a traceparent; a
// client's own (MQTT 5.0 user property "traceparent") is continued.
func TestPublishStartsTrace(t *testing.T) {
	fl := newFakeLog()
	g := startGateway(t, fl)
	nc, _ := dial(t, g)
	const client = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	write(t, nc, &packet.Publish{QoS: 1, PacketID: 1, Topic: []byte("a"), Payload: []byte("1")})
	p := &packet.Publish{QoS: 1, PacketID: 2, Topic: []byte("b"), Payload: []byte("2")}
	p.Props.User = []packet.UserProperty{{Key: []byte("traceparent"), Value: []byte(client)}}
	write(t, nc, p)
	fl.waitProduced(t, 2)
	fl.mu.Lock()
	recs := []*kafka.Record{fl.held[0].rec, fl.held[1].rec}
	fl.mu.Unlock()
	own := kafka.Traceparent(recs[0])
	if !tracectx.Valid([]byte(own)) || tracectx.TraceID([]byte(own)) == tracectx.TraceID([]byte(client)) {
		t.Fatalf("first publish traceparent %q, want a new trace", own)
	}
	cont := kafka.Traceparent(recs[1])
	if tracectx.TraceID([]byte(cont)) != tracectx.TraceID([]byte(client)) || cont == client {
		t.Fatalf("second publish traceparent %q, want a child of the client's %q", cont, client)
	}
	// The writes complete, or the connection's end would wait for them
	// (up to the session timeout) when the gateway stops.
	fl.complete(0, nil)
	fl.complete(1, nil)
}

// TestRepeatedInboxForwardDropped: the session service may forward an
// inbox entry twice (it re-applies records after a restart); the
// connection sends it once.
func TestRepeatedInboxForwardDropped(t *testing.T) {
	fl := newFakeLog()
	g := startGateway(t, fl)
	nc, rd := dial(t, g)
	c := connOf(t, g, "t-1")
	fwd := func(seq uint64, id uint32, payload string) kafka.Batch {
		env := &eventspb.Envelope{Tenant: "t", ClientId: "t-1", Event: &eventspb.Envelope_Delivery{Delivery: &eventspb.Delivery{
			Message: &eventspb.Message{Topic: "a", Payload: []byte(payload), Qos: 1},
			Targets: []*eventspb.Target{{ClientId: "t-1", Connection: c.id, Qos: 1, PacketId: id, InboxSeq: seq}},
		}}}
		return kafka.Batch{Records: []*kafka.Record{kafka.NewRecord(kafka.TopicDeliveries, nil, 0, env)}}
	}
	fl.slot <- fwd(1, 5, "one")
	fl.slot <- fwd(1, 5, "one again")
	fl.slot <- fwd(2, 6, "two")
	for _, want := range []struct {
		id      uint16
		payload string
	}{{5, "one"}, {6, "two"}} {
		p, ok := read(t, nc, rd, 5*time.Second).(*packet.Publish)
		if !ok || p.PacketID != want.id || string(p.Payload) != want.payload {
			t.Fatalf("got %+v, want PUBLISH %d %q", p, want.id, want.payload)
		}
	}
	expectSilence(t, nc, rd, 200*time.Millisecond)
}

// connOf returns the registered connection of client id of tenant "t".
func connOf(t *testing.T, g *Gateway, id string) *conn {
	t.Helper()
	g.mu.RLock()
	c := g.clients[clientKey("t", id)]
	g.mu.RUnlock()
	if c == nil {
		t.Fatalf("%s not registered", id)
	}
	return c
}
