package kafka

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// TestConsumeReuse: a consumer with Reuse hands out correct batches poll
// after poll (records of several partitions, with headers), and the bytes
// a handler keeps from an earlier poll are intact after later polls reuse
// the records that referred to them.
func TestConsumeReuse(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	const rounds, perPartition = 5, 40
	parts := []int32{0, 1, 2}
	// The producer has a context of its own: the consumer cancels ctx once
	// it has read everything, which can be before the last acknowledgement.
	pctx, pcancel := context.WithTimeout(context.Background(), testTimeout)
	defer pcancel()
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for round := range rounds {
			var rs []*Record
			for _, p := range parts {
				for i := range perPartition {
					rs = append(rs, &Record{Topic: TopicDeliveries, Partition: p,
						Key:     fmt.Appendf(nil, "k%d", p),
						Value:   fmt.Appendf(nil, "p%d-r%d-i%d", p, round, i),
						Headers: []Header{{Key: "h", Value: fmt.Appendf(nil, "h%d-%d-%d", p, round, i)}}})
				}
			}
			if err := c.ProduceSync(pctx, rs...); err != nil {
				t.Errorf("round %d: %v", round, err)
				return
			}
		}
	}()

	type kept struct {
		p          int32
		off        int64
		value, hdr []byte
	}
	var keep []kept
	var polls int
	want := rounds * perPartition * len(parts)
	err := c.ConsumePolls(ctx, ConsumeConfig{Topic: TopicDeliveries, Partitions: parts, Reuse: true},
		func(_ context.Context, bs []Batch) error {
			polls++
			for _, b := range bs {
				for i, r := range b.Records {
					if r.Partition != b.Partition || (i > 0 && r.Offset != b.Records[i-1].Offset+1) {
						t.Fatalf("batch %d: record %d is %d/%d after offset %d", b.Partition, i, r.Partition, r.Offset,
							b.Records[max(i-1, 0)].Offset)
					}
					round, idx := int(r.Offset)/perPartition, int(r.Offset)%perPartition
					if v := fmt.Sprintf("p%d-r%d-i%d", b.Partition, round, idx); string(r.Value) != v {
						t.Fatalf("record %d/%d has value %q, want %q", b.Partition, r.Offset, r.Value, v)
					}
					if len(r.Headers) != 1 || r.Headers[0].Key != "h" || string(r.Key) != fmt.Sprintf("k%d", b.Partition) {
						t.Fatalf("record %d/%d: key %q, headers %v", b.Partition, r.Offset, r.Key, r.Headers)
					}
					keep = append(keep, kept{b.Partition, r.Offset, r.Value, r.Headers[0].Value})
				}
			}
			if len(keep) >= want {
				cancel()
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	<-produced
	if len(keep) != want {
		t.Fatalf("consumed %d records, want %d", len(keep), want)
	}
	for _, k := range keep {
		round, idx := int(k.off)/perPartition, int(k.off)%perPartition
		if v := fmt.Sprintf("p%d-r%d-i%d", k.p, round, idx); string(k.value) != v {
			t.Fatalf("kept value of %d/%d is %q after later polls, want %q", k.p, k.off, k.value, v)
		}
		if h := fmt.Sprintf("h%d-%d-%d", k.p, round, idx); string(k.hdr) != h {
			t.Fatalf("kept header of %d/%d is %q after later polls, want %q", k.p, k.off, k.hdr, h)
		}
	}
	t.Logf("%d records in %d polls", want, polls)
}

// TestBatchArena: batches carved from one arena never share memory
// (appending to one leaves the next alone), a reset arena hands the same
// arrays out again, and one too small for a poll grows.
func TestBatchArena(t *testing.T) {
	a := new(batchArena)
	r1, p1, h1 := a.take(3, 2)
	r2, p2, h2 := a.take(2, 1)
	if len(r1) != 3 || cap(r1) != 3 || len(p1) != 3 || cap(p1) != 3 || len(h1) != 2 || cap(h1) != 2 {
		t.Fatalf("first take: lengths %d %d %d, capacities %d %d %d", len(r1), len(p1), len(h1), cap(r1), cap(p1), cap(h1))
	}
	p2[0] = &r2[0]
	h2[0] = Header{Key: "second"}
	p1 = append(p1, &r1[0])
	_ = append(h1, Header{Key: "appended"})
	if p2[0] != &r2[0] || h2[0].Key != "second" || len(p1) != 4 {
		t.Fatal("appending to the first batch wrote into the second")
	}
	first := &a.recs[0]
	a.reset()
	if len(a.recs) != 0 || cap(a.recs) < 5 {
		t.Fatalf("reset arena: len %d cap %d", len(a.recs), cap(a.recs))
	}
	r3, _, _ := a.take(4, 0)
	if &r3[0] != first {
		t.Fatal("a reset arena did not hand its memory out again")
	}
	if r3[0].Value != nil || r3[0].Headers != nil {
		t.Fatal("a reset arena kept the last poll's references")
	}
	big, ptrs, _ := a.take(1000, 0)
	if len(big) != 1000 || len(ptrs) != 1000 || &r3[0] != first {
		t.Fatal("growing the arena moved the batches already made")
	}
	a.reset() // no more than arenaKeep records: kept
	if cap(a.recs) < 1000 {
		t.Fatal("a small arena let its memory go")
	}
	a.take(arenaKeep+1, 0)
	a.reset()
	a.take(10, 0)
	a.reset() // a tenth of a large array: let go
	if a.recs != nil || a.ptrs != nil {
		t.Fatalf("an arena of %d records used for 10 kept its memory", cap(a.recs))
	}
	var none *batchArena
	rs, ps, hs := none.take(2, 0)
	if len(rs) != 2 || len(ps) != 2 || hs != nil {
		t.Fatalf("nil arena: %d records, %d pointers, headers %v", len(rs), len(ps), hs)
	}
	none.reset()
}

// TestBatchArenaTrim: an arena that a burst grew, whose polls then use
// less than a quarter of it, lets its arrays go after shrinkAfter, however
// small they are (down to arenaFloor), and a large poll meanwhile keeps
// them.
func TestBatchArenaTrim(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	a := new(batchArena)
	poll := func(n int, at time.Time) {
		a.trim(at)
		a.reset()
		a.take(n, 0)
	}
	poll(arenaKeep, t0) // a burst's poll: kept by reset
	poll(3, t0.Add(time.Millisecond))
	poll(3, t0.Add(shrinkAfter/2))
	if cap(a.recs) < arenaKeep {
		t.Fatalf("arena let its %d records go before shrinkAfter", arenaKeep)
	}
	poll(arenaKeep/2, t0.Add(shrinkAfter-time.Millisecond)) // a large poll: kept
	poll(3, t0.Add(shrinkAfter+time.Millisecond))
	if cap(a.recs) < arenaKeep {
		t.Fatal("arena let its memory go within shrinkAfter of a poll that used half of it")
	}
	poll(3, t0.Add(2*shrinkAfter))
	poll(3, t0.Add(3*shrinkAfter+time.Millisecond))
	if cap(a.recs) >= arenaKeep {
		t.Fatalf("arena kept %d records for polls of 3 for more than shrinkAfter", cap(a.recs))
	}
	if len(a.recs) != 3 {
		t.Fatalf("trimmed arena took %d records, want 3", len(a.recs))
	}
	// At most arenaFloor: kept whatever the polls use.
	for i := range 10 {
		poll(1, t0.Add(time.Duration(4+i)*shrinkAfter))
	}
	if c := cap(a.recs); c == 0 || c > arenaFloor {
		t.Fatalf("small arena: capacity %d", c)
	}
	first := &a.recs[0]
	poll(1, t0.Add(20*shrinkAfter))
	if &a.recs[0] != first {
		t.Fatal("an arena of at most arenaFloor records let its memory go")
	}
	// A poll counts every batch it took: three of 200 use more than a
	// quarter of 2,048.
	b := new(batchArena)
	b.take(2048, 0)
	for i := range 4 {
		b.trim(t0.Add(time.Duration(i) * shrinkAfter))
		b.reset()
		for range 3 {
			b.take(200, 0)
		}
	}
	if cap(b.recs) < 2048 {
		t.Fatalf("arena of 2,048 records used for 600 per poll let its memory go (capacity %d)", cap(b.recs))
	}
	var none *batchArena
	none.trim(t0)
}

// TestKgoRecordsPool: the pool hands out slices with room enough, keeps a
// bounded number, and drops huge ones.
func TestKgoRecordsPool(t *testing.T) {
	p := &kgoRecords{}
	s := p.GetRecords(10)
	if cap(s) < 10 {
		t.Fatalf("GetRecords(10) has capacity %d", cap(s))
	}
	p.PutRecords(s[:cap(s)])
	if got := p.GetRecords(5); cap(got) != cap(s) || &got[:1][0] != &s[:1][0] {
		t.Fatal("a returned slice was not handed out again")
	}
	if got := p.GetRecords(100); cap(got) < 100 {
		t.Fatalf("GetRecords(100) has capacity %d", cap(got))
	}
	p.PutRecords(make([]kgo.Record, kgoRecordsMaxLen+1))
	if len(p.free) != 0 {
		t.Fatal("a huge slice was kept")
	}
	for range kgoRecordsKept + 5 {
		p.PutRecords(make([]kgo.Record, 1))
	}
	if len(p.free) != kgoRecordsKept {
		t.Fatalf("kept %d slices, want %d", len(p.free), kgoRecordsKept)
	}
}

// TestProduceAllRelease: Pendings released and made again by later calls
// of other sizes report every record's own partition and offset, and a
// Pending that is not done is not taken back.
func TestProduceAllRelease(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	next := map[int32]int64{}
	for round, n := range []int{5, 1, 12, 3, 12, 0, 7} {
		rs := make([]*Record, n)
		for i := range rs {
			p := int32(i % 4)
			rs[i] = &Record{Topic: TopicDeliveries, Partition: p, Value: fmt.Appendf(nil, "%d-%d", round, i)}
		}
		pd, err := c.ProduceAll(ctx, rs...)
		if err != nil {
			t.Fatal(err)
		}
		if err := pd.Wait(ctx); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for i, r := range rs {
			if r.Partition != int32(i%4) || r.Offset != next[r.Partition] {
				t.Fatalf("round %d record %d: partition %d offset %d, want %d %d", round, i, r.Partition, r.Offset, i%4, next[int32(i%4)])
			}
			next[r.Partition]++
		}
		pd.Release()
		for i, r := range rs {
			if r == nil {
				t.Fatalf("round %d: Release emptied the caller's slice at %d", round, i)
			}
		}
	}
	// A Pending not done yet is not taken back: its records are in flight.
	notDone := &Pending{rs: []*Record{{}}}
	notDone.sw.done = make(chan struct{})
	notDone.Release()
	if notDone.rs == nil {
		t.Fatal("Release took back a Pending that is not done")
	}

	var total int
	for _, n := range next {
		total += int(n)
	}
	recs := consumeN(t, c, ConsumeConfig{Topic: TopicDeliveries, Partitions: []int32{0, 1, 2, 3}}, total)
	for _, r := range recs {
		if !bytes.Contains(r.Value, []byte("-")) {
			t.Fatalf("record %d/%d: %q", r.Partition, r.Offset, r.Value)
		}
	}
}

// TestRecordTimestampIsTheEvents: a record filled from an envelope carries
// the envelope's timestamp into the log (franz-go does not read the clock
// for it); one without a timestamp gets the time it was produced.
func TestRecordTimestampIsTheEvents(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	at := time.Date(2026, 11, 23, 12, 0, 0, 123456000, time.UTC)
	stamped := NewRecord(TopicDeliveries, nil, 0, &eventspb.Envelope{Tenant: "t", TimestampUs: at.UnixMicro()})
	if !stamped.Timestamp.Equal(at) {
		t.Fatalf("filled record's timestamp %v, want the envelope's %v", stamped.Timestamp, at)
	}
	before := time.Now().Add(-time.Second)
	bare := NewRecord(TopicDeliveries, nil, 0, &eventspb.Envelope{Tenant: "t"})
	if err := c.ProduceSync(ctx, stamped, bare); err != nil {
		t.Fatal(err)
	}
	recs := consumeN(t, c, ConsumeConfig{Topic: TopicDeliveries, Partitions: []int32{0}}, 2)
	if want := at.Truncate(time.Millisecond); !recs[0].Timestamp.Equal(want) { // Kafka keeps milliseconds
		t.Errorf("consumed timestamp %v, want the event's %v", recs[0].Timestamp, want)
	}
	if recs[1].Timestamp.Before(before) {
		t.Errorf("a record without an event time has timestamp %v, before it was produced", recs[1].Timestamp)
	}
}
