package gateway

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// handedRecord is a QoS 0 delivery record to client of tenant "t" on
// connection, as the router fills it.
func handedRecord(client string, connection uint64, payload string) *kafka.Record {
	return deliveryBatch(client, connection, "ho", payload).Records[0]
}

// readPayload reads the next PUBLISH from nc and checks its payload.
func readPayload(t *testing.T, read func() packet.Packet, want string) {
	t.Helper()
	p, ok := read().(*packet.Publish)
	if !ok || string(p.Payload) != want {
		t.Fatalf("got %+v, want a PUBLISH of %q", p, want)
	}
}

// handoffClient runs a gateway on a fake log with client "t-1" of tenant
// "t" connected; next reads the client's next packet.
func handoffClient(t *testing.T) (g *Gateway, fl *fakeLog, c *conn, next func() packet.Packet, silent func()) {
	t.Helper()
	fl = newFakeLog()
	g = startGateway(t, fl)
	nc, rd := dial(t, g)
	c = connOf(t, g, "t-1")
	next = func() packet.Packet { return read(t, nc, rd, 5*time.Second) }
	silent = func() { expectSilence(t, nc, rd, 100*time.Millisecond) }
	return g, fl, c, next, silent
}

// TestHandoffDeliversAtOnce: a record handed off is written to its client
// before the log has it, and the slot consumer skips it when it comes;
// the router's bytes may change once Handoff has returned.
func TestHandoffDeliversAtOnce(t *testing.T) {
	g, fl, c, next, silent := handoffClient(t)

	rec := handedRecord("t-1", c.id, "early")
	mark := g.Handoff(g.slot.Load(), rec, true)
	if len(mark) != kafka.HandoffMarkLen || mark[8] != kafka.HandoffEarly {
		t.Fatalf("mark %x, want the early mark", mark)
	}
	readPayload(t, next, "early")
	if g.Handoff(g.slot.Load()+1, handedRecord("t-1", c.id, "other slot"), true) != nil {
		t.Fatal("a record for another slot got a mark")
	}

	// The router reuses its record once produced: the gateway copied it.
	logged := handedRecord("t-1", c.id, "early")
	logged.AddHeader(kafka.HeaderHandoff, mark)
	clear(rec.Value)
	fl.slot <- kafka.Batch{Records: []*kafka.Record{logged}}
	// A record of another run of the gateway (another connection base)
	// is not skipped.
	foreign := append([]byte(nil), mark...)
	foreign[0] ^= 0xff
	other := handedRecord("t-1", c.id, "other run")
	other.AddHeader(kafka.HeaderHandoff, foreign)
	fl.slot <- kafka.Batch{Records: []*kafka.Record{other}}
	readPayload(t, next, "other run")
	silent()
}

// TestHandoffLateKeepsOrder: a record the gateway cannot deliver at once
// (its target's connection is not registered here) is left to the log,
// and so is every later one until the slot consumer has read them: the
// client gets the router's records in the slot's order.
func TestHandoffLateKeepsOrder(t *testing.T) {
	g, fl, c, next, silent := handoffClient(t)
	slot := g.slot.Load()

	unknown := handedRecord("t-1", c.id+1, "to a connection not here")
	after := handedRecord("t-1", c.id, "after")
	var marks [2][]byte
	for i, r := range []*kafka.Record{unknown, after} {
		marks[i] = append([]byte(nil), g.Handoff(slot, r, true)...)
		if len(marks[i]) != kafka.HandoffMarkLen || marks[i][8] != kafka.HandoffLate {
			t.Fatalf("record %d: mark %x, want the late mark", i, marks[i])
		}
		r.AddHeader(kafka.HeaderHandoff, marks[i])
	}
	silent()
	fl.slot <- kafka.Batch{Records: []*kafka.Record{unknown}}
	// Until the log has given the late records back, a new one waits too.
	if m := g.Handoff(slot, handedRecord("t-1", c.id, "behind"), true); len(m) != kafka.HandoffMarkLen || m[8] != kafka.HandoffLate {
		t.Fatalf("mark %x with a late record unread, want the late mark", m)
	}
	behind := handedRecord("t-1", c.id, "behind")
	behind.AddHeader(kafka.HeaderHandoff, marks[1])
	fl.slot <- kafka.Batch{Records: []*kafka.Record{after, behind}}
	readPayload(t, next, "after")
	readPayload(t, next, "behind")
	eventually.True(t, gatewayWait, "the late records read", func() bool {
		return g.handoff.late.Load() == 0
	})
	if m := g.Handoff(slot, handedRecord("t-1", c.id, "early again"), true); len(m) != kafka.HandoffMarkLen || m[8] != kafka.HandoffEarly {
		t.Fatalf("mark %x once the log caught up, want the early mark", m)
	}
	readPayload(t, next, "early again")
}

