package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
)

// TestFeedSettled: a tracked partition is settled only once its local
// consumer has noted the log's end, and then only while everything the
// process's clients produced to it (taken by Produce and not acknowledged
// yet, or acknowledged and not applied yet) is applied. Records marked
// HeaderExpress do not count, and reach a consumer with SkipExpressed
// without their value.
func TestFeedSettled(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{ClientID: "a"})
	lingering := newTestClient(t, e, Config{ClientID: "b", Linger: time.Minute})
	const topic, part = TopicMessages, int32(2)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	c.TrackOrder(topic)
	rec := func(value string, hdrs ...Header) *Record {
		return &Record{Topic: topic, Partition: part, Key: []byte("k"), Value: []byte(value), Headers: hdrs}
	}
	if err := c.ProduceSync(ctx, rec("before")); err != nil {
		t.Fatal(err)
	}
	if c.Settled(topic, part, 100) {
		t.Fatal("settled before a local consumer noted the log's end")
	}

	type got struct {
		offset  int64
		value   string
		express bool
	}
	gotc := make(chan got, 10)
	errc := make(chan error, 1)
	go func() {
		errc <- c.Consume(ctx, ConsumeConfig{Topic: topic, Partitions: []int32{part}, Local: true, SkipExpressed: true},
			func(_ context.Context, bt Batch) error {
				for _, r := range bt.Records {
					gotc <- got{r.Offset, string(r.Value), r.Expressed()}
				}
				return nil
			})
	}()
	next := func(want got) {
		t.Helper()
		select {
		case g := <-gotc:
			if g != want {
				t.Fatalf("consumed %+v, want %+v", g, want)
			}
		case err := <-errc:
			t.Fatalf("consumer stopped: %v", err)
		case <-ctx.Done():
			t.Fatalf("%+v not consumed", want)
		}
	}
	next(got{0, "before", false})
	if c.Settled(topic, part, -1) {
		t.Fatal("settled with offset 0, in the log before the consumer started, not applied")
	}
	if !c.Settled(topic, part, 0) {
		t.Fatal("not settled with everything applied")
	}

	lingering.Produce(ctx, rec("lingering"), nil)
	if c.Settled(topic, part, 0) {
		t.Fatal("settled with a record taken by Produce and not acknowledged")
	}
	if err := lingering.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if c.Settled(topic, part, 0) {
		t.Fatal("settled with offset 1 acknowledged and not applied")
	}
	next(got{1, "lingering", false})
	if !c.Settled(topic, part, 1) {
		t.Fatal("not settled with offset 1 applied")
	}

	if err := c.ProduceSync(ctx, rec("routed", Header{Key: HeaderExpress, Value: ExpressMark})); err != nil {
		t.Fatal(err)
	}
	if !c.Settled(topic, part, 1) {
		t.Fatal("an express record counts")
	}
	next(got{2, "", true})

	if c.Settled(topic, part+1, 100) {
		t.Fatal("a partition without a local consumer is settled")
	}
	if c.Settled(TopicDeliveries, part, 100) {
		t.Fatal("a topic not tracked is settled")
	}
}

// roomRecs returns n records for partition part of shoal.messages, with
// hdrs.
func roomRecs(part int32, n int, hdrs ...Header) []*Record {
	rs := make([]*Record, n)
	for i := range rs {
		rs[i] = &Record{Topic: TopicMessages, Partition: part, Key: []byte("k"), Value: []byte("v"), Headers: hdrs}
	}
	return rs
}

// holdFirstBatch runs a consumer of cfg on c whose handler holds its first
// batch until release is closed, calls write (records for it to read), and
// returns once that batch is being held. The consumer stops with ctx.
func holdFirstBatch(t *testing.T, ctx context.Context, c *Client, cfg ConsumeConfig, write func()) (release chan struct{}) {
	t.Helper()
	release, first := make(chan struct{}), make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		once := true
		errc <- c.Consume(ctx, cfg, func(context.Context, Batch) error {
			if once {
				once = false
				close(first)
				<-release
			}
			return nil
		})
	}()
	write()
	select {
	case <-first:
	case err := <-errc:
		t.Fatalf("consumer stopped: %v", err)
	case <-ctx.Done():
		t.Fatal("nothing consumed")
	}
	return release
}

