package gateway

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
	"github.com/shoal-mqtt/shoal/internal/testutil/testlog"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// sinkConn is a net.Conn that accepts every write at once and counts the
// bytes: a subscriber whose socket never pushes back.
type sinkConn struct {
	net.Conn // nil: only the methods below are called
	n        atomic.Int64
}

func (s *sinkConn) Write(p []byte) (int, error) { s.n.Add(int64(len(p))); return len(p), nil }

// writeNB makes sinkConn a socket whose send buffer is never full.
func (s *sinkConn) writeNB(bufs [][]byte) (int, bool, error) {
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	s.n.Add(int64(n))
	return n, false, nil
}

func (s *sinkConn) Read([]byte) (int, error)         { select {} }
func (s *sinkConn) Close() error                     { return nil }
func (s *sinkConn) SetWriteDeadline(time.Time) error { return nil }
func (s *sinkConn) SetReadDeadline(time.Time) error  { return nil }
func (s *sinkConn) SetDeadline(time.Time) error      { return nil }
func (s *sinkConn) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }
func (s *sinkConn) LocalAddr() net.Addr              { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }
func (s *sinkConn) written() int64                   { return s.n.Load() }

// fanOut is a gateway with n connected subscribers (sink connections) and
// a delivery record of one message for all of them.
type fanOut struct {
	g     *Gateway
	sinks []*sinkConn
	batch kafka.Batch
	// offsetAt is where the record's source offset is encoded (a varint
	// of fixed length), so that each round can make it a new record.
	offsetAt int
	offset   uint64
}

// fanOutBase is the first source offset: varints from 2^49 to 2^56-1 take
// 8 bytes, so the offset can be rewritten in place.
const fanOutBase = 1 << 49

func newFanOut(tb testing.TB, n int, qos uint32, version packet.Version) *fanOut {
	tb.Helper()
	cfg := DefaultConfig()
	g, err := New(cfg, newFakeLog(), testlog.New(tb), nil, "dev")
	if err != nil {
		tb.Fatal(err)
	}
	f := &fanOut{g: g, offset: fanOutBase}
	d := &eventspb.Delivery{
		Message: &eventspb.Message{Topic: "bench/fanout", Payload: bytes.Repeat([]byte{'x'}, 64), Qos: qos},
		Source:  &eventspb.Source{Partition: 3, Offset: fanOutBase},
	}
	for i := range n {
		sc := &sinkConn{}
		c := newConn(g, sc, nil)
		c.version = version
		c.tenant, c.clientID = "bench", fmt.Sprintf("bench-s-%d", i)
		c.clientsKey = clientKey(c.tenant, c.clientID)
		c.ready = true
		c.clientRecvMax = 65535
		c.clientMaxPacket = 1 << 28
		g.clients[c.clientsKey] = c
		g.byID[c.id] = c
		f.sinks = append(f.sinks, sc)
		d.Targets = append(d.Targets, &eventspb.Target{ClientId: c.clientID, Connection: c.id, Qos: qos})
	}
	rec := kafka.NewRecord(kafka.TopicDeliveries, nil, 0, &eventspb.Envelope{
		Tenant: "bench", Event: &eventspb.Envelope_Delivery{Delivery: d},
	})
	var enc [8]byte
	binary.PutUvarint(enc[:], fanOutBase)
	f.offsetAt = bytes.Index(rec.Value, enc[:])
	if f.offsetAt < 0 {
		tb.Fatal("source offset not found in the record")
	}
	f.batch = kafka.Batch{Topic: kafka.TopicDeliveries, Records: []*kafka.Record{rec}}
	return f
}

// round delivers the record once more, as a new record of the source
// partition (the connections drop repeats).
func (f *fanOut) round() {
	f.offset++
	binary.PutUvarint(f.batch.Records[0].Value[f.offsetAt:f.offsetAt+8], f.offset)
	if err := f.g.handleDeliveries(context.Background(), f.batch); err != nil {
		panic(err) // a delivery record never stops the consumer
	}
}

// BenchmarkFanOut is the gateway's part of a fan-out: one delivery record
// for N subscribers on this gateway, decoded and dispatched, every
// subscriber's PUBLISH encoded into its out buffer and its writer started.
// The writers write to sink connections (no socket cost) concurrently.
func BenchmarkFanOut(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		for _, v := range []struct {
			name string
			ver  packet.Version
		}{{"v5", packet.V5}, {"v311", packet.V311}} {
			b.Run(fmt.Sprintf("subs=%d/%s", n, v.name), func(b *testing.B) {
				f := newFanOut(b, n, 0, v.ver)
				b.ReportAllocs()
				cpu0 := processCPU()
				for b.Loop() {
					f.round()
				}
				b.StopTimer()
				f.waitWritten(b, int64(b.N))
				// CPU of the whole process (dispatch and writers) per
				// fan-out: steadier than wall time on a shared machine.
				b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// processCPU returns the user and system CPU time of the process, in ns.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// waitWritten waits until every sink has received rounds PUBLISH packets
// (at least their bytes), so that the writers' work is done when a
// benchmark or test ends.
func (f *fanOut) waitWritten(tb testing.TB, rounds int64) {
	tb.Helper()
	p := packet.Publish{Topic: []byte("bench/fanout"), Payload: make([]byte, 64)}
	per := int64(p.Size(packet.V311))
	eventually.OK(tb, 30*time.Second, func() string {
		for _, s := range f.sinks {
			if s.written() < per*rounds {
				return fmt.Sprintf("a subscriber got %d bytes, want %d", s.written(), per*rounds)
			}
		}
		return ""
	})
}

// TestFanOutDeliversToAll checks the benchmark's set-up: every subscriber
// receives every round, exactly. It runs in a synctest bubble: once every
// writer is idle, nothing more is on its way.
func TestFanOutDeliversToAll(t *testing.T) { synctest.Test(t, testFanOutDeliversToAll) }

func testFanOutDeliversToAll(t *testing.T) {
	f := newFanOut(t, 50, 0, packet.V311)
	for range 20 {
		f.round()
	}
	synctest.Wait() // the writers are done
	p := packet.Publish{Topic: []byte("bench/fanout"), Payload: make([]byte, 64)}
	want := int64(p.Size(packet.V311)) * 20
	for i, s := range f.sinks {
		if s.written() != want {
			t.Fatalf("subscriber %d got %d bytes, want %d", i, s.written(), want)
		}
	}
}
