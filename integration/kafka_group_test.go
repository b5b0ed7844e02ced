//go:build integration

package integration

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
	"github.com/shoal-mqtt/shoal/kafka"
)

// readLog reads topic from the start up to its end offsets with a plain
// franz-go consumer, independent of the code under test. ends nil means
// the end offsets now.
func readLog(t *testing.T, ctx context.Context, kc kafkaServer, topic string, ends map[int32]int64) []*kgo.Record {
	t.Helper()
	_, adm := newAdmin(t, kc)
	if ends == nil {
		listed, err := adm.ListEndOffsets(ctx, topic)
		if err != nil || listed.Error() != nil {
			t.Fatalf("end offsets of %s: %v %v", topic, err, listed.Error())
		}
		ends = map[int32]int64{}
		listed.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	}
	want := 0
	parts := map[int32]kgo.Offset{}
	for p, end := range ends {
		want += int(end)
		parts[p] = kgo.NewOffset().AtStart()
	}
	cl, _ := newAdmin(t, kc, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}))
	var out []*kgo.Record
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %s: %d of %d records: %v", topic, len(out), want, err)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Logf("read %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < ends[r.Partition] {
				out = append(out, r)
			}
		})
	}
	return out
}

// groupLog is a consumer group's shared view store (the next offset of
// each partition, written by whichever member handles it) and a record of
// who owned what, to check the guarantees of ConsumeConfig in group mode.
type groupLog struct {
	mu         sync.Mutex
	next       map[int32]int64  // the next offset each partition is to be handled at
	owner      map[int32]string // member that owns the partition, per the callbacks
	handled    map[string]int   // records per member
	starts     map[string]int   // Start calls per member
	violations []string
}

func newGroupLog() *groupLog {
	return &groupLog{next: map[int32]int64{}, owner: map[int32]string{}, handled: map[string]int{}, starts: map[string]int{}}
}

func (g *groupLog) violate(format string, args ...any) {
	if len(g.violations) < 50 {
		g.violations = append(g.violations, fmt.Sprintf(format, args...))
	}
}

// config returns the ConsumeConfig of member name: Start resumes at the
// stored next offset, the callbacks keep the ownership map, and the
// handler checks that every record is the next one of its partition
// (none skipped, none repeated) and stores the new next offset before it
// returns, as Shoal's services store their offsets with their views.
func (g *groupLog) config(topic, group, name string) (kafka.ConsumeConfig, func(context.Context, kafka.Batch) error) {
	cfg := kafka.ConsumeConfig{
		Topic: topic,
		Group: group,
		Start: func(p int32) int64 {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.starts[name]++
			if g.owner[p] != name {
				g.violate("%s: Start(%d) while %q owns it", name, p, g.owner[p])
			}
			if n, ok := g.next[p]; ok {
				return n
			}
			return kafka.StartAtBeginning
		},
		OnAssigned: func(_ context.Context, ps []int32) {
			g.mu.Lock()
			defer g.mu.Unlock()
			for _, p := range ps {
				if o := g.owner[p]; o != "" {
					g.violate("%s: assigned %d while %s owns it", name, p, o)
				}
				g.owner[p] = name
			}
		},
		OnRevoked: func(_ context.Context, ps []int32) {
			g.mu.Lock()
			defer g.mu.Unlock()
			for _, p := range ps {
				if o := g.owner[p]; o != name {
					g.violate("%s: revoked %d, owned by %q", name, p, o)
				}
				delete(g.owner, p)
			}
		},
	}
	handle := func(_ context.Context, b kafka.Batch) error {
		g.mu.Lock()
		defer g.mu.Unlock()
		if o := g.owner[b.Partition]; o != name {
			g.violate("%s: batch of %d, owned by %q", name, b.Partition, o)
		}
		for _, r := range b.Records {
			if want := g.next[b.Partition]; r.Offset != want {
				g.violate("%s: partition %d: handled offset %d, next to handle was %d", name, b.Partition, r.Offset, want)
			}
			g.next[b.Partition] = r.Offset + 1
		}
		g.handled[name] += len(b.Records)
		return nil
	}
	return cfg, handle
}

