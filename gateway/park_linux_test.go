//go:build linux

package gateway

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// parkFast makes connections park after 20 ms without a byte.
func parkFast(c *Config) { c.ParkIdle = 20 * time.Millisecond }

// waitParks waits until the gateway has parked connections n times in
// total and n connections are parked now.
func waitParks(t *testing.T, g *Gateway, total, now int64) {
	t.Helper()
	eventually.True(t, gatewayWait, strconv.FormatInt(total, 10)+" parks, "+strconv.FormatInt(now, 10)+" parked", func() bool {
		return g.Parks() >= total && g.Parked() == now
	})
}

// expectEnd reads until the gateway closes the connection and returns the
// reason code of the DISCONNECT it sent before (-1 without one).
func expectEnd(t *testing.T, nc net.Conn, rd *packet.Reader, within time.Duration) int {
	t.Helper()
	code := -1
	_ = nc.SetReadDeadline(time.Now().Add(within))
	for {
		h, body, err := rd.ReadPacket()
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return code
			}
			t.Fatalf("waiting for the gateway to close: %v", err)
		}
		if h.Type == packet.DISCONNECT {
			var d packet.Disconnect
			if err := d.Decode(h, body, packet.V5); err != nil {
				t.Fatal(err)
			}
			code = int(d.Code)
		}
	}
}

// parkedClient starts a gateway (Config changed by opt) on a fake log,
// connects t-1 without keep alive and waits until it is parked.
func parkedClient(t *testing.T, opt func(*Config)) (*fakeLog, *Gateway, net.Conn, *packet.Reader) {
	t.Helper()
	fl := newFakeLog()
	g := startGateway(t, fl, opt)
	nc, rd := connectAs(t, g, "t-1", 0)
	waitParks(t, g, 1, 1)
	return fl, g, nc, rd
}

// waitEnded waits until no connection is established or parked.
func waitEnded(t *testing.T, g *Gateway) {
	t.Helper()
	eventually.True(t, gatewayWait, "the connections to end", func() bool {
		g.mu.RLock()
		n := len(g.clients)
		g.mu.RUnlock()
		return n == 0 && g.Stats.Load(ConnectionsCurrent) == 0 && g.Parked() == 0
	})
}

// TestParkAndWake: an idle connection parks; a packet wakes it and is
// answered; it parks again; writes reach it while it is parked.
func TestParkAndWake(t *testing.T) {
	fl, g, nc, rd := parkedClient(t, parkFast)
	for i := range 3 {
		write(t, nc, &packet.Pingreq{})
		if _, ok := read(t, nc, rd, 2*time.Second).(*packet.Pingresp); !ok {
			t.Fatalf("ping %d: want PINGRESP", i)
		}
		waitParks(t, g, int64(i+2), 1)
	}

	// A QoS 1 PUBLISH to a parked connection is published and acknowledged.
	write(t, nc, &packet.Publish{QoS: 1, PacketID: 3, Topic: []byte("a/b"), Payload: []byte("woken")})
	fl.waitProduced(t, 1)
	fl.complete(0, nil)
	if a := readAck(t, nc, rd); a.Kind != packet.PUBACK || a.PacketID != 3 {
		t.Fatalf("got %v %d, want PUBACK 3", a.Kind, a.PacketID)
	}
	waitParks(t, g, 5, 1)

	// A delivery is written to a parked connection without waking it.
	c := connOf(t, g, "t-1")
	parks := g.Parks()
	fl.slot <- deliveryBatch("t-1", c.id, "to/parked", "hello")
	p, ok := read(t, nc, rd, 2*time.Second).(*packet.Publish)
	if !ok || string(p.Topic) != "to/parked" || string(p.Payload) != "hello" {
		t.Fatalf("got %+v, want the delivery", p)
	}
	if g.Parks() != parks || g.Parked() != 1 {
		t.Fatalf("parks %d → %d, parked %d: a delivery woke the reader", parks, g.Parks(), g.Parked())
	}
}

func deliveryBatch(client string, connection uint64, topic, payload string) kafka.Batch {
	return qosDeliveryBatch(client, connection, topic, payload, 0)
}

func qosDeliveryBatch(client string, connection uint64, topic, payload string, qos uint32) kafka.Batch {
	env := &eventspb.Envelope{Tenant: "t", ClientId: client, Event: &eventspb.Envelope_Delivery{Delivery: &eventspb.Delivery{
		Message: &eventspb.Message{Topic: topic, Payload: []byte(payload), Qos: qos},
		Targets: []*eventspb.Target{{ClientId: client, Connection: connection, Qos: qos}},
	}}}
	return kafka.Batch{Records: []*kafka.Record{kafka.NewRecord(kafka.TopicDeliveries, nil, 0, env)}}
}