// TestHandoffAllocs: handing a delivery to one subscriber over allocates
// nothing in steady state but its share of a 64 KiB chunk (one in several
// hundred records), as the slot consumer's own path.
func TestHandoffAllocs(t *testing.T) {
	f := newFanOut(t, 1, 0, packet.V5)
	f.g.startHandoff()
	const rounds = 200
	rec := f.batch.Records[0]
	hand := func() {
		f.offset++
		binary.PutUvarint(rec.Value[f.offsetAt:f.offsetAt+8], f.offset)
		if m := f.g.Handoff(0, rec, true); len(m) != kafka.HandoffMarkLen || m[8] != kafka.HandoffEarly {
			panic(fmt.Sprintf("mark %x, want the early mark", m))
		}
	}
	if n := testing.AllocsPerRun(rounds-1, hand); n != 0 {
		t.Errorf("a hand-off to one subscriber: %v allocations, want 0", n)
	}
	f.waitWritten(t, rounds)
}

// promptLog is the producer of WithSessionLog in the tests: it keeps the
// Connect requests it writes, and answers none, and counts Disconnects.
type promptLog struct {
	connects    chan *eventspb.Connect
	disconnects *atomic.Int64
}

func (l promptLog) Produce(ctx context.Context, r *kafka.Record, done func(*kafka.Record, error)) {
	done(r, l.ProduceSync(ctx, r))
}

func (l promptLog) ProduceSync(_ context.Context, rs ...*kafka.Record) error {
	for _, r := range rs {
		var env eventspb.Envelope
		if err := kafka.DecodeEnvelope(r, &env); err != nil {
			return err
		}
		if c := env.GetConnect(); c != nil {
			l.connects <- c
		}
		if env.GetDisconnect() != nil {
			l.disconnects.Add(1)
		}
	}
	return nil
}

// TestAnswerHandedOff: with WithSessionLog the Connect is written by that
// producer, not the gateway's own; the session service's answer given
// through Answer (as in `shoal all`) accepts the connection at once, and
// the same answer read later from the slot is ignored. An answer for
// another slot is not taken.
func TestAnswerHandedOff(t *testing.T) {
	fl := newFakeLog()
	pl := promptLog{connects: make(chan *eventspb.Connect, 10), disconnects: new(atomic.Int64)}
	g, stop := runGatewayWith(t, fl, func(g *Gateway) { WithSessionLog(pl)(g) })
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	nc, err := net.Dial("tcp", g.Addr("mqtt").String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	rd := packet.NewReader(nc, 256)
	write(t, nc, &packet.Connect{Version: packet.V5, ClientID: []byte("t-1"), CleanStart: true})
	var req *eventspb.Connect
	select {
	case req = <-pl.connects:
	case <-time.After(5 * time.Second):
		t.Fatal("no Connect written through the connect log")
	}
	res := &eventspb.ConnectResult{RequestId: req.RequestId, Connection: req.Route.Connection, Generation: 1}

	// No answer yet: the gateway's own producer (fakeLog) would have
	// answered a Connect written through it.
	g.Answer(g.slot.Load()+1, res)
	expectSilence(t, nc, rd, 100*time.Millisecond)
	g.Answer(g.slot.Load(), res)
	if ca, ok := read(t, nc, rd, 5*time.Second).(*packet.Connack); !ok || ca.Code != 0 {
		t.Fatalf("got %+v, want CONNACK 0", ca)
	}
	c := connOf(t, g, "t-1")

	// The answer's record, then a delivery: the record changes nothing,
	// the delivery reaches the client.
	answered := kafka.NewRecord(kafka.TopicDeliveries, nil, 0, &eventspb.Envelope{
		Event: &eventspb.Envelope_ConnectResult{ConnectResult: res.CloneVT()},
	})
	fl.slot <- kafka.Batch{Records: []*kafka.Record{answered}}
	fl.slot <- deliveryBatch("t-1", c.id, "t/1", "after")
	readPayload(t, func() packet.Packet { return read(t, nc, rd, 5*time.Second) }, "after")
	expectSilence(t, nc, rd, 100*time.Millisecond)

	// The connection's end goes to shoal.sessions too: the same producer.
	write(t, nc, &packet.Disconnect{})
	eventually.True(t, gatewayWait, "the Disconnect through the session log", func() bool { return pl.disconnects.Load() == 1 })
	if n := fl.disconnects.Load(); n != 0 {
		t.Errorf("%d Disconnects through the gateway's own producer", n)
	}
}
