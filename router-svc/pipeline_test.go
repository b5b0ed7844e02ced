package routersvc_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shoal-mqtt/shoal/compose/store/pebblestore"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
	"github.com/shoal-mqtt/shoal/kafka"
	routersvc "github.com/shoal-mqtt/shoal/router-svc"
	"github.com/shoal-mqtt/shoal/router-svc/storetest"
)

// The router applies polls ahead of the store (router.max_polls_in_flight)
// and stores offsets that moved without a state change only every
// router.offset_interval; these tests pin both down against the embedded
// backbone.

// gatedStore is the Pebble store whose writes wait until open is called.
type gatedStore struct {
	*pebblestore.DB
	gate    chan struct{}
	waiting atomic.Int64 // writes that have arrived at the gate
}

func newGatedStore(db *pebblestore.DB) *gatedStore {
	return &gatedStore{DB: db, gate: make(chan struct{})}
}

func (s *gatedStore) open() { close(s.gate) }

func (s *gatedStore) pass(ctx context.Context) error {
	s.waiting.Add(1)
	select {
	case <-s.gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *gatedStore) ApplyShard(ctx context.Context, partition int32, m *routersvc.Mutations) error {
	if err := s.pass(ctx); err != nil {
		return err
	}
	return s.DB.ApplyShard(ctx, partition, m)
}

func (s *gatedStore) ApplyShards(ctx context.Context, ms []routersvc.ShardMutations) error {
	if err := s.pass(ctx); err != nil {
		return err
	}
	return s.DB.ApplyShards(ctx, ms)
}

// storedOffset returns the offset stored for partition.
func (b *backbone) storedOffset(p int32) int64 {
	b.t.Helper()
	snap, err := storetest.Load(b.t.Context(), b.db, p)
	if err != nil {
		b.t.Fatal(err)
	}
	return snap.Offset
}

// A subscription change is stored at once, with every offset before it;
// publishes alone are stored within the interval, and when the router
// stops. It runs in a synctest bubble, the embedded backbone too: the
// interval passes on the bubble's clock.
func TestRouterOffsetInterval(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end with the embedded backbone: skipped with -short")
	}
	synctest.Test(t, testRouterOffsetInterval)
}

func testRouterOffsetInterval(t *testing.T) {
	b := newBackbone(t)
	p := kafka.PartitionForKey([]byte("t/a/b"), b.parts)
	last := map[int32]int64{}
	b.produce(last, add("t", "c1", "a/b", slot(0)))
	cfg := e2eConfig("")
	cfg.OffsetInterval = time.Hour
	_, stop := b.runRouter(cfg)
	eventually.True(t, e2eTimeout, "the subscription stored", func() bool { return b.storedOffset(p) == last[p] })
	subscribed := last[p]

	b.produce(last, pub("t", "pub", "a/b"), pub("t", "pub", "a/b"))
	got, next := b.deliveries(map[int32]int64{}, 2, 100*time.Millisecond)
	diffDeliveries(t, "publishes", []dlv{D(0, "t", "a/b", T("c1", 2, false)), D(0, "t", "a/b", T("c1", 2, false))}, got)
	if off := b.storedOffset(p); off != subscribed {
		t.Errorf("after two publishes the stored offset is %d, want %d (the subscription's) for an hour", off, subscribed)
	}

	b.produce(last, add("t", "c2", "a/b", slot(1)))
	eventually.True(t, e2eTimeout, "the second subscription stored, with the publishes before it", func() bool { return b.storedOffset(p) == last[p] })

	b.produce(last, pub("t", "pub", "a/b"))
	got, _ = b.deliveries(next, 2, 100*time.Millisecond)
	diffDeliveries(t, "a publish to both", []dlv{D(0, "t", "a/b", T("c1", 2, false)), D(1, "t", "a/b", T("c2", 2, false))}, got)
	stop()
	if off := b.storedOffset(p); off != last[p] {
		t.Errorf("after the stop the stored offset is %d, want %d (the last publish's)", off, last[p])
	}

	// With a short interval the publishes' offset is stored while running:
	// the first publish's at once, the next one's once the interval has
	// passed since.
	cfg.OffsetInterval = time.Second
	_, stop = b.runRouter(cfg)
	defer stop()
	b.produce(last, pub("t", "pub", "a/b"))
	eventually.True(t, e2eTimeout, "the first publish's offset stored", func() bool { return b.storedOffset(p) == last[p] })
	stored := last[p]
	b.produce(last, pub("t", "pub", "a/b"))
	time.Sleep(cfg.OffsetInterval / 2) // on the bubble's clock: the router handles the publish meanwhile
	if off := b.storedOffset(p); off != stored {
		t.Errorf("half the interval after a store the stored offset is %d, want %d still", off, stored)
	}
	time.Sleep(cfg.OffsetInterval / 2) // on the bubble's clock: the interval has passed
	b.produce(last, pub("t", "pub", "a/b"))
	eventually.True(t, e2eTimeout, "the offset of publishes stored after the interval", func() bool { return b.storedOffset(p) == last[p] })
}