// hasFlow reports whether c carries its flow state, and how many
// messages it has in flight. A connection without its flow state holds no
// non-blocking writer either (dropIdleFlow): it fails t otherwise.
func hasFlow(t *testing.T, c *conn) (bool, int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.flow == nil {
		if c.nonBlocking != nil || c.nonBlockingKnown {
			t.Error("a connection without its flow state kept its non-blocking writer")
		}
		return false, 0
	}
	return true, len(c.inflight)
}

// TestParkDropsIdleFlow: a connection parks without its flow state once
// nothing is in flight, keeps it while a QoS 1 message waits for its
// PUBACK, and goes on working after dropping it.
func TestParkDropsIdleFlow(t *testing.T) {
	fl, g, nc, rd := parkedClient(t, parkFast)
	c := connOf(t, g, "t-1")
	if has, _ := hasFlow(t, c); has {
		t.Fatal("an idle connection parked with its flow state")
	}
	fl.slot <- qosDeliveryBatch("t-1", c.id, "q/1", "one", 1)
	p, ok := read(t, nc, rd, 2*time.Second).(*packet.Publish)
	if !ok || p.QoS != 1 || p.PacketID <= kafka.MaxInboxPacketID {
		t.Fatalf("got %+v, want a QoS 1 PUBLISH with a gateway packet identifier", p)
	}
	// Woken by a ping with the message unacknowledged: it parks keeping it.
	write(t, nc, &packet.Pingreq{})
	if _, ok := read(t, nc, rd, 2*time.Second).(*packet.Pingresp); !ok {
		t.Fatal("want PINGRESP")
	}
	waitParks(t, g, 2, 1)
	if has, n := hasFlow(t, c); !has || n != 1 {
		t.Fatalf("parked with flow %v and %d in flight, want the unacknowledged message kept", has, n)
	}
	write(t, nc, &packet.Ack{Kind: packet.PUBACK, PacketID: p.PacketID})
	waitParks(t, g, 3, 1)
	if has, _ := hasFlow(t, c); has {
		t.Fatal("parked with its flow state after the PUBACK")
	}
	fl.slot <- qosDeliveryBatch("t-1", c.id, "q/2", "two", 1)
	p, ok = read(t, nc, rd, 2*time.Second).(*packet.Publish)
	if !ok || p.QoS != 1 || p.PacketID <= kafka.MaxInboxPacketID || string(p.Payload) != "two" {
		t.Fatalf("got %+v, want the second QoS 1 PUBLISH", p)
	}
}

// TestParkSplitPacket: a packet split across parks is kept in the read
// buffer while the connection is parked and completed when the rest
// arrives; the record in the log carries the whole payload.
func TestParkSplitPacket(t *testing.T) {
	fl, g, nc, rd := parkedClient(t, parkFast)
	payload := bytes.Repeat([]byte("0123456789"), 300) // larger than the initial read buffer
	raw := (&packet.Publish{QoS: 1, PacketID: 9, Topic: []byte("split/topic"), Payload: payload}).Append(nil, packet.V5)
	cuts := []int{1, 3, 700, len(raw) - 1, len(raw)} // inside the header, the length, the body, before the last byte
	prev := 0
	for i, cut := range cuts {
		if _, err := nc.Write(raw[prev:cut]); err != nil {
			t.Fatal(err)
		}
		prev = cut
		if i < len(cuts)-1 {
			waitParks(t, g, int64(i+2), 1) // parked again with part of the packet
		}
	}
	fl.waitProduced(t, 1)
	_, env := fl.heldEnvelope(t, 0)
	m := env.GetPublish().GetMessage()
	if m.GetTopic() != "split/topic" || !bytes.Equal(m.GetPayload(), payload) {
		t.Fatalf("published %q with %d bytes, want split/topic with %d", m.GetTopic(), len(m.GetPayload()), len(payload))
	}
	fl.complete(0, nil)
	if a := readAck(t, nc, rd); a.Kind != packet.PUBACK || a.PacketID != 9 {
		t.Fatalf("got %v %d, want PUBACK 9", a.Kind, a.PacketID)
	}
}

