package gateway

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// answerConnects stands in for the session service: it accepts every
// Connect on shoal.sessions with a ConnectResult to the requester's slot,
// until the test ends.
func answerConnects(t *testing.T, kl *kafka.Client) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	parts := make([]int32, kl.Partitions(kafka.TopicSessions))
	for i := range parts {
		parts[i] = int32(i)
	}
	go func() {
		defer close(done)
		_ = kl.Consume(ctx, kafka.ConsumeConfig{Topic: kafka.TopicSessions, Partitions: parts}, func(ctx context.Context, b kafka.Batch) error {
			for _, r := range b.Records {
				var env eventspb.Envelope
				if err := kafka.DecodeEnvelope(r, &env); err != nil || env.GetConnect() == nil {
					continue
				}
				c := env.GetConnect()
				res := kafka.NewRecord(kafka.TopicDeliveries, nil, c.GetRoute().GetSlot(), &eventspb.Envelope{
					Tenant: env.Tenant, ClientId: env.ClientId,
					Event: &eventspb.Envelope_ConnectResult{ConnectResult: &eventspb.ConnectResult{
						RequestId: c.GetRequestId(), Connection: c.GetRoute().GetConnection(), Generation: 1,
					}},
				})
				if err := kl.ProduceSync(ctx, res); err != nil && ctx.Err() == nil {
					t.Errorf("answer connect: %v", err)
				}
			}
			return nil
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// mqttConn is a raw MQTT 5.0 client connection.
type mqttConn struct {
	nc net.Conn
	rd *packet.Reader
	id uint64 // the gateway's connection id
}

// connectTo connects client id "t-<name>" to r's gateway and returns it
// with the connection id the gateway gave it.
func connectTo(t *testing.T, r *gatewayRun, name string) *mqttConn {
	t.Helper()
	nc, rd := r.dial(t)
	write(t, nc, &packet.Connect{Version: packet.V5, ClientID: []byte("t-" + name), CleanStart: true})
	if ca, ok := read(t, nc, rd, testTimeout).(*packet.Connack); !ok || ca.Code != 0 {
		t.Fatalf("connect t-%s: got %+v, want CONNACK 0", name, ca)
	}
	c := connOf(t, r.g, "t-"+name)
	return &mqttConn{nc: nc, rd: rd, id: c.id}
}

// dial opens a TCP connection to r's MQTT listener, closed when the test
// ends, and a reader of it.
func (r *gatewayRun) dial(t *testing.T) (net.Conn, *packet.Reader) {
	t.Helper()
	nc, err := net.Dial("tcp", r.g.Addr("mqtt").String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	return nc, packet.NewReader(nc, 256)
}

// delivery is a QoS 0 delivery of payload on topic "f" to c, on slot.
func delivery(slot int32, name string, c *mqttConn, payload string) *kafka.Record {
	return kafka.NewRecord(kafka.TopicDeliveries, nil, slot, &eventspb.Envelope{
		Tenant: "t", ClientId: "t-" + name,
		Event: &eventspb.Envelope_Delivery{Delivery: &eventspb.Delivery{
			Message: &eventspb.Message{Topic: "f", Payload: []byte(payload)},
			Targets: []*eventspb.Target{{ClientId: "t-" + name, Connection: c.id}},
		}},
	})
}

// marker is the slot marker a run of gateway id with connection base run
// writes to slot.
func marker(slot int32, id string, run uint64) *kafka.Record {
	return kafka.NewRecord(kafka.TopicDeliveries, nil, slot, &eventspb.Envelope{
		Gateway: id,
		Event:   &eventspb.Envelope_GatewayHeartbeat{GatewayHeartbeat: &eventspb.GatewayHeartbeat{Slot: slot, ConnectionBase: run}},
	})
}

// expectPublish reads c's next packet, a PUBLISH of payload.
func (c *mqttConn) expectPublish(t *testing.T, payload string) {
	t.Helper()
	if p, ok := read(t, c.nc, c.rd, testTimeout).(*packet.Publish); !ok || string(p.Payload) != payload {
		t.Fatalf("got %+v, want PUBLISH %q", p, payload)
	}
}

// expectClosedWithoutPublish reads c until the gateway closes it: a
// DISCONNECT is allowed, a PUBLISH is not.
func (c *mqttConn) expectClosedWithoutPublish(t *testing.T) {
	t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(testTimeout))
	for {
		h, body, err := c.rd.ReadPacket()
		if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || (err != nil && strings.Contains(err.Error(), "reset")) {
			return
		}
		if err != nil {
			t.Fatalf("read: %v, want the connection closed", err)
		}
		p, err := packet.Decode(h, body, packet.V5)
		if err != nil {
			t.Fatal(err)
		}
		if pub, ok := p.(*packet.Publish); ok {
			t.Fatalf("a fenced gateway sent PUBLISH %q", pub.Payload)
		}
	}
}

// expectTaken waits for r's Run to end with a SlotTakenError naming the
// gateway id and run base of the marker at offset.
func (r *gatewayRun) expectTaken(t *testing.T, slot int32, id string, run uint64, offset int64) {
	t.Helper()
	select {
	case err := <-r.done:
		var taken *SlotTakenError
		if !errors.As(err, &taken) || !errors.Is(err, ErrSlotTaken) {
			t.Fatalf("Run returned %v, want a SlotTakenError", err)
		}
		want := SlotTakenError{Slot: slot, Gateway: id, Run: run, Offset: offset, Own: r.g.connBase()}
		if *taken != want {
			t.Errorf("Run returned %+v, want %+v", *taken, want)
		}
	case <-time.After(testTimeout):
		t.Fatal("the gateway still runs after another run's marker on its slot")
	}
	if r.g.Ready() {
		t.Error("a fenced gateway still reports ready")
	}
	if nc, err := net.DialTimeout("tcp", r.g.Addr("mqtt").String(), time.Second); err == nil {
		_ = nc.Close()
		t.Error("a fenced gateway still accepts connections")
	}
}

// gatewayOnSlot starts a backbone whose session service answers every
// Connect, gateway gw-a on slot, and client "one" connected to it.
func gatewayOnSlot(t *testing.T, slot int32) (*kafka.Client, *gatewayRun, *mqttConn) {
	t.Helper()
	kl := startBackbone(t)
	answerConnects(t, kl)
	cfg := DefaultConfig()
	cfg.Slot, cfg.ID = slot, "gw-a"
	a := runOnBackbone(t, kl, cfg, nil)
	a.waitReady(t)
	return kl, a, connectTo(t, a, "one")
}

// A gateway that reads another run's marker on its slot stops at once:
// nothing of its slot after the marker reaches its clients, its listener
// and connections close, and Run says who took the slot. The new run works.
func TestSlotMarkerOfAnotherRunFences(t *testing.T) {
	const slot = 2
	kl, a, c1 := gatewayOnSlot(t, slot)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := kl.ProduceSync(ctx, delivery(slot, "one", c1, "before")); err != nil {
		t.Fatal(err)
	}
	c1.expectPublish(t, "before") // the slot consumer works, and its own marker did not stop it

	t.Run("another gateway", func(t *testing.T) {
		cfgB := DefaultConfig()
		cfgB.Slot, cfgB.ID = slot, "gw-b"
		b := runOnBackbone(t, kl, cfgB, nil)
		b.waitReady(t)
		// B's marker is the last record of the slot once B is ready.
		ends, err := kl.EndOffsets(ctx, kafka.TopicDeliveries)
		if err != nil {
			t.Fatal(err)
		}
		if err := kl.ProduceSync(ctx, delivery(slot, "one", c1, "after")); err != nil {
			t.Fatal(err)
		}
		a.expectTaken(t, slot, "gw-b", b.g.connBase(), ends[slot]-1)
		c1.expectClosedWithoutPublish(t)
		// B's heartbeats carry its marker's offset, which orders the runs
		// of the slot for the session service.
		envs := readPartition(t, kl, kafka.TopicSessions, 0, func(envs []*eventspb.Envelope) bool {
			for _, env := range envs {
				if env.GetGatewayHeartbeat().GetConnectionBase() == b.g.connBase() {
					return true
				}
			}
			return false
		})
		for _, env := range envs {
			if hb := env.GetGatewayHeartbeat(); hb.GetConnectionBase() == b.g.connBase() && hb.GetMarkerOffset() != ends[slot]-1 {
				t.Errorf("B's heartbeat carries marker offset %d, want %d", hb.GetMarkerOffset(), ends[slot]-1)
			}
		}

		// The new owner serves the slot.
		c2 := connectTo(t, b, "two")
		if err := kl.ProduceSync(ctx, delivery(slot, "two", c2, "to the new one")); err != nil {
			t.Fatal(err)
		}
		c2.expectPublish(t, "to the new one")
		select {
		case err := <-b.done:
			t.Fatalf("the new run stopped: %v", err)
		default:
		}
	})
}

// The marker of a restarted run of the same gateway id fences too, and
// records after it in the same batch are not handled.
func TestSlotMarkerOfRestartedRunFences(t *testing.T) {
	const slot = 5
	kl, a, c1 := gatewayOnSlot(t, slot)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	other := a.g.connBase() ^ 1<<40
	m := marker(slot, "gw-a", other)
	// One ProduceSync: the marker and the delivery after it travel together.
	if err := kl.ProduceSync(ctx, m, delivery(slot, "one", c1, "after the marker")); err != nil {
		t.Fatal(err)
	}
	a.expectTaken(t, slot, "gw-a", other, m.Offset)
	c1.expectClosedWithoutPublish(t)
}

// fakeClock is a clock a test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// pausingLeaser is a fakeLeaser whose renewal number pauseAt moves the
// clock past the lease (the process was paused while the renewal was in
// flight) and still succeeds.
type pausingLeaser struct {
	fakeLeaser
	clock   *fakeClock
	pauseAt int
	pause   time.Duration
}

func (p *pausingLeaser) RenewSlot(ctx context.Context, slot int32, owner string, ttl time.Duration) error {
	err := p.fakeLeaser.RenewSlot(ctx, slot, owner, ttl)
	if _, renews, _ := p.counts(); renews == p.pauseAt {
		p.clock.advance(p.pause)
	}
	return err
}

// A renewal that succeeds after the lease ran out, by the gateway's own
// clock, loses the slot: another gateway may have held it meanwhile. In a
// synctest bubble: the renewal ticks come on the bubble's clock.
func TestLateRenewalLosesLease(t *testing.T) { synctest.Test(t, testLateRenewalLosesLease) }

func testLateRenewalLosesLease(t *testing.T) {
	clock := &fakeClock{now: time.Now()}
	l := &pausingLeaser{fakeLeaser: fakeLeaser{slot: 1}, clock: clock, pauseAt: 2, pause: 2 * time.Second}
	_, _, done := runLeasedClock(t, l, time.Second, clock.Now)
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "lease lost") {
			t.Fatalf("Run returned %v, want a lost lease", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("a gateway whose renewal came back after its lease ran out still runs")
	}
	if _, renews, released := l.counts(); renews != 2 || released {
		t.Errorf("%d renewals, released %v; want it to stop after the late 2nd, without releasing", renews, released)
	}
}

// A gateway that finds at a renewal tick that its lease already ran out (it
// was paused between two ticks) stops without renewing. In a synctest
// bubble: the renewal ticks come on the bubble's clock, while the
// gateway's own clock jumps.
func TestPauseBetweenRenewalsLosesLease(t *testing.T) {
	synctest.Test(t, testPauseBetweenRenewalsLosesLease)
}

func testPauseBetweenRenewalsLosesLease(t *testing.T) {
	clock := &fakeClock{now: time.Now()}
	l := &fakeLeaser{slot: 1}
	g, _, done := runLeasedClock(t, l, time.Second, clock.Now)
	time.Sleep(time.Second/3 + time.Millisecond) // on the bubble's clock: the first renewal tick
	synctest.Wait()
	if _, renews, _ := l.counts(); renews != 1 {
		t.Fatalf("%d renewals after the first tick, want 1", renews)
	}
	if !g.Ready() {
		t.Fatal("gateway not ready after its first renewal")
	}
	clock.advance(time.Second) // the lease's whole TTL passes between two ticks
	_, before, _ := l.counts()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "lease lost") {
			t.Fatalf("Run returned %v, want a lost lease", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("a gateway paused past its lease still runs")
	}
	if _, renews, _ := l.counts(); renews != before {
		t.Errorf("%d renewals, %d before the pause: want none after it", renews, before)
	}
}
