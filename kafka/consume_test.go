package kafka

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
	"github.com/shoal-mqtt/shoal/internal/testutil/testlog"
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

// A member the coordinator no longer knows (UNKNOWN_MEMBER_ID: a broker
// paused past the group's session, a coordinator that moved) loses its
// partitions and joins again; Consume goes on instead of ending the role.
func TestConsumeGroupSessionLostRejoins(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	var refused atomic.Bool
	cluster.ControlKey(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if refused.Swap(true) {
			return nil, nil, false
		}
		hb, ok := req.(*kmsg.HeartbeatRequest)
		if !ok {
			return nil, nil, false
		}
		resp, ok := hb.ResponseKind().(*kmsg.HeartbeatResponse)
		if !ok {
			return nil, nil, false
		}
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp, nil, true
	})
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	c, err := NewClient(ctx, Config{Brokers: cluster.ListenAddrs(), GroupSessionTimeout: 6 * time.Second}, testlog.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	pcl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pcl.Close)
	produce := func(from, n int) {
		for i := from; i < from+n; i++ {
			if err := pcl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(0, 10)
	var mu sync.Mutex
	seen := map[string]bool{}
	var assigned, revoked int
	cctx, ccancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		errc <- c.Consume(cctx, ConsumeConfig{Topic: "t", Group: "g",
			OnAssigned: func(context.Context, []int32) { mu.Lock(); assigned++; mu.Unlock() },
			OnRevoked:  func(context.Context, []int32) { mu.Lock(); revoked++; mu.Unlock() },
		}, func(_ context.Context, b Batch) error {
			mu.Lock()
			defer mu.Unlock()
			for _, r := range b.Records {
				seen[string(r.Value)] = true
			}
			return nil
		})
	}()
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(seen) }
	eventually.True(t, testTimeout, "the first records", func() bool { return count() == 10 })
	eventually.True(t, testTimeout, "the refused heartbeat", refused.Load)
	produce(10, 10)
	eventually.True(t, testTimeout, "the records after the member joined again", func() bool { return count() == 20 })
	ccancel()
	if err := <-errc; err != nil {
		t.Fatalf("Consume ended with %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if assigned < 2 || revoked < 1 {
		t.Errorf("assigned %d times, revoked %d: want the partitions lost and given back", assigned, revoked)
	}
}