// TestParkKeepAlive: a parked connection whose keep alive passes is closed
// with 0x8D, not before one and a half keep alive periods, and at most a
// wheel tick (one second) after.
func TestParkKeepAlive(t *testing.T) {
	fl := newFakeLog()
	g := startGateway(t, fl, parkFast)
	start := time.Now()
	nc, rd := connectAs(t, g, "t-1", 1)
	waitParks(t, g, 1, 1)
	code := expectEnd(t, nc, rd, 5*time.Second)
	el := time.Since(start)
	if code != int(packet.CodeKeepAliveTimeout) {
		t.Fatalf("DISCONNECT %#x, want 0x8D keep alive timeout", code)
	}
	if el < 1400*time.Millisecond || el > 3500*time.Millisecond {
		t.Fatalf("closed after %v: keep alive 1 s closes between 1.5 s and 2.5 s", el)
	}
	waitEnded(t, g)

	// A packet resets the deadline, parked or not.
	nc, rd = connectAs(t, g, "t-2", 1)
	parks := g.Parks()
	start = time.Now()
	for range 4 {
		waitParks(t, g, parks+1, 1)
		parks = g.Parks()
		time.Sleep(500 * time.Millisecond) // real time: the poller parks real sockets and expires them on its wheel
		write(t, nc, &packet.Pingreq{})
		if _, ok := read(t, nc, rd, 2*time.Second).(*packet.Pingresp); !ok {
			t.Fatal("want PINGRESP")
		}
	}
	if el := time.Since(start); el < 2*time.Second {
		t.Fatalf("pings took %v", el)
	}
	if c := expectEnd(t, nc, rd, 5*time.Second); c != int(packet.CodeKeepAliveTimeout) {
		t.Fatalf("DISCONNECT %#x, want 0x8D", c)
	}
}

// TestParkClose: a parked connection that the gateway closes (a takeover)
// or the client closes ends as a blocked reader's would: DISCONNECT with
// the reason, the socket closed, the connection unregistered.
func TestParkClose(t *testing.T) {
	fl, g, nc, rd := parkedClient(t, parkFast)
	c := connOf(t, g, "t-1")
	fl.slot <- kafka.Batch{Records: []*kafka.Record{kafka.NewRecord(kafka.TopicDeliveries, nil, 0, &eventspb.Envelope{
		Tenant: "t", ClientId: "t-1",
		Event: &eventspb.Envelope_Kick{Kick: &eventspb.Kick{Connection: c.id, ReasonCode: uint32(packet.CodeSessionTakenOver)}},
	})}}
	if code := expectEnd(t, nc, rd, 5*time.Second); code != int(packet.CodeSessionTakenOver) {
		t.Fatalf("DISCONNECT %#x, want 0x8E", code)
	}
	waitEnded(t, g)

	// The client goes away while parked.
	nc, _ = connectAs(t, g, "t-2", 0)
	waitParks(t, g, 2, 1)
	_ = nc.Close()
	waitEnded(t, g)
}

