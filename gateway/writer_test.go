package gateway

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// TestSlowReaderGetsEverythingInOrder fills a TCP client's socket while it
// does not read (the non-blocking write stops short and the blocking path
// takes over), with small payloads copied into the out buffer and large
// ones written by reference, then reads: every message arrives, whole and
// in order.
func TestSlowReaderGetsEverythingInOrder(t *testing.T) {
	fl := newFakeLog()
	g := startGateway(t, fl)
	nc, rd := dial(t, g)
	c := connOf(t, g, "t-1")
	// Small socket buffers on both sides: the gateway's socket fills soon.
	if tc, ok := c.nc.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(8 << 10)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(16 << 10)
	}
	const n = 400
	payload := func(i int) []byte {
		size := 100
		if i%3 == 0 {
			size = 3 * borrowThreshold // borrowed: written with writev
		}
		p := bytes.Repeat([]byte{byte(i)}, size)
		binary.BigEndian.PutUint32(p, uint32(i))
		return p
	}
	go func() {
		for i := range n {
			env := &eventspb.Envelope{Tenant: "t", Event: &eventspb.Envelope_Delivery{Delivery: &eventspb.Delivery{
				Message: &eventspb.Message{Topic: "slow", Payload: payload(i)},
				Targets: []*eventspb.Target{{ClientId: "t-1", Connection: c.id}},
				Source:  &eventspb.Source{Partition: 1, Offset: int64(i)},
			}}}
			fl.slot <- kafka.Batch{Records: []*kafka.Record{kafka.NewRecord(kafka.TopicDeliveries, nil, 0, env)}}
		}
	}()
	// Let the socket fill before reading anything.
	eventually.True(t, 10*time.Second, "every message sent", func() bool { return g.Stats.Load(MessagesSent) >= n })
	eventually.True(t, gatewayWait, "a write waiting for the full socket (else the test did not fill it)", func() bool {
		return g.writes.blocked.Load() > 0
	})
	for i := range n {
		p, ok := read(t, nc, rd, 5*time.Second).(*packet.Publish)
		if !ok {
			t.Fatalf("message %d: not a PUBLISH", i)
		}
		if !bytes.Equal(p.Payload, payload(i)) {
			t.Fatalf("message %d: payload of %d bytes starting %x, want %d bytes starting %x",
				i, len(p.Payload), p.Payload[:4], len(payload(i)), payload(i)[:4])
		}
	}
	expectSilence(t, nc, rd, 100*time.Millisecond)
}

// TestStallThatEndedDoesNotCut: a subscriber that stops reading while a
// burst fills its socket, then reads everything, is not cut when the write
// timeout has passed since the stall: the deadline measures a write that
// makes no way, and none is left on the socket after the write.
func TestStallThatEndedDoesNotCut(t *testing.T) {
	fl := newFakeLog()
	// Long enough that a busy machine has the client reading again well
	// within it: only the stall that ended may not count.
	const timeout = time.Second
	g, recs, _, _ := loggedGateway(t, fl, nil, func(c *Config) { c.WriteTimeout = timeout })
	nc, rd := dial(t, g)
	c := connOf(t, g, "t-1")
	if tc, ok := c.nc.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(8 << 10)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(16 << 10)
	}
	deliver := func(i int, size int) {
		env := &eventspb.Envelope{Tenant: "t", Event: &eventspb.Envelope_Delivery{Delivery: &eventspb.Delivery{
			Message: &eventspb.Message{Topic: "stall", Payload: bytes.Repeat([]byte{byte(i)}, size)},
			Targets: []*eventspb.Target{{ClientId: "t-1", Connection: c.id}},
			Source:  &eventspb.Source{Partition: 1, Offset: int64(i)},
		}}}
		fl.slot <- kafka.Batch{Records: []*kafka.Record{kafka.NewRecord(kafka.TopicDeliveries, nil, 0, env)}}
	}
	const n = 64 // 1 MiB: more than both sockets hold
	for i := range n {
		deliver(i, 16<<10)
	}
	eventually.True(t, 10*time.Second, "a write waiting for the full socket (else the test did not fill it)", func() bool {
		return g.writes.blocked.Load() > 0
	})
	time.Sleep(timeout / 10) // the stall, shorter than the timeout: real time, the write deadline is the socket's
	for i := range n {
		if _, ok := read(t, nc, rd, 5*time.Second).(*packet.Publish); !ok {
			t.Fatalf("message %d: not a PUBLISH", i)
		}
	}
	// Well past the deadline the stalled write had: the next message
	// arrives, and the connection stays.
	time.Sleep(2 * timeout) // real time: past the deadline the socket had during the stall
	deliver(n, 100)
	if p, ok := read(t, nc, rd, 5*time.Second).(*packet.Publish); !ok || len(p.Payload) != 100 {
		t.Fatalf("after the stall: %v, want the 100-byte PUBLISH (log:\n%s)", p, recs)
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		t.Fatal("connection closed after a stall that ended")
	}
}

// TestConsumed checks the bookkeeping of a partial vectored write.
func TestConsumed(t *testing.T) {
	bufs := func() [][]byte { return [][]byte{[]byte("abc"), []byte("de"), []byte("fghi")} }
	for n, want := range []string{"abcdefghi", "bcdefghi", "cdefghi", "defghi", "efghi", "fghi", "ghi", "hi", "i", ""} {
		var got []byte
		for _, b := range consumed(bufs(), n) {
			got = append(got, b...)
		}
		if string(got) != want {
			t.Errorf("consumed(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestWriteQueueWritesEveryConnection queues many connections in rounds
// and checks that each is written exactly what it got, and that the
// writers stop once nothing is queued. It runs in a synctest bubble: once
// every writer is idle, nothing more is on its way.
func TestWriteQueueWritesEveryConnection(t *testing.T) {
	synctest.Test(t, testWriteQueueWritesEveryConnection)
}

func testWriteQueueWritesEveryConnection(t *testing.T) {
	f := newFanOut(t, 300, 0, packet.V311)
	for range 50 {
		f.round()
	}
	synctest.Wait() // the writers are done
	p := packet.Publish{Topic: []byte("bench/fanout"), Payload: make([]byte, 64)}
	want := int64(p.Size(packet.V311)) * 50
	for i, s := range f.sinks {
		if s.written() != want {
			t.Fatalf("subscriber %d got %d bytes, want %d", i, s.written(), want)
		}
	}
	f.g.writes.mu.Lock()
	running, waiting := f.g.writes.running, len(f.g.writes.conns)-f.g.writes.head
	f.g.writes.mu.Unlock()
	if waiting != 0 {
		t.Errorf("%d connections still queued", waiting)
	}
	if running != 0 {
		t.Errorf("%d writers still running with nothing queued", running)
	}
}
