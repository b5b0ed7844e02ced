package kafka

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/schemas/eventspb"
	"github.com/twmb/franz-go/pkg/kadm"
)

// The partition the producer chose for every keyed record is the one
// PartitionForKey computes, for many keys.
func TestPartitionForKeyMatchesProduce(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	const n = 2000
	rs := make([]*Record, n)
	for i := range rs {
		rs[i] = &Record{Topic: TopicSessions, Key: fmt.Appendf(nil, "tenant-%d/client-%d", i%13, i), Partition: PartitionByKey, Value: []byte("v")}
	}
	if err := c.ProduceSync(ctx, rs...); err != nil {
		t.Fatal(err)
	}
	used := map[int32]bool{}
	for _, r := range rs {
		if want := PartitionForKey(r.Key, c.Partitions(TopicSessions)); r.Partition != want {
			t.Fatalf("key %q went to partition %d, PartitionForKey says %d", r.Key, r.Partition, want)
		}
		used[r.Partition] = true
	}
	if len(used) != 16 {
		t.Errorf("%d keys used %d partitions of 16", n, len(used))
	}
	// And the broker agrees: consume them back.
	got := consumeN(t, c, ConsumeConfig{Topic: TopicSessions, Partitions: allPartitions(16)}, n)
	for _, r := range got {
		if want := PartitionForKey(r.Key, 16); r.Partition != want {
			t.Fatalf("consumed key %q from partition %d, PartitionForKey says %d", r.Key, r.Partition, want)
		}
	}
}

// A keyed topic's record with a partition ≥ 0 goes there (a broadcast), one
// with PartitionByKey where its key hashes.
func TestKeyedTopicExplicitPartition(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	key := []byte("acme/sensors/+/temp")
	env := testEnvelopes()[EventSubscriptionChange]
	var rs []*Record
	for p := range c.Partitions(TopicMessages) {
		rs = append(rs, NewRecord(TopicMessages, key, p, env))
	}
	byKey := NewRecord(TopicMessages, key, PartitionByKey, env)
	rs = append(rs, byKey)
	if err := c.ProduceSync(ctx, rs...); err != nil {
		t.Fatal(err)
	}
	for p, r := range rs[:16] {
		if r.Partition != int32(p) || r.Offset != 0 {
			t.Errorf("broadcast record %d went to %d@%d", p, r.Partition, r.Offset)
		}
	}
	if want := PartitionForKey(key, 16); byKey.Partition != want || byKey.Offset != 1 {
		t.Errorf("keyed record went to %d@%d, want %d@1", byKey.Partition, byKey.Offset, want)
	}
}

func TestProduceRefusals(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	tests := []struct {
		r    *Record
		want string
	}{
		{&Record{Topic: TopicMessages, Value: []byte("x")}, "keyed and the record has no key"},
		{&Record{Topic: TopicDeliveries, Partition: 16, Value: []byte("x")}, "partition 16 is outside [0, 16)"},
		{&Record{Topic: TopicDeliveries, Partition: -1, Value: []byte("x")}, "partition -1 is outside"},
		{&Record{Value: []byte("x")}, "no topic"},
	}
	for _, tt := range tests {
		errc := make(chan error, 2)
		c.Produce(ctx, tt.r, func(_ *Record, err error) { errc <- err })
		select {
		case err := <-errc:
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Produce(%+v): %v, want %q", tt.r, err, tt.want)
			}
		case <-ctx.Done():
			t.Fatal("done was not called")
		}
		good := &Record{Topic: TopicDeliveries, Value: []byte("ok")}
		if err := c.ProduceSync(ctx, good, tt.r); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ProduceSync(%+v): %v, want %q", tt.r, err, tt.want)
		}
	}
	// Nothing reached deliveries: ProduceSync refused before producing.
	ends, err := c.adm.ListEndOffsets(ctx, TopicDeliveries)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset != 0 {
			t.Errorf("deliveries/%d has end offset %d", o.Partition, o.Offset)
		}
	})
}

func TestProduceSyncContext(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{})

	// Already cancelled: refused, nothing written.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := NewRecord(TopicMessages, []byte("k"), PartitionByKey, testEnvelopes()[EventPublish])
	if err := c.ProduceSync(ctx, r); !errors.Is(err, context.Canceled) {
		t.Fatalf("ProduceSync(cancelled) = %v, want context.Canceled", err)
	}
	errc := make(chan error, 1)
	c.Produce(ctx, r, func(_ *Record, err error) { errc <- err })
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Produce(cancelled) done(%v), want context.Canceled", err)
	}

	// The broker goes away: ProduceSync returns when its context ends.
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	r = NewRecord(TopicMessages, []byte("k"), PartitionByKey, testEnvelopes()[EventPublish])
	if err := c.ProduceSync(ctx, r); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ProduceSync(broker down) = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("ProduceSync took %s after its deadline", d)
	}
	// Close fails what is still buffered.
	errc = make(chan error, 1)
	c.Produce(context.Background(), NewRecord(TopicMessages, []byte("k"), PartitionByKey, testEnvelopes()[EventPublish]),
		func(_ *Record, err error) { errc <- err })
	c.Close()
	select {
	case err := <-errc:
		if err == nil {
			t.Error("a record buffered at Close succeeded")
		}
	case <-time.After(testTimeout):
		t.Fatal("Close did not fail the buffered record")
	}
}