// TestParkShutdown: stopping the gateway ends parked connections with
// 0x8B, and Run returns.
func TestParkShutdown(t *testing.T) {
	fl := newFakeLog()
	g, stop := runGateway(t, fl, parkFast)
	nc, rd := connectAs(t, g, "t-1", 0)
	waitParks(t, g, 1, 1)
	errc := make(chan error, 1)
	go func() { errc <- stop() }()
	if code := expectEnd(t, nc, rd, 5*time.Second); code != int(packet.CodeServerShuttingDown) {
		t.Fatalf("DISCONNECT %#x, want 0x8B", code)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if g.Parked() != 0 {
		t.Fatalf("%d connections still parked after shutdown", g.Parked())
	}
}

// TestParkMany: many connections park, are woken at once, answer, park
// again and end.
func TestParkMany(t *testing.T) {
	const n = 200
	fl := newFakeLog()
	g := startGateway(t, fl, parkFast)
	ncs := make([]net.Conn, n)
	rds := make([]*packet.Reader, n)
	for i := range n {
		ncs[i], rds[i] = connectAs(t, g, "t-"+strconv.Itoa(i), 0)
	}
	waitParks(t, g, n, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := ncs[i].Write((&packet.Pingreq{}).Append(nil, packet.V5)); err != nil {
				errs <- err
				return
			}
			_ = ncs[i].SetReadDeadline(time.Now().Add(5 * time.Second))
			h, _, err := rds[i].ReadPacket()
			if err == nil && h.Type != packet.PINGRESP {
				err = errors.New("got " + h.Type.String() + ", want PINGRESP")
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	waitParks(t, g, 2*n, n)
	for i := range n {
		_ = ncs[i].Close()
	}
	waitEnded(t, g)
}

// TestParkQuickAfterIdleWake: a connection woken after being idle for
// park_idle (a ping) is answered by a worker, without flow state, and
// parks again at once; one that sends again soon after stays active for
// park_idle.
func TestParkQuickAfterIdleWake(t *testing.T) {
	const idle = 300 * time.Millisecond
	_, g, nc, rd := parkedClient(t, func(c *Config) { c.ParkIdle = idle })
	c := connOf(t, g, "t-1")
	time.Sleep(idle) // idle for park_idle and more: real time, the poller parks real sockets

	ping := func() time.Time {
		t.Helper()
		write(t, nc, &packet.Pingreq{})
		if _, ok := read(t, nc, rd, 2*time.Second).(*packet.Pingresp); !ok {
			t.Fatal("want PINGRESP")
		}
		return time.Now()
	}
	at := ping()
	waitParks(t, g, 2, 1)
	if d := time.Since(at); d > idle/2 {
		t.Fatalf("parked again %v after answering a ping, want at once", d)
	}
	if has, _ := hasFlow(t, c); has {
		t.Fatal("a ping to a parked connection made its flow state: PINGRESP is written straight")
	}

	// Sending again soon: active, parked only after park_idle.
	at = ping()
	waitParks(t, g, 3, 1)
	if d := time.Since(at); d < idle*3/4 {
		t.Fatalf("a connection that sent again soon parked after %v, want about %v", d, idle)
	}
}

// TestParkWokenBurst: a parked connection that sends more than a worker
// handles in one pass (quickPackets) gets a reader of its own and every
// packet is answered in order; a DISCONNECT sent to a parked connection
// ends it.
func TestParkWokenBurst(t *testing.T) {
	_, g, nc, rd := parkedClient(t, parkFast)
	time.Sleep(50 * time.Millisecond) // idle for park_idle and more: real time, the poller parks real sockets
	const n = 3*quickPackets + 5
	var burst []byte
	for i := range n {
		burst = (&packet.Ack{Kind: packet.PUBREL, PacketID: uint16(i + 1)}).Append(burst, packet.V5)
	}
	if _, err := nc.Write(burst); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		a := readAck(t, nc, rd)
		if a.Kind != packet.PUBCOMP || a.PacketID != uint16(i+1) {
			t.Fatalf("answer %d: %v %d, want PUBCOMP %d", i, a.Kind, a.PacketID, i+1)
		}
	}
	eventually.True(t, gatewayWait, "the connection to park again", func() bool { return g.Parked() == 1 })
	time.Sleep(50 * time.Millisecond) // real time: parked a while, the DISCONNECT wakes it through epoll
	write(t, nc, &packet.Disconnect{})
	if code := expectEnd(t, nc, rd, 5*time.Second); code != -1 {
		t.Fatalf("DISCONNECT %#x from the gateway after the client's, want none", code)
	}
	waitEnded(t, g)
}

// TestParkedReceiverKeepsFlow: a parked connection that receives
// deliveries keeps its flow state between flushes, rather than making its
// buffers again for every message, and drops it at its next park.
func TestParkedReceiverKeepsFlow(t *testing.T) {
	fl, g, nc, rd := parkedClient(t, parkFast)
	c := connOf(t, g, "t-1")
	for i := range 3 {
		payload := strconv.Itoa(i)
		fl.slot <- deliveryBatch("t-1", c.id, "to/parked", payload)
		if p, ok := read(t, nc, rd, 2*time.Second).(*packet.Publish); !ok || string(p.Payload) != payload {
			t.Fatalf("delivery %d: got %+v", i, p)
		}
		eventually.True(t, gatewayWait, "the flush to end", func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			return !c.flushing
		})
		if has, _ := hasFlow(t, c); !has {
			t.Fatalf("delivery %d: the parked receiver dropped its flow state after the flush", i)
		}
	}
	write(t, nc, &packet.Pingreq{})
	if _, ok := read(t, nc, rd, 2*time.Second).(*packet.Pingresp); !ok {
		t.Fatal("want PINGRESP")
	}
	waitParks(t, g, 2, 1)
	eventually.True(t, gatewayWait, "the flow state to go at the next park", func() bool {
		has, _ := hasFlow(t, c)
		return !has
	})
}

// TestBusyConnectionNotParkedOrExpired: the read deadline is not moved
// with every packet, so it passes while a busy client keeps sending; the
// reader then sets it again from the last packet instead of parking the
// connection or ending it for its keep alive. Once the client stops, it
// parks as usual.
func TestBusyConnectionNotParkedOrExpired(t *testing.T) {
	fl := newFakeLog()
	// park_idle 1 s, keep alive 1 s (expired after 1.5 s without a packet):
	// both deadlines pass under the loop, twice or more, with room for a
	// loaded machine's pauses between pings.
	// (parkQuiet as long: the first ping may come late on a loaded
	// machine, and a connection that said nothing parks after parkQuiet.)
	g := startGateway(t, fl, func(c *Config) { c.ParkIdle, c.parkQuiet = time.Second, time.Second })
	nc, rd := connectAs(t, g, "t-1", 1)
	parks := g.Parks()
	start := time.Now()
	for i := 0; time.Since(start) < 3*time.Second; i++ {
		write(t, nc, &packet.Pingreq{})
		if _, ok := read(t, nc, rd, 2*time.Second).(*packet.Pingresp); !ok {
			t.Fatalf("ping %d after %v: want PINGRESP", i, time.Since(start))
		}
		if g.Parks() != parks {
			t.Fatalf("ping %d after %v: a connection pinging every 50 ms was parked", i, time.Since(start))
		}
		time.Sleep(50 * time.Millisecond) // real time: a busy client's pace, past both real deadlines
	}
	waitParks(t, g, parks+1, 1)
}

// TestQuietFreshConnectionParksSoon: a connection that says nothing after
// its CONNACK parks after parkQuiet (connectParkIdle by default), not
// park_idle, so a wave of connects does not hold a reader goroutine per
// connection for park_idle; one whose client spoke first (a PINGREQ sent
// with its CONNECT) waits park_idle like any reader. A quiet one that
// speaks once parked is answered and kept by a reader for park_idle
// (resume).
func TestQuietFreshConnectionParksSoon(t *testing.T) {
	const parkIdle = time.Hour
	g := startGateway(t, newFakeLog(), func(c *Config) { c.ParkIdle = parkIdle })
	if got := g.parkQuiet(); got != connectParkIdle {
		t.Fatalf("parkQuiet %v, want connectParkIdle (%v)", got, connectParkIdle)
	}
	start := time.Now()
	quiet, quietRd := connectAs(t, g, "t-quiet", 0)
	waitParks(t, g, 1, 1)
	if d := time.Since(start); d > parkIdle/2 {
		t.Fatalf("the quiet connection parked after %v", d)
	}

	// CONNECT and PINGREQ in one write: the first packet after the
	// handshake is already buffered when the reader starts.
	talker, err := net.Dial("tcp", g.Addr("mqtt").String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = talker.Close() })
	both := (&packet.Connect{Version: packet.V5, ClientID: []byte("t-talker"), CleanStart: true}).Append(nil, packet.V5)
	both = (&packet.Pingreq{}).Append(both, packet.V5)
	if _, err := talker.Write(both); err != nil {
		t.Fatal(err)
	}
	rd := packet.NewReader(talker, 256)
	if _, ok := read(t, talker, rd, 5*time.Second).(*packet.Connack); !ok {
		t.Fatal("want CONNACK")
	}
	if _, ok := read(t, talker, rd, 5*time.Second).(*packet.Pingresp); !ok {
		t.Fatal("want PINGRESP")
	}
	time.Sleep(5 * connectParkIdle) // real time: nothing else parks meanwhile (epoll, real sockets)
	if n := g.Parked(); n != 1 {
		t.Fatalf("%d connections parked %v after a client that spoke, want 1 (only the quiet one)", n, 5*connectParkIdle)
	}

	// The quiet one speaks: woken within park_idle of its last packet, it
	// gets a reader of its own, which keeps it.
	write(t, quiet, &packet.Pingreq{})
	if _, ok := read(t, quiet, quietRd, 5*time.Second).(*packet.Pingresp); !ok {
		t.Fatal("want PINGRESP from the parked connection")
	}
	eventually.True(t, gatewayWait, "the woken connection to leave the poller", func() bool { return g.Parked() == 0 })
	time.Sleep(5 * connectParkIdle) // real time: it does not park again meanwhile (epoll, real sockets)
	if n := g.Parked(); n != 0 {
		t.Fatalf("%d connections parked after the quiet one spoke, want 0 (park_idle is an hour)", n)
	}
}
