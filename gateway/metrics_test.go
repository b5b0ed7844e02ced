package gateway

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
	"github.com/shoal-mqtt/shoal/internal/testutil/testmetrics"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// startMeasured runs a gateway on fl that reports to the returned reader,
// with its clock skew ahead of the real one (a test moves it to make a
// latency), and setup, when not nil, called before it runs.
func startMeasured(t *testing.T, fl *fakeLog, skew *atomic.Int64, setup func(*Gateway)) (*Gateway, *testmetrics.Reader) {
	t.Helper()
	p, r := testmetrics.New(t, 10)
	g, stop := runGatewayWith(t, fl, func(g *Gateway) {
		g.clock = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
		g.useTelemetry(p)
		if setup != nil {
			setup(g)
		}
	})
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	return g, r
}

// TestPubackLatency: a QoS 1 PUBLISH's latency runs from its read to its
// PUBACK, the log write included; QoS 0 and refused publishes are not
// measured.
func TestPubackLatency(t *testing.T) {
	fl := newFakeLog()
	var skew atomic.Int64
	g, r := startMeasured(t, fl, &skew, nil)
	nc, rd := dial(t, g)
	write(t, nc, &packet.Publish{QoS: 0, Topic: []byte("a"), Payload: []byte("0")})
	write(t, nc, &packet.Publish{QoS: 1, PacketID: 7, Topic: []byte("a"), Payload: []byte("1")})
	fl.waitProduced(t, 2)
	skew.Store(int64(2 * time.Second)) // the log takes "two seconds"
	fl.complete(0, nil)
	fl.complete(1, nil)
	if a := readAck(t, nc, rd); a.Kind != packet.PUBACK || a.PacketID != 7 {
		t.Fatalf("got %v %d, want PUBACK 7", a.Kind, a.PacketID)
	}
	// Refused (a reserved topic): answered at once, not measured.
	write(t, nc, &packet.Publish{QoS: 1, PacketID: 8, Topic: []byte("$SYS/x"), Payload: []byte("1")})
	if a := readAck(t, nc, rd); a.PacketID != 8 || a.Code != packet.CodeNotAuthorized {
		t.Fatalf("got %v %d %v, want PUBACK 8 not authorized", a.Kind, a.PacketID, a.Code)
	}
	p, ok := r.Find("shoal.gateway.puback.duration")
	if !ok || p.Count != 1 {
		t.Fatalf("puback duration %+v, want 1 sample", p)
	}
	if p.Value < 2 || p.Value > 3 {
		t.Errorf("puback duration %.3fs, want 2s and a little", p.Value)
	}
}

// TestDeliveryLatency: a delivery that carries its publish time is
// measured once per subscriber it reaches, from that time; one without
// (a retained message, an inbox kept while offline) is not.
func TestDeliveryLatency(t *testing.T) {
	fl := newFakeLog()
	var skew atomic.Int64
	g, r := startMeasured(t, fl, &skew, nil)
	nc, rd := dial(t, g)
	c := connOf(t, g, "t-1")
	deliver := func(qos uint32, publishedUs int64) {
		env := &eventspb.Envelope{Tenant: "t", Event: &eventspb.Envelope_Delivery{Delivery: &eventspb.Delivery{
			Message:     &eventspb.Message{Topic: "a", Payload: []byte("x"), Qos: qos},
			Targets:     []*eventspb.Target{{ClientId: "t-1", Connection: c.id, Qos: qos}},
			PublishedUs: publishedUs,
		}}}
		fl.slot <- kafka.Batch{Records: []*kafka.Record{kafka.NewRecord(kafka.TopicDeliveries, nil, 0, env)}}
		if _, ok := read(t, nc, rd, 5*time.Second).(*packet.Publish); !ok {
			t.Fatal("want PUBLISH")
		}
	}
	published := time.Now().Add(-1500 * time.Millisecond).UnixMicro()
	deliver(0, published)
	deliver(1, published)
	deliver(0, 0) // no publish time: not measured
	p, ok := r.Find("shoal.delivery.latency")
	if !ok || p.Count != 2 {
		t.Fatalf("delivery latency %+v, want 2 samples", p)
	}
	if p.Value < 3 || p.Value > 4 {
		t.Errorf("delivery latency sum %.3fs, want 2 × 1.5s and a little", p.Value)
	}
}

// failingPasswords refuses every user name and password.
type failingPasswords struct{}

func (failingPasswords) Authenticate(string, []byte) error { return errors.New("no") }

// TestConnectsByReason: every CONNACK counts once, by result and reason,
// with the client's tenant once the handshake knows it (not for bad
// credentials: an unauthenticated claim gets no label).
func TestConnectsByReason(t *testing.T) {
	fl := newFakeLog()
	var refuseQuota atomic.Bool
	fl.answer = func(cr *eventspb.ConnectResult) {
		if refuseQuota.Load() {
			cr.ReasonCode = uint32(packet.CodeQuotaExceeded)
		}
	}
	var skew atomic.Int64
	g, r := startMeasured(t, fl, &skew, func(g *Gateway) {
		WithAuth(Auth{Passwords: failingPasswords{}, AllowAnonymous: true})(g)
	})
	connect := func(cp *packet.Connect) packet.ReasonCode {
		t.Helper()
		nc, err := net.Dial("tcp", g.Addr("mqtt").String())
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = nc.Close() }()
		cp.Version, cp.CleanStart = packet.V5, true
		write(t, nc, cp)
		ca, ok := read(t, nc, packet.NewReader(nc, 256), 5*time.Second).(*packet.Connack)
		if !ok {
			t.Fatal("want CONNACK")
		}
		return ca.Code
	}
	for range 2 {
		if code := connect(&packet.Connect{ClientID: []byte("t-1")}); code != 0 {
			t.Fatalf("anonymous CONNACK %v", code)
		}
	}
	if code := connect(&packet.Connect{ClientID: []byte("t-2"), UsernameFlag: true, Username: []byte("t-u"),
		PasswordFlag: true, Password: []byte("p")}); code != packet.CodeBadUserNameOrPassword {
		t.Fatalf("bad password CONNACK %v", code)
	}
	refuseQuota.Store(true)
	if code := connect(&packet.Connect{ClientID: []byte("u-1")}); code != packet.CodeQuotaExceeded {
		t.Fatalf("refused CONNACK %v", code)
	}
	for _, want := range []struct {
		kv []string
		n  float64
	}{
		{[]string{"result", "accepted", "reason", "success", "tenant", "t"}, 2},
		{[]string{"result", "refused", "reason", "bad_username_or_password"}, 1},
		{[]string{"result", "refused", "reason", "quota_exceeded", "tenant", "u"}, 1},
	} {
		if got := r.Value("shoal.gateway.connects", want.kv...); got != want.n {
			t.Errorf("connects %v = %v, want %v (all: %+v)", want.kv, got, want.n, r.Points("shoal.gateway.connects"))
		}
	}
}