func (g *groupLog) owned(name string) []int32 {
	g.mu.Lock()
	defer g.mu.Unlock()
	var ps []int32
	for p, o := range g.owner {
		if o == name {
			ps = append(ps, p)
		}
	}
	slices.Sort(ps)
	return ps
}

// caughtUp reports whether every partition has been handled up to ends.
func (g *groupLog) caughtUp(ends map[int32]int64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for p, end := range ends {
		if g.next[p] != end {
			return false
		}
	}
	return true
}

// member runs Consume for one group member until its context ends.
type member struct {
	name   string
	cancel context.CancelFunc
	errc   chan error
}

func startMember(ctx context.Context, c *kafka.Client, g *groupLog, topic, group, name string) *member {
	mctx, cancel := context.WithCancel(ctx)
	m := &member{name: name, cancel: cancel, errc: make(chan error, 1)}
	cfg, handle := g.config(topic, group, name)
	go func() { m.errc <- c.Consume(mctx, cfg, handle) }()
	return m
}

// stop makes the member leave the group and waits until Consume returned.
func (m *member) stop(t *testing.T) {
	t.Helper()
	m.cancel()
	select {
	case err := <-m.errc:
		if err != nil {
			t.Errorf("member %s: Consume: %v", m.name, err)
		}
	case <-time.After(kafkaTestTimeout):
		t.Fatalf("member %s: Consume did not return", m.name)
	}
}

// producer keeps producing numbered records to every partition of a topic,
// with Produce and callbacks, until stopped or max records.
type producer struct {
	c      *kafka.Client
	topic  string
	parts  int32
	max    int
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	outcomes []outcome // by sequence number
	acked    atomic.Int64
	failed   atomic.Int64
	called   atomic.Int64 // done callbacks run
}

type outcome struct {
	done      bool
	err       error
	partition int32
	offset    int64
}

// startProducer starts producing; every pace it produces burst records.
// Produce waits for buffer room at most roomWait, then fails the record.
func startProducer(ctx context.Context, c *kafka.Client, topic string, parts int32, max, burst int, pace, roomWait time.Duration) *producer {
	pctx, cancel := context.WithCancel(ctx)
	pr := &producer{c: c, topic: topic, parts: parts, max: max, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(pr.done)
		tick := time.NewTicker(pace)
		defer tick.Stop()
		for seq := 0; seq < max; {
			select {
			case <-pctx.Done():
				return
			case <-tick.C:
			}
			for end := min(seq+burst, max); seq < end && pctx.Err() == nil; seq++ {
				pr.mu.Lock()
				pr.outcomes = append(pr.outcomes, outcome{})
				pr.mu.Unlock()
				r := &kafka.Record{Topic: topic, Partition: int32(seq) % parts, Value: []byte(strconv.Itoa(seq))}
				// Not pctx: stopping the producer must not fail
				// the record being produced.
				rctx, rcancel := context.WithTimeout(context.Background(), roomWait)
				c.Produce(rctx, r, pr.callback(seq))
				rcancel()
			}
		}
	}()
	return pr
}

func (pr *producer) callback(seq int) func(*kafka.Record, error) {
	return func(r *kafka.Record, err error) {
		pr.mu.Lock()
		o := &pr.outcomes[seq]
		if o.done {
			pr.mu.Unlock()
			panic(fmt.Sprintf("record %d: done called twice", seq))
		}
		*o = outcome{done: true, err: err, partition: r.Partition, offset: r.Offset}
		pr.mu.Unlock()
		if err != nil {
			pr.failed.Add(1)
		} else {
			pr.acked.Add(1)
		}
		pr.called.Add(1)
	}
}

// stop stops producing and waits for the outcome of every record given to
// Produce.
func (pr *producer) stop(t *testing.T, ctx context.Context) []outcome {
	t.Helper()
	pr.cancel()
	<-pr.done
	if err := pr.c.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	for seq, o := range pr.outcomes {
		if !o.done {
			t.Fatalf("record %d of %d: no outcome after Flush", seq, len(pr.outcomes))
		}
	}
	return slices.Clone(pr.outcomes)
}