// ProduceAll returns before the records are acknowledged; its Pending
// says when they are, and they are written in order.
func TestProduceAll(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{})
	ctx := context.Background()
	var rs []*Record
	for i := range 20 {
		env := testEnvelopes()[EventPublish]
		env.MessageId = &eventspb.MessageID{Seq: uint64(i + 1)}
		rs = append(rs, NewRecord(TopicDeliveries, nil, 2, env))
	}
	first, err := c.ProduceAll(ctx, rs[:10]...)
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.ProduceAll(ctx, rs[10:]...)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-second.Done():
	case <-time.After(testTimeout):
		t.Fatal("the second call's records were not acknowledged")
	}
	if err := second.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := first.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if r.Partition != 2 || r.Offset != int64(i) {
			t.Errorf("record %d at %d/%d, want 2/%d (in call order)", i, r.Partition, r.Offset, i)
		}
	}
	got := consumeN(t, c, ConsumeConfig{Topic: TopicDeliveries, Partitions: []int32{2}}, len(rs))
	env := &eventspb.Envelope{}
	for i, r := range got {
		if err := DecodeEnvelope(r, env); err != nil || env.GetMessageId().GetSeq() != uint64(i+1) {
			t.Errorf("record %d: message seq %d, %v; want %d", i, env.GetMessageId().GetSeq(), err, i+1)
		}
	}

	// Nothing to produce: done at once. A refused record or a done
	// context: nothing produced.
	none, err := c.ProduceAll(ctx)
	if err != nil || none.Wait(ctx) != nil {
		t.Errorf("ProduceAll() = %v", err)
	}
	if _, err := c.ProduceAll(ctx, NewRecord(TopicDeliveries, nil, 999, env)); err == nil {
		t.Error("ProduceAll of a record to partition 999: no error")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.ProduceAll(cctx, NewRecord(TopicDeliveries, nil, 2, env)); !errors.Is(err, context.Canceled) {
		t.Errorf("ProduceAll(cancelled) = %v, want context.Canceled", err)
	}
	// Wait ends with its context while the records cannot be written.
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	p, err := c.ProduceAll(ctx, NewRecord(TopicDeliveries, nil, 2, env))
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer wcancel()
	if err := p.Wait(wctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait with the broker gone = %v, want context.DeadlineExceeded", err)
	}
}

// Records accepted beyond MaxBufferedRecords wait; the wait ends with ctx.
func TestProduceWaitsForBufferRoom(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{MaxBufferedRecords: 2})
	if err := e.Close(); err != nil { // nothing is acknowledged any more
		t.Fatal(err)
	}
	var failed atomic.Int32
	for range 2 {
		c.Produce(context.Background(), NewRecord(TopicDeliveries, nil, 0, testEnvelopes()[EventKick]),
			func(_ *Record, err error) {
				if err != nil {
					failed.Add(1)
				}
			})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	errc := make(chan error, 1)
	start := time.Now()
	c.Produce(ctx, NewRecord(TopicDeliveries, nil, 0, testEnvelopes()[EventKick]), func(_ *Record, err error) { errc <- err })
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("the third Produce returned after %s, want it to wait for room until ctx ended", d)
	}
	if err := <-errc; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("third record: %v, want context.DeadlineExceeded", err)
	}
	c.Close()
	if failed.Load() != 2 {
		t.Errorf("%d of the 2 buffered records failed at Close", failed.Load())
	}
}

func TestProduceOutsideCatalogueAndAfterClose(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := c.adm.CreateTopic(ctx, 3, 1, nil, "other"); err != nil {
		t.Fatal(err)
	}
	keyed := &Record{Topic: "other", Key: []byte("some key"), Partition: PartitionByKey, Value: []byte("a")}
	manual := &Record{Topic: "other", Partition: 2, Value: []byte("b")}
	if err := c.ProduceSync(ctx, keyed, manual); err != nil {
		t.Fatal(err)
	}
	if want := PartitionForKey(keyed.Key, 3); keyed.Partition != want {
		t.Errorf("keyed record outside the catalogue went to %d, want %d", keyed.Partition, want)
	}
	if manual.Partition != 2 {
		t.Errorf("unkeyed record outside the catalogue went to %d, want 2", manual.Partition)
	}
	if c.Partitions("other") != 0 {
		t.Errorf("Partitions(other) = %d", c.Partitions("other"))
	}

	c.Close()
	errc := make(chan error, 1)
	c.Produce(ctx, &Record{Topic: TopicDeliveries, Value: []byte("late")}, func(_ *Record, err error) { errc <- err })
	select {
	case err := <-errc:
		if err == nil {
			t.Error("Produce after Close succeeded")
		}
	case <-ctx.Done():
		t.Fatal("Produce after Close never called done")
	}
	if err := c.ProduceSync(ctx, &Record{Topic: TopicDeliveries, Value: []byte("late")}); err == nil {
		t.Error("ProduceSync after Close succeeded")
	}
}