// roomClient starts an embedded broker and a client of it that tracks
// shoal.messages (the room tests' partition is 1), with a context that
// ends with the test or after testTimeout.
func roomClient(t *testing.T) (*Embedded, *Client, context.Context) {
	t.Helper()
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	c.TrackOrder(TopicMessages)
	return e, c, ctx
}

// TestFeedRoom: a tracked partition has room until FeedMaxBacklog records
// of the process's clients are on their way: written (expressed ones too)
// and not handed out by its local consumer, or given to Produce and not
// acknowledged; it has room again once the consumer has taken them. A
// partition without a started consumer, and a topic not tracked, always
// have room.
func TestFeedRoom(t *testing.T) {
	e, c, ctx := roomClient(t)
	const topic, part = TopicMessages, int32(1)
	if err := c.ProduceSync(ctx, roomRecs(part, FeedMaxBacklog)...); err != nil {
		t.Fatal(err)
	}
	if !c.Room(topic, part) {
		t.Fatal("no room before a local consumer started")
	}

	// A consumer whose handler holds its first batch until release.
	release := holdFirstBatch(t, ctx, c, ConsumeConfig{Topic: topic, Partitions: []int32{part}, Local: true}, func() {})
	// The catch-up handed out what was written before: room.
	eventually.Before(t, ctx, "room once the catch-up is handed out", func() bool { return c.Room(topic, part) })

	// Written while the handler holds: FeedMaxBacklog of them, half
	// expressed, leave no room.
	if err := c.ProduceSync(ctx, roomRecs(part, FeedMaxBacklog/2)...); err != nil {
		t.Fatal(err)
	}
	if !c.Room(topic, part) {
		t.Fatal("no room with half the backlog")
	}
	if err := c.ProduceSync(ctx, roomRecs(part, FeedMaxBacklog/2, Header{Key: HeaderExpress, Value: ExpressMark})...); err != nil {
		t.Fatal(err)
	}
	if c.Room(topic, part) {
		t.Fatalf("room with %d records written and not handed out", FeedMaxBacklog)
	}
	if !c.Room(topic, part+1) || !c.Room(TopicDeliveries, part) {
		t.Fatal("no room on another partition, or on a topic not tracked")
	}
	close(release)
	eventually.Before(t, ctx, "room once the consumer took the backlog", func() bool { return c.Room(topic, part) })

	// Records given to Produce and not acknowledged count as well.
	lingering := newTestClient(t, e, Config{ClientID: "lingering", Linger: time.Minute})
	for _, r := range roomRecs(part, FeedMaxBacklog) {
		lingering.Produce(ctx, r, nil)
	}
	if c.Room(topic, part) {
		t.Fatalf("room with %d records given to Produce and not acknowledged", FeedMaxBacklog)
	}
	if err := lingering.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	eventually.Before(t, ctx, "room once the consumer took them", func() bool { return c.Room(topic, part) })
}

// TestFeedRoomFetching: with a fetching consumer of the partition (the
// router with tracing on: its consumers fetch), room follows what it has
// fetched as it follows a local consumer's hand-outs.
func TestFeedRoomFetching(t *testing.T) {
	_, c, ctx := roomClient(t)
	const topic, part = TopicMessages, int32(1)
	release := holdFirstBatch(t, ctx, c, ConsumeConfig{Topic: topic, Partitions: []int32{part}}, func() { // Local false: it fetches
		if err := c.ProduceSync(ctx, roomRecs(part, 1)...); err != nil {
			t.Error(err)
		}
	})
	if err := c.ProduceSync(ctx, roomRecs(part, FeedMaxBacklog)...); err != nil {
		t.Fatal(err)
	}
	if c.Room(topic, part) {
		t.Fatalf("room with %d records written and not fetched", FeedMaxBacklog)
	}
	close(release)
	eventually.Before(t, ctx, "room once the consumer fetched the backlog", func() bool { return c.Room(topic, part) })
}