// Two members of a group divide the partitions, each partition owned by
// exactly one; when one leaves, the other takes all its partitions and
// every record is handled exactly once.
//
// ConsumeConfig's contract makes that exact, not at-least-once: OnRevoked
// runs on the old owner after the last batch of the partition it handed
// out, before the group gives the partition to another member (the
// cooperative protocol revokes in one rebalance and assigns in the next);
// Start runs on the new owner after OnAssigned and returns the offset the
// old owner stored. Records fetched but not handed out are dropped at the
// revocation and fetched again by the new owner from that offset. A
// record can be handled twice only when the handler's work and its stored
// offset are not atomic and a member dies between the two, or a member
// that stops heartbeating is expelled while still handling (Kafka fences
// nothing without committed offsets); neither happens here.
func TestKafkaConsumerGroup(t *testing.T) {
	kc := kafkaCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), kafkaTestTimeout)
	defer cancel()
	const parts = 8
	cat := testCatalogue(t, parts)
	c := newKafkaClient(t, kc, kafka.Config{Catalogue: cat}, nil)
	if err := c.EnsureTopics(ctx); err != nil {
		t.Fatal(err)
	}
	topic, group := cat.Deliveries.Name, cat.Deliveries.Name+".group"

	// Records are written before, during and after the handover.
	pr := startProducer(ctx, c, topic, parts, 1_000_000, 40, 5*time.Millisecond, kafkaTestTimeout)
	g := newGroupLog()
	a := startMember(ctx, c, g, topic, group, "a")
	eventually.Before(t, ctx, "a owns every partition", func() bool { return len(g.owned("a")) == parts })
	eventually.Before(t, ctx, "a handles records", func() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.handled["a"] > 0 })

	b := startMember(ctx, c, g, topic, group, "b")
	eventually.Before(t, ctx, "a and b share the partitions", func() bool {
		pa, pb := g.owned("a"), g.owned("b")
		return len(pa) > 0 && len(pb) > 0 && len(pa)+len(pb) == parts
	})
	pa, pb := g.owned("a"), g.owned("b")
	t.Logf("shared: a owns %v, b owns %v", pa, pb)
	eventually.Before(t, ctx, "b handles records", func() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.handled["b"] > 0 })

	handover := time.Now()
	a.stop(t)
	if ps := g.owned("a"); len(ps) != 0 {
		t.Errorf("a still owns %v after leaving", ps)
	}
	eventually.Before(t, ctx, "b owns every partition", func() bool { return len(g.owned("b")) == parts })
	t.Logf("b owned every partition %s after a began to leave", time.Since(handover).Round(time.Millisecond))
	atHandover := pr.acked.Load()
	eventually.Before(t, ctx, "more records after the handover", func() bool { return pr.acked.Load() > atHandover+2000 })

	outcomes := pr.stop(t, ctx)
	for seq, o := range outcomes {
		if o.err != nil {
			t.Fatalf("record %d: %v", seq, o.err)
		}
	}
	ends, err := c.EndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, e := range ends {
		total += e
	}
	if total != int64(len(outcomes)) {
		t.Fatalf("end offsets %v add up to %d, %d records were acknowledged", ends, total, len(outcomes))
	}
	eventually.Before(t, ctx, "b catches up with the end offsets", func() bool { return g.caughtUp(ends) })
	b.stop(t)

	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.violations) > 0 {
		t.Errorf("violations:\n%s", strings.Join(g.violations, "\n"))
	}
	if len(g.owner) != 0 {
		t.Errorf("partitions still owned after both left: %v", g.owner)
	}
	// Every record handled once: the handler checked each offset was the
	// next of its partition, and the counts add up.
	if n := g.handled["a"] + g.handled["b"]; int64(n) != total {
		t.Errorf("handled %d records (a %d, b %d), produced %d", n, g.handled["a"], g.handled["b"], total)
	}
	t.Logf("%d records: a handled %d, b %d; Start called %d times on a, %d on b", total, g.handled["a"], g.handled["b"], g.starts["a"], g.starts["b"])
}