// TestDroppedByCause: a message above the client's maximum packet size
// is dropped, counted in Stats (the legacy counter) and by its cause.
func TestDroppedByCause(t *testing.T) {
	fl := newFakeLog()
	var skew atomic.Int64
	g, r := startMeasured(t, fl, &skew, nil)
	cp := &packet.Connect{Version: packet.V5, ClientID: []byte("t-1"), CleanStart: true}
	cp.Props.MaxPacketSize = 64
	cp.Props.Set(packet.PropMaxPacketSize)
	_, _, ca := connectWith(t, g, cp)
	if ca.Code != 0 {
		t.Fatalf("CONNACK %+v", ca)
	}
	c := connOf(t, g, "t-1")
	env := &eventspb.Envelope{Tenant: "t", Event: &eventspb.Envelope_Delivery{Delivery: &eventspb.Delivery{
		Message: &eventspb.Message{Topic: "a", Payload: make([]byte, 100)},
		Targets: []*eventspb.Target{{ClientId: "t-1", Connection: c.id}},
	}}}
	fl.slot <- kafka.Batch{Records: []*kafka.Record{kafka.NewRecord(kafka.TopicDeliveries, nil, 0, env)}}
	eventually.True(t, gatewayWait, "the drop", func() bool { return g.Stats.Load(Dropped) == 1 })
	if got := r.Value("shoal.messages.dropped", "cause", "packet_too_large"); got != 1 {
		t.Errorf("dropped{cause=packet_too_large} = %v, want 1 (all: %+v)", got, r.Points("shoal.messages.dropped"))
	}
}

// TestMetricsAllocations is the allocation budget of the gateway's
// recording paths: none. A fan-out whose deliveries are measured
// allocates nothing more than before (nothing, for one subscriber).
func TestMetricsAllocations(t *testing.T) {
	p, r := testmetrics.New(t, 10)
	m, err := newGatewayMetrics(p)
	if err != nil {
		t.Fatal(err)
	}
	ack := &pendingAck{kind: packet.PUBACK, received: time.Now().UnixNano()}
	ctx := context.Background()
	now, published := time.Now(), time.Now().Add(-time.Millisecond).UnixMicro()
	c := &conn{tenant: "t", clientsKey: clientKey("t", "t-1")}
	m.connected(c, packet.CodeSuccess) // makes the series' options
	for name, f := range map[string]func(){
		"acked":     func() { m.acked(ack, time.Now) },
		"delivered": func() { m.delivered(ctx, now, published) },
		"connected": func() { m.connected(c, packet.CodeSuccess) },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocations, want 0", name, n)
		}
	}

	const rounds = 50
	f := newFanOut(t, 1, 0, packet.V5)
	fp, fr := testmetrics.New(t, 10)
	f.g.useTelemetry(fp)
	f.setPublished(t, time.Now().UnixMicro())
	if n := testing.AllocsPerRun(rounds-1, f.round); n != 0 { // rounds rounds, with its warm-up
		t.Errorf("a measured fan-out to one subscriber: %v allocations, want 0", n)
	}
	f.waitWritten(t, rounds)
	if got := fr.Count("shoal.delivery.latency"); got != rounds {
		t.Errorf("%d delivery latency samples, want %d", got, rounds)
	}
	// AllocsPerRun runs each function once more than asked.
	if n := r.Count("shoal.gateway.puback.duration"); n != 101 {
		t.Errorf("%d PUBACK samples, want 101", n)
	}
	if n := r.Count("shoal.delivery.latency"); n != 101 {
		t.Errorf("%d delivery samples, want 101", n)
	}
	if n := r.Value("shoal.gateway.connects", "result", "accepted", "reason", "success", "tenant", "t"); n != 102 {
		t.Errorf("%v connects, want 102", n)
	}
}

// setPublished makes the fan-out's delivery carry publishedUs.
func (f *fanOut) setPublished(t *testing.T, publishedUs int64) {
	t.Helper()
	rec := f.batch.Records[0]
	var env eventspb.Envelope
	if err := kafka.DecodeEnvelope(rec, &env); err != nil {
		t.Fatal(err)
	}
	env.GetDelivery().PublishedUs = publishedUs
	rec = kafka.NewRecord(kafka.TopicDeliveries, nil, 0, &env)
	var enc [8]byte
	binary.PutUvarint(enc[:], f.offset)
	if f.offsetAt = bytes.Index(rec.Value, enc[:]); f.offsetAt < 0 {
		t.Fatal("source offset not found in the record")
	}
	f.batch.Records[0] = rec
}
