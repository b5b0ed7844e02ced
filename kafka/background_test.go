package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// doneLog collects the outcomes of produced records, by value.
type doneLog struct {
	mu   sync.Mutex
	got  map[string]outcome
	more chan struct{} // signalled at every outcome
}

type outcome struct {
	offset int64
	err    error
	calls  int
}

func newDoneLog() *doneLog {
	return &doneLog{got: make(map[string]outcome), more: make(chan struct{}, 1024)}
}

func (d *doneLog) done(r *Record, err error) {
	d.mu.Lock()
	o := d.got[string(r.Value)]
	o.offset, o.err, o.calls = r.Offset, err, o.calls+1
	d.got[string(r.Value)] = o
	d.mu.Unlock()
	select {
	case d.more <- struct{}{}:
	default:
	}
}

func (d *doneLog) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.got)
}

func (d *doneLog) get(v string) (outcome, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	o, ok := d.got[v]
	return o, ok
}

// waitFor waits until n records are done, failing the test at the timeout.
func (d *doneLog) waitFor(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(testTimeout)
	for d.count() < n {
		select {
		case <-d.more:
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatalf("%d of %d records done after %s", d.count(), n, testTimeout)
		}
	}
}

// TestProduceBackgroundKeepsOrder: background records wait in the client
// (a linger of an hour holds them for the whole test) until another
// produce call sends them, ahead of its own records, in the order they
// were given.
func TestProduceBackgroundKeepsOrder(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{ClientID: "bg", BackgroundLinger: time.Hour})
	const part = int32(1)
	rec := func(v string) *Record {
		return &Record{Topic: TopicDeliveries, Partition: part, Value: []byte(v)}
	}
	d := newDoneLog()
	c.ProduceBackground(rec("b1"), d.done)
	c.ProduceBackground(rec("b2"), d.done)
	// Held: nothing is acknowledged while nothing else is produced (a
	// client without the hold acknowledges within a millisecond).
	time.Sleep(100 * time.Millisecond) // a quiet period: nothing signals that a held record stays held
	if n := d.count(); n != 0 {
		t.Fatalf("%d background records done before anything sent them", n)
	}
	if got := c.InFlight(); got != 0 {
		t.Fatalf("InFlight = %d while both are held, want 0", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	urgent := rec("u1")
	if err := c.ProduceSync(ctx, urgent); err != nil {
		t.Fatal(err)
	}
	d.waitFor(t, 2)
	b1, _ := d.get("b1")
	b2, _ := d.get("b2")
	if b1.err != nil || b2.err != nil {
		t.Fatalf("background records failed: %v, %v", b1.err, b2.err)
	}
	if b1.offset >= b2.offset || b2.offset >= urgent.Offset {
		t.Fatalf("offsets b1 %d, b2 %d, then the urgent record %d: want them in that order", b1.offset, b2.offset, urgent.Offset)
	}

	// Produce (asynchronous) sends them too, and so does Flush.
	c.ProduceBackground(rec("b3"), d.done)
	c.Produce(ctx, rec("u2"), d.done)
	d.waitFor(t, 4)
	b3, _ := d.get("b3")
	u2, _ := d.get("u2")
	if b3.offset >= u2.offset {
		t.Fatalf("b3 at %d, after the urgent u2 at %d", b3.offset, u2.offset)
	}
	c.ProduceBackground(rec("b4"), d.done)
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if o, ok := d.get("b4"); !ok || o.err != nil || o.offset <= u2.offset {
		t.Fatalf("b4 after Flush: %+v (done %t), want acknowledged after offset %d", o, ok, u2.offset)
	}
}

// TestProduceBackgroundLingerAndCap: held records go by themselves after
// the linger, and at once when BackgroundMaxHeld of them are held.
func TestProduceBackgroundLingerAndCap(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	short := newTestClient(t, e, Config{ClientID: "short", BackgroundLinger: 20 * time.Millisecond})
	d := newDoneLog()
	short.ProduceBackground(&Record{Topic: TopicDeliveries, Partition: 0, Value: []byte("alone")}, d.done)
	d.waitFor(t, 1)
	if o, _ := d.get("alone"); o.err != nil || o.calls != 1 {
		t.Fatalf("alone: %+v", o)
	}

	long := newTestClient(t, e, Config{ClientID: "long", BackgroundLinger: time.Hour})
	d = newDoneLog()
	for i := range BackgroundMaxHeld - 1 {
		long.ProduceBackground(&Record{Topic: TopicDeliveries, Partition: 0, Value: fmt.Appendf(nil, "r%d", i)}, d.done)
	}
	time.Sleep(50 * time.Millisecond) // a quiet period: nothing tells that the held records stay held
	if n := d.count(); n != 0 {
		t.Fatalf("%d done of %d held, below the cap", n, BackgroundMaxHeld-1)
	}
	long.ProduceBackground(&Record{Topic: TopicDeliveries, Partition: 0, Value: []byte("last")}, d.done)
	d.waitFor(t, BackgroundMaxHeld)
	prev := int64(-1)
	for i := range BackgroundMaxHeld - 1 {
		o, _ := d.get(fmt.Sprintf("r%d", i))
		if o.err != nil || o.offset <= prev || o.calls != 1 {
			t.Fatalf("r%d: %+v after offset %d", i, o, prev)
		}
		prev = o.offset
	}
}

// TestProduceBackgroundClose: Close sends the held records and every done
// callback runs once; a background record after Close fails at once.
func TestProduceBackgroundClose(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{ClientID: "closing", BackgroundLinger: time.Hour})
	d := newDoneLog()
	for i := range 10 {
		c.ProduceBackground(&Record{Topic: TopicDeliveries, Partition: 0, Value: fmt.Appendf(nil, "r%d", i)}, d.done)
	}
	c.Close() // returns once every done callback has run
	if n := d.count(); n != 10 {
		t.Fatalf("%d of 10 held records done after Close", n)
	}
	for i := range 10 {
		if o, _ := d.get(fmt.Sprintf("r%d", i)); o.calls != 1 {
			t.Fatalf("r%d: done %d times", i, o.calls)
		}
	}
	c.ProduceBackground(&Record{Topic: TopicDeliveries, Partition: 0, Value: []byte("late")}, d.done)
	d.waitFor(t, 11)
	if o, _ := d.get("late"); !errors.Is(o.err, kgo.ErrClientClosed) {
		t.Fatalf("background record after Close: err %v, want %v", o.err, kgo.ErrClientClosed)
	}
}

// TestProduceBackgroundWithoutLinger: with no BackgroundLinger a
// background record is produced at once, as by Produce.
func TestProduceBackgroundWithoutLinger(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{ClientID: "none"})
	d := newDoneLog()
	c.ProduceBackground(&Record{Topic: TopicDeliveries, Partition: 0, Value: []byte("now")}, d.done)
	d.waitFor(t, 1)
	if o, _ := d.get("now"); o.err != nil {
		t.Fatal(o.err)
	}
}