// While the store does not answer, the router keeps applying and
// delivering up to router.max_polls_in_flight polls; with 1 it waits for
// each poll's store write.
func TestRouterDeliversAheadOfTheStore(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end with the embedded backbone: skipped with -short")
	}
	for _, inFlight := range []int{16, 1} {
		t.Run(map[int]string{16: "pipelined", 1: "one poll at a time"}[inFlight], func(t *testing.T) {
			b := newBackbone(t)
			gs := newGatedStore(b.db)
			cfg := e2eConfig("")
			cfg.OffsetInterval = 0
			cfg.MaxPollsInFlight = inFlight
			rr := b.runRouterWith(cfg, gs)
			last := map[int32]int64{}
			b.produce(last, add("t", "c1", "a/b", slot(0)))
			eventually.True(t, e2eTimeout, "the subscription's store write", func() bool { return gs.waiting.Load() > 0 })
			b.produce(last, pub("t", "pub", "a/b"))
			want := []dlv{D(0, "t", "a/b", T("c1", 2, false))}
			if inFlight > 1 {
				got, _ := b.deliveries(map[int32]int64{}, 1, 0)
				diffDeliveries(t, "while the store waits", want, got)
			} else {
				ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
				n := b.countDeliveries(ctx)
				cancel()
				if n != 0 {
					t.Fatalf("%d deliveries while the store waits, want none: one poll in flight", n)
				}
			}
			p := kafka.PartitionForKey([]byte("t/a/b"), b.parts)
			if off := b.storedOffset(p); off != -1 {
				t.Errorf("stored offset %d while the store waits", off)
			}
			gs.open()
			eventually.True(t, e2eTimeout, "everything stored", func() bool { return b.storedOffset(p) == last[p] })
			got, _ := b.deliveries(map[int32]int64{}, 1, 100*time.Millisecond)
			diffDeliveries(t, "after the store answered", want, got)
			if err := rr.stop(); err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
}

// countDeliveries counts the records in shoal.deliveries until ctx ends.
func (b *backbone) countDeliveries(ctx context.Context) int {
	b.t.Helper()
	parts := make([]int32, b.parts)
	for i := range parts {
		parts[i] = int32(i)
	}
	var n atomic.Int64
	err := b.client.Consume(ctx, kafka.ConsumeConfig{Topic: kafka.TopicDeliveries, Partitions: parts},
		func(_ context.Context, batch kafka.Batch) error {
			n.Add(int64(len(batch.Records)))
			return nil
		})
	if err != nil {
		b.t.Fatal(err)
	}
	return int(n.Load())
}

// A delivery Kafka refuses for good (larger than a batch may be) stops the
// router with the error, the shard's offset stored before the publish: a
// restart replays it. Retrying could never succeed, and producing the next
// polls past it would break the order of deliveries.
func TestRouterStopsOnRefusedDelivery(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end with the embedded backbone: skipped with -short")
	}
	b := newBackbone(t)
	last := map[int32]int64{}
	// 100 subscribers with long client ids make the delivery about
	// 25 KB larger than the publish, which just fits in a batch.
	long := strings.Repeat("x", 200)
	var subs []string
	for i := range 100 {
		c := long + string(rune('A'+i%26)) + string(rune('a'+i/26))
		subs = append(subs, c)
		b.produce(last, add("t", c, "big", slot(0)))
	}
	cfg := e2eConfig("")
	cfg.OffsetInterval = 0
	cfg.MaxTargetsPerDelivery = len(subs)
	rr := b.runRouterWith(cfg, b.db)
	p := kafka.PartitionForKey([]byte("t/big"), b.parts)
	eventually.True(t, e2eTimeout, "the subscriptions stored", func() bool { return b.storedOffset(p) == last[p] })
	subscribed := last[p]
	b.produce(last, pub("t", "pub", "big", payload(strings.Repeat("p", 980_000))))
	select {
	case <-rr.done:
	case <-time.After(e2eTimeout):
		t.Fatal("the router kept running after Kafka refused a delivery")
	}
	if rr.err == nil || !strings.Contains(rr.err.Error(), "produce deliveries") {
		t.Errorf("Run = %v, want the failed produce of deliveries", rr.err)
	}
	if off := b.storedOffset(p); off != subscribed {
		t.Errorf("stored offset %d, want %d (before the refused publish)", off, subscribed)
	}
}
