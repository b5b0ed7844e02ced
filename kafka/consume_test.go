package kafka

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// EndOffsets lists every partition's next offset: 0 for an empty one, the
// number of records written otherwise; a consumer that read up to it has
// caught up.
func TestEndOffsets(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	got, err := c.EndOffsets(ctx, TopicDeliveries)
	if err != nil {
		t.Fatalf("EndOffsets of an empty topic: %v", err)
	}
	want := map[int32]int64{}
	for p := range int32(16) {
		want[p] = 0
	}
	if !maps.Equal(got, want) {
		t.Fatalf("EndOffsets of an empty topic = %v, want %v", got, want)
	}

	// Partition p gets p records, partition 15 none.
	var rs []*Record
	for p := range int32(15) {
		for i := range p {
			rs = append(rs, &Record{Topic: TopicDeliveries, Partition: p, Value: fmt.Appendf(nil, "%d-%d", p, i)})
		}
		want[p] = int64(p)
	}
	if err := c.ProduceSync(ctx, rs...); err != nil {
		t.Fatal(err)
	}
	if got, err = c.EndOffsets(ctx, TopicDeliveries); err != nil {
		t.Fatal(err)
	} else if !maps.Equal(got, want) {
		t.Fatalf("EndOffsets = %v, want %v", got, want)
	}

	// Consuming up to the end offsets reads exactly what was written.
	var total int64
	for _, o := range got {
		total += o
	}
	recs := consumeN(t, c, ConsumeConfig{Topic: TopicDeliveries, Partitions: allPartitions(16)}, int(total))
	last := map[int32]int64{}
	for _, r := range recs {
		last[r.Partition] = max(last[r.Partition], r.Offset+1)
	}
	for p, end := range got {
		if last[p] != end {
			t.Errorf("partition %d: consumed up to %d, end offset %d", p, last[p], end)
		}
	}

	if _, err := c.EndOffsets(ctx, "no.such.topic"); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("EndOffsets of a missing topic: %v, want UnknownTopicOrPartition", err)
	}
}

// In explicit mode, as in group mode, OnAssigned comes before Start (so it
// can load what Start returns), and OnRevoked after the last batch.
func TestConsumeExplicitCallbackOrder(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := c.ProduceSync(ctx, &Record{Topic: TopicDeliveries, Partition: 2, Value: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	var events []string
	cctx, ccancel := context.WithCancel(ctx)
	defer ccancel()
	err := c.Consume(cctx, ConsumeConfig{
		Topic:      TopicDeliveries,
		Partitions: []int32{2, 5},
		OnAssigned: func(_ context.Context, ps []int32) { events = append(events, fmt.Sprint("assigned ", ps)) },
		Start: func(p int32) int64 {
			events = append(events, fmt.Sprint("start ", p))
			return StartAtBeginning
		},
		OnRevoked: func(_ context.Context, ps []int32) { events = append(events, fmt.Sprint("revoked ", ps)) },
	}, func(_ context.Context, b Batch) error {
		events = append(events, fmt.Sprint("batch ", b.Partition))
		ccancel()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"assigned [2 5]", "start 2", "start 5", "batch 2", "revoked [2 5]"}
	if !slices.Equal(events, want) {
		t.Errorf("events %q, want %q", events, want)
	}
}
