package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
)

// plainClient is a franz-go client of e that owes nothing to Client.
func plainClient(t *testing.T, e *Embedded, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cfg := e.ClientConfig(Config{})
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.Dialer(cfg.Dial), kgo.SASL(saslMechanism(*cfg.SASL)), kgo.SeedBrokers(cfg.Brokers...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// readCommitted reads topic from its start with a read_committed consumer
// until it holds at least want records and nothing more came for half a
// second (or the test timeout), and returns their values.
func readCommitted(t *testing.T, e *Embedded, topic string, want int) []string {
	t.Helper()
	cl := plainClient(t, e, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var got []string
	for {
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := cl.PollFetches(pctx)
		pcancel()
		n := len(got)
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		switch {
		case ctx.Err() != nil:
			t.Fatalf("read %d committed records of %s, want %d", len(got), topic, want)
		case len(got) == n && len(got) >= want:
			return got
		}
	}
}

// TestTransactExactlyOnce copies a topic through Transact while the
// handler fails once in the middle of a poll (after producing part of it)
// and a second session takes over from the first: a read_committed
// consumer of the output sees every input record exactly once, in order
// per key.
func TestTransactExactlyOnce(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	adm := kadm.NewClient(c.cl)
	if _, err := adm.CreateTopic(ctx, 4, 1, nil, "tx.in"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "tx.out"); err != nil {
		t.Fatal(err)
	}
	const n = 400
	in := plainClient(t, e)
	for i := range n {
		r := &kgo.Record{Topic: "tx.in", Key: []byte(strconv.Itoa(i % 7)), Value: []byte(strconv.Itoa(i))}
		if err := in.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var copied atomic.Int64
	var failOnce atomic.Bool
	copyTopic := func(ctx context.Context) error {
		return c.Transact(ctx, TransactConfig{Topic: "tx.in", Group: "tx-copy", TransactionalID: "tx-copy-0", MaxPollRecords: 50},
			func(_ context.Context, bs []Batch, tx *Tx) error {
				for _, b := range bs {
					for i, r := range b.Records {
						tx.Produce(&Record{Topic: "tx.out", Key: r.Key, Value: r.Value})
						if i == len(b.Records)/2 && copied.Load() > n/3 && !failOnce.Swap(true) {
							return errors.New("handler fails halfway through a poll")
						}
					}
					copied.Add(int64(len(b.Records)))
				}
				return nil
			})
	}
	if err := copyTopic(ctx); err == nil || err.Error() != "handler fails halfway through a poll" {
		t.Fatalf("Transact returned %v, want the handler's error", err)
	}
	rctx, rcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- copyTopic(rctx) }()
	got := readCommitted(t, e, "tx.out", n)
	rcancel()
	if err := <-done; err != nil {
		t.Fatalf("Transact after the failure: %v", err)
	}
	seen := make(map[string]int)
	last := make(map[int]int)
	for _, v := range got {
		seen[v]++
		i, _ := strconv.Atoi(v)
		if prev, ok := last[i%7]; ok && prev > i {
			t.Errorf("key %d: %d after %d", i%7, i, prev)
		}
		last[i%7] = i
	}
	for i := range n {
		if seen[strconv.Itoa(i)] != 1 {
			t.Errorf("record %d seen %d times by a read_committed consumer, want once", i, seen[strconv.Itoa(i)])
		}
	}
	if len(got) != n {
		t.Fatalf("%d records, want %d", len(got), n)
	}
}

// TestReadCommitted: what committed transactions wrote, up to the end of
// the log, and nothing of an aborted one; the read ends though the last
// offsets are transaction markers.
func TestReadCommitted(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := kadm.NewClient(c.cl).CreateTopic(ctx, 2, 1, nil, "rc.state"); err != nil {
		t.Fatal(err)
	}
	if err := c.ReadCommitted(ctx, "rc.state", 0, func(*Record) error { return errors.New("a record of an empty partition") }); err != nil {
		t.Fatalf("empty partition: %v", err)
	}
	tp := plainClient(t, e, kgo.TransactionalID("rc-writer"), kgo.DefaultProduceTopic("rc.state"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for round, commit := range []bool{true, false, true} {
		if err := tp.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			r := &kgo.Record{Partition: 0, Value: []byte(strconv.Itoa(10*round + i))}
			if err := tp.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := tp.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	// A transaction left open at the end, as a crashed writer leaves it
	// (the embedded backbone aborts such a one at its restart without a
	// marker): its records are not read, and the read still ends.
	if err := tp.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tp.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := c.ReadCommitted(ctx, "rc.state", 0, func(r *Record) error {
		got = append(got, string(r.Value))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"0", "1", "2", "20", "21", "22"}; !slices.Equal(got, want) {
		t.Fatalf("read %q, want %q", got, want)
	}
}

// TestTransactAcross copies a topic of one cluster to another, where a
// transaction cannot hold the source's offsets: two members share the
// partitions, the handler fails once halfway through a poll, and one
// member leaves in the middle, so that the other takes its partitions
// over from the offsets kept on the target. A read_committed consumer of
// the output sees every record once, in order per key, and the offsets
// topic holds each partition's next offset.
func TestTransactAcross(t *testing.T) {
	src, dst := startEmbedded(t, t.TempDir()), startEmbedded(t, t.TempDir())
	c, target := newTestClient(t, src, Config{}), newTestClient(t, dst, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := kadm.NewClient(c.cl).CreateTopic(ctx, 4, 1, nil, "x.in"); err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(target.cl).CreateTopic(ctx, 2, 1, nil, "x.out"); err != nil {
		t.Fatal(err)
	}
	if err := target.EnsureSpecs(ctx, OffsetsSpec("x.offsets", 2, 1)); err != nil {
		t.Fatal(err)
	}
	const n = 600
	in := plainClient(t, src)
	for i := range n {
		r := &kgo.Record{Topic: "x.in", Key: []byte(strconv.Itoa(i % 7)), Value: []byte(strconv.Itoa(i))}
		if err := in.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var copied atomic.Int64
	var failOnce atomic.Bool
	copyTopic := func(ctx context.Context, member string) error {
		return c.Transact(ctx, TransactConfig{Topic: "x.in", Group: "x-copy", TransactionalID: "x-copy", MaxPollRecords: 20,
			Target: target, OffsetsTopic: "x.offsets", OffsetsPartitions: 2},
			func(_ context.Context, bs []Batch, tx *Tx) error {
				for _, b := range bs {
					for i, r := range b.Records {
						tx.Produce(&Record{Topic: "x.out", Key: r.Key, Value: r.Value})
						if i == len(b.Records)/2 && copied.Load() > n/4 && !failOnce.Swap(true) {
							return errors.New("handler fails halfway through a poll")
						}
					}
					copied.Add(int64(len(b.Records)))
					time.Sleep(time.Millisecond) // so that the members overlap
				}
				return nil
			})
	}
	if err := copyTopic(ctx, "a"); err == nil || err.Error() != "handler fails halfway through a poll" {
		t.Fatalf("Transact returned %v, want the handler's error", err)
	}
	actx, acancel := context.WithCancel(ctx)
	bctx, bcancel := context.WithCancel(ctx)
	adone, bdone := make(chan error, 1), make(chan error, 1)
	go func() { adone <- copyTopic(actx, "a") }()
	go func() { bdone <- copyTopic(bctx, "b") }()
	eventually.Before(t, ctx, "half the records copied", func() bool { return copied.Load() >= n/2 })
	acancel() // a leaves; b takes its partitions from the target's offsets
	if err := <-adone; err != nil {
		t.Fatalf("member a: %v", err)
	}
	got := readCommitted(t, dst, "x.out", n)
	bcancel()
	if err := <-bdone; err != nil {
		t.Fatalf("member b: %v", err)
	}
	seen := make(map[string]int)
	last := make(map[int]int)
	for _, v := range got {
		seen[v]++
		i, _ := strconv.Atoi(v)
		if prev, ok := last[i%7]; ok && prev > i {
			t.Errorf("key %d: %d after %d", i%7, i, prev)
		}
		last[i%7] = i
	}
	for i := range n {
		if seen[strconv.Itoa(i)] != 1 {
			t.Errorf("record %d seen %d times by a read_committed consumer, want once", i, seen[strconv.Itoa(i)])
		}
	}
	if len(got) != n {
		t.Fatalf("%d records, want %d", len(got), n)
	}
	next := map[string]int64{}
	for p := range int32(2) {
		if err := target.ReadCommitted(ctx, "x.offsets", p, func(r *Record) error {
			next[string(r.Key)] = int64(binary.BigEndian.Uint64(r.Value))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	ends, err := kadm.NewClient(c.cl).ListEndOffsets(ctx, "x.in")
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if k := "x-copy/x.in/" + strconv.Itoa(int(o.Partition)); next[k] != o.Offset {
			t.Errorf("offsets topic: %s = %d, want the partition's end %d", k, next[k], o.Offset)
		}
	})
}

// TestRelayResumesFromCommitted: Relay commits a poll's offsets once its
// handler returned, so a handler error (its poll not committed) and a new
// session resume where the last committed poll ended: every record is
// handled at least once, and the ones before the failed poll once.
func TestRelayResumesFromCommitted(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := kadm.NewClient(c.cl).CreateTopic(ctx, 1, 1, nil, "relay.in"); err != nil {
		t.Fatal(err)
	}
	in := plainClient(t, e)
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			if err := in.ProduceSync(ctx, &kgo.Record{Topic: "relay.in", Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(0, 10)
	var mu sync.Mutex
	seen := map[string]int{}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}
	failAt := "15"
	run := func(ctx context.Context) error {
		return c.Relay(ctx, RelayConfig{Topic: "relay.in", Group: "relay", MaxPollRecords: 5}, func(_ context.Context, bs []Batch) error {
			mu.Lock()
			defer mu.Unlock()
			for _, b := range bs {
				for _, r := range b.Records {
					if string(r.Value) == failAt {
						failAt = ""
						return errors.New("handler fails")
					}
					seen[string(r.Value)]++
				}
			}
			return nil
		})
	}
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	eventually.True(t, testTimeout, "the first ten", func() bool { return count() == 10 })
	produce(10, 20)
	if err := <-done; err == nil || err.Error() != "handler fails" {
		t.Fatalf("Relay returned %v, want the handler's error", err)
	}
	rctx, rcancel := context.WithCancel(ctx)
	go func() { done <- run(rctx) }()
	eventually.True(t, testTimeout, "all twenty", func() bool { return count() == 20 })
	rcancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if n := seen[strconv.Itoa(i)]; n != 1 {
			t.Errorf("record %d, committed before the failure, handled %d times", i, n)
		}
	}
}
