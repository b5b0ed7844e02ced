package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
)

func TestConsumeGroupStartOffsets(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	// 10 records in each of the 16 partitions of deliveries.
	var rs []*Record
	for p := range int32(16) {
		for i := range 10 {
			rs = append(rs, &Record{Topic: TopicDeliveries, Partition: p, Value: fmt.Appendf(nil, "%d-%d", p, i)})
		}
	}
	if err := c.ProduceSync(ctx, rs...); err != nil {
		t.Fatal(err)
	}
	// The service stored "consumed up to offset p" for partition p (so it
	// starts at p+1); partition 15 starts at the end, partition 0 at the
	// beginning.
	start := func(p int32) int64 {
		switch p {
		case 0:
			return StartAtBeginning
		case 15:
			return StartAtEnd
		}
		return int64(p%10) + 1
	}
	want := 0
	for p := range int32(16) {
		switch off := start(p); off {
		case StartAtBeginning:
			want += 10
		case StartAtEnd:
		default:
			want += 10 - int(off)
		}
	}
	var (
		events   []string
		assigned []int32
		revoked  []int32
		got      []*Record
		firstOff = map[int32]int64{}
	)
	cctx, ccancel := context.WithTimeout(ctx, testTimeout)
	defer ccancel()
	err := c.Consume(cctx, ConsumeConfig{
		Topic: TopicDeliveries,
		Group: "test-group",
		Start: start,
		OnAssigned: func(_ context.Context, ps []int32) {
			events = append(events, "assigned")
			assigned = append(assigned, ps...)
		},
		OnRevoked: func(_ context.Context, ps []int32) {
			events = append(events, "revoked")
			revoked = append(revoked, ps...)
		},
	}, func(_ context.Context, b Batch) error {
		if len(events) == 0 || events[len(events)-1] != "assigned" && events[len(events)-1] != "batch" {
			t.Errorf("batch of %d before its partition was assigned (events %v)", b.Partition, events)
		}
		events = append(events, "batch")
		if _, ok := firstOff[b.Partition]; !ok {
			firstOff[b.Partition] = b.Records[0].Offset
		}
		got = append(got, b.Records...)
		if len(got) >= want {
			ccancel()
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Consume: %v", err)
	}
	if len(got) != want {
		t.Fatalf("consumed %d records, want %d", len(got), want)
	}
	for p, off := range firstOff {
		wantOff := start(p)
		if wantOff == StartAtBeginning {
			wantOff = 0
		}
		if off != wantOff {
			t.Errorf("partition %d started at offset %d, want %d", p, off, wantOff)
		}
	}
	if _, ok := firstOff[15]; ok {
		t.Error("partition 15 (start at end) delivered records")
	}
	slices.Sort(assigned)
	slices.Sort(revoked)
	if !slices.Equal(assigned, allPartitions(16)) || !slices.Equal(revoked, allPartitions(16)) {
		t.Errorf("assigned %v, revoked %v, want all 16 partitions each", assigned, revoked)
	}
	if events[len(events)-1] != "revoked" {
		t.Errorf("last event %q, want revoked", events[len(events)-1])
	}
	// Nothing was committed: the group has no offsets.
	offs, err := c.adm.FetchOffsets(ctx, "test-group")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(offs); n != 0 {
		t.Errorf("the group committed offsets for %d topics", n)
	}
}

// TestConsumePolls checks that a poll's batches come in one call, each
// partition at most once and in offset order, and that every record
// arrives exactly once.
func TestConsumePolls(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	const perPartition = 50
	parts := []int32{0, 1, 2, 3}
	var recs []*Record
	for i := range perPartition {
		for _, p := range parts {
			recs = append(recs, &Record{Topic: TopicDeliveries, Partition: p, Value: []byte{byte(i)}})
		}
	}
	if err := c.ProduceSync(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	next := map[int32]int64{}
	got, multi := 0, false
	err := c.ConsumePolls(cctx, ConsumeConfig{Topic: TopicDeliveries, Partitions: parts}, func(_ context.Context, bs []Batch) error {
		seen := map[int32]bool{}
		for _, b := range bs {
			if seen[b.Partition] {
				return fmt.Errorf("partition %d twice in one poll", b.Partition)
			}
			seen[b.Partition] = true
			if len(b.Records) == 0 {
				return fmt.Errorf("empty batch of partition %d", b.Partition)
			}
			for _, r := range b.Records {
				if r.Offset != next[b.Partition] {
					return fmt.Errorf("partition %d: offset %d, want %d", b.Partition, r.Offset, next[b.Partition])
				}
				next[b.Partition]++
				got++
			}
		}
		multi = multi || len(bs) > 1
		if got == len(recs) {
			stop()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got != len(recs) {
		t.Fatalf("consumed %d records, want %d", got, len(recs))
	}
	if !multi {
		t.Error("no poll carried more than one partition: records already in the log should come together")
	}
}

func TestConsumeHandlerError(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := c.ProduceSync(ctx, &Record{Topic: TopicDeliveries, Partition: 3, Value: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	var assigned, revoked []int32
	err := c.Consume(ctx, ConsumeConfig{
		Topic:      TopicDeliveries,
		Partitions: []int32{3, 1},
		OnAssigned: func(_ context.Context, ps []int32) { assigned = ps },
		OnRevoked:  func(_ context.Context, ps []int32) { revoked = ps },
	}, func(context.Context, Batch) error { return boom })
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "consume shoal.deliveries: partition 3 at offset 0") {
		t.Fatalf("Consume = %v, want boom wrapped with where", err)
	}
	if !slices.Equal(assigned, []int32{3, 1}) || !slices.Equal(revoked, []int32{3, 1}) {
		t.Errorf("assigned %v, revoked %v", assigned, revoked)
	}
	for _, bad := range []ConsumeConfig{
		{Topic: TopicDeliveries},
		{Topic: TopicDeliveries, Group: "g", Partitions: []int32{1}},
		{Topic: TopicDeliveries, Partitions: []int32{16}},
		{Topic: TopicDeliveries, Partitions: []int32{1, 1}},
		{Topic: "", Partitions: []int32{1}},
	} {
		if err := c.Consume(ctx, bad, func(context.Context, Batch) error { return nil }); err == nil {
			t.Errorf("Consume(%+v) accepted", bad)
		}
	}
}

// Two members of a group: the partitions are divided, a member never gets a
// batch of a partition it does not own, and OnRevoked comes after the last
// batch of a revoked partition.
func TestConsumeGroupRebalance(t *testing.T) {
	if testing.Short() {
		t.Skip("a rebalance takes a few seconds")
	}
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	type member struct {
		mu       sync.Mutex
		owned    map[int32]bool
		batches  int
		violated []string
		records  int
	}
	run := func(m *member, mctx context.Context) chan error {
		m.owned = map[int32]bool{}
		errc := make(chan error, 1)
		go func() {
			errc <- c.Consume(mctx, ConsumeConfig{
				Topic: TopicDeliveries, Group: "rebalance",
				OnAssigned: func(_ context.Context, ps []int32) {
					m.mu.Lock()
					defer m.mu.Unlock()
					for _, p := range ps {
						m.owned[p] = true
					}
				},
				OnRevoked: func(_ context.Context, ps []int32) {
					m.mu.Lock()
					defer m.mu.Unlock()
					for _, p := range ps {
						delete(m.owned, p)
					}
				},
			}, func(_ context.Context, b Batch) error {
				m.mu.Lock()
				defer m.mu.Unlock()
				if !m.owned[b.Partition] {
					m.violated = append(m.violated, fmt.Sprintf("batch of partition %d not owned", b.Partition))
				}
				m.batches++
				m.records += len(b.Records)
				return nil
			})
		}()
		return errc
	}
	ownedOf := func(m *member) []int32 {
		m.mu.Lock()
		defer m.mu.Unlock()
		var ps []int32
		for p := range m.owned {
			ps = append(ps, p)
		}
		slices.Sort(ps)
		return ps
	}
	// Keep producing to every partition while the group changes.
	pctx, pstop := context.WithCancel(ctx)
	var produced atomic.Int64
	var pwg sync.WaitGroup
	pwg.Add(1)
	go func() {
		defer pwg.Done()
		for i := 0; pctx.Err() == nil; i++ {
			rs := make([]*Record, 16)
			for p := range rs {
				rs[p] = &Record{Topic: TopicDeliveries, Partition: int32(p), Value: fmt.Appendf(nil, "%d", i)}
			}
			if err := c.ProduceSync(pctx, rs...); err != nil {
				return
			}
			produced.Add(16)
			time.Sleep(5 * time.Millisecond) // real time: a steady stream through the rebalances, not a flood
		}
	}()

	var a, b member
	actx, astop := context.WithCancel(ctx)
	defer astop()
	aerr := run(&a, actx)
	eventually.Before(t, ctx, "a owns 16 partitions", func() bool { return len(ownedOf(&a)) == 16 })
	bctx, bstop := context.WithCancel(ctx)
	defer bstop()
	berr := run(&b, bctx)
	eventually.Before(t, ctx, "a and b share the partitions", func() bool {
		pa, pb := ownedOf(&a), ownedOf(&b)
		return len(pa) > 0 && len(pb) > 0 && len(pa)+len(pb) == 16
	})
	eventually.Before(t, ctx, "b consumes", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.records > 0
	})
	pa, pb := ownedOf(&a), ownedOf(&b)
	for _, p := range pa {
		if slices.Contains(pb, p) {
			t.Errorf("partition %d owned by both members", p)
		}
	}
	pstop()
	pwg.Wait()
	astop()
	bstop()
	for _, errc := range []chan error{aerr, berr} {
		if err := <-errc; err != nil {
			t.Errorf("Consume: %v", err)
		}
	}
	for name, m := range map[string]*member{"a": &a, "b": &b} {
		if len(m.violated) > 0 {
			t.Errorf("member %s: %v", name, m.violated)
		}
		if len(m.owned) != 0 {
			t.Errorf("member %s still owns %v after Consume returned", name, m.owned)
		}
	}
	if b.records == 0 || a.records == 0 {
		t.Errorf("records: a %d, b %d (produced %d)", a.records, b.records, produced.Load())
	}
}
