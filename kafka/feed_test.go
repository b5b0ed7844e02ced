package kafka

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
)

// TestLocalConsume: a local consumer (ConsumeConfig.Local on a client of
// the embedded backbone) hands out exactly what a fetch consumer reads —
// every record from its start offset, each once, in offset order — when
// the records come from the log before it starts (the catch-up), from two
// clients of the process at once (the feed, out of order between them),
// and from a client of "another process" that the feed never sees (filled
// from the log). A producer that reuses its record's bytes after the done
// callback does not change what the consumer got.
func TestLocalConsume(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	a := newTestClient(t, e, Config{ClientID: "a"})
	b := newTestClient(t, e, Config{ClientID: "b", Linger: time.Millisecond})
	foreignCfg := Config{ClientID: "foreign"}
	foreign := newTestClient(t, e, foreignCfg)
	foreign.cfg.Feed = nil // as if it were another process on the socket
	const topic, part = TopicDeliveries, int32(3)

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	produce := func(c *Client, value string) {
		t.Helper()
		buf := []byte(value)
		r := &Record{Topic: topic, Partition: part, Value: buf, Headers: []Header{{Key: "h", Value: []byte("v-" + value)}}}
		done := make(chan error, 1)
		c.Produce(ctx, r, func(_ *Record, err error) {
			for i := range buf {
				buf[i] = 'X' // the producer's bytes are its own again
			}
			done <- err
		})
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		produce(a, fmt.Sprintf("before-%d", i))
	}

	var mu sync.Mutex
	got := map[int64]string{}
	var order []int64
	consumed := make(chan struct{}, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- a.Consume(ctx, ConsumeConfig{Topic: topic, Partitions: []int32{part}, Local: true, Reuse: true,
			Start: func(int32) int64 { return 2 }},
			func(_ context.Context, bt Batch) error {
				mu.Lock()
				defer mu.Unlock()
				for _, r := range bt.Records {
					if _, dup := got[r.Offset]; dup {
						t.Errorf("offset %d handed out twice", r.Offset)
					}
					if len(r.Headers) != 1 || string(r.Headers[0].Value) != "v-"+string(r.Value) {
						t.Errorf("offset %d: headers %v for value %q", r.Offset, r.Headers, r.Value)
					}
					got[r.Offset] = string(r.Value)
					order = append(order, r.Offset)
				}
				select {
				case consumed <- struct{}{}:
				default:
				}
				return nil
			})
	}()
	waitFor := func(n int) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			mu.Lock()
			have := len(got)
			mu.Unlock()
			if have >= n {
				return
			}
			select {
			case <-consumed:
			case <-deadline:
				t.Fatalf("%d records consumed, want %d", have, n)
			}
		}
	}
	waitFor(3) // offsets 2, 3, 4: the catch-up

	handedBefore := e.feed.handed.Load()
	var wg sync.WaitGroup
	for _, c := range []*Client{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				produce(c, fmt.Sprintf("%s-%d", c.cfg.ClientID, i))
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 5 {
			produce(foreign, fmt.Sprintf("foreign-%d", i))
			time.Sleep(5 * time.Millisecond) // real time: spreads the foreign records among the clients' own, produced meanwhile
		}
	}()
	wg.Wait()
	produce(foreign, "foreign-last") // behind nothing: found by the idle check
	waitFor(3 + 200 + 6)
	if h := e.feed.handed.Load() - handedBefore; h < 200 {
		t.Errorf("%d records handed over by the feed, want the 200 the process's clients wrote", h)
	}

	// The same as a fetch consumer reads.
	want := consumeN(t, a, ConsumeConfig{Topic: topic, Partitions: []int32{part}, Start: func(int32) int64 { return 2 }}, 3+200+6)
	mu.Lock()
	defer mu.Unlock()
	for i, r := range want {
		if order[i] != r.Offset {
			t.Fatalf("record %d: offset %d, want %d", i, order[i], r.Offset)
		}
		if got[r.Offset] != string(r.Value) {
			t.Fatalf("offset %d: %q, want %q", r.Offset, got[r.Offset], r.Value)
		}
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// TestLocalConsumeWithoutFeed: without a feed (a distributed client) or with
// tracing, Local fetches as usual.
func TestLocalConsumeWithoutFeed(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{})
	c.cfg.Feed = nil
	r := &Record{Topic: TopicDeliveries, Partition: 0, Value: []byte("x")}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := c.ProduceSync(ctx, r); err != nil {
		t.Fatal(err)
	}
	recs := consumeN(t, c, ConsumeConfig{Topic: TopicDeliveries, Partitions: []int32{0}, Local: true}, 1)
	if string(recs[0].Value) != "x" {
		t.Fatalf("value %q", recs[0].Value)
	}
}

// TestFeedArraysLetABurstGo: the arrays a local consumer and its
// subscription grew under a burst (an inbox of up to feedMaxInbox
// records) are let go once their use falls below a quarter, and kept
// while a steady load fills them.
func TestFeedArraysLetABurstGo(t *testing.T) {
	burst := make([]Record, 2*arenaKeep)
	var k shrink
	t0 := time.Unix(1000, 0)
	if got := emptied(burst[:2*arenaKeep], &k, t0); cap(got) != 2*arenaKeep || len(got) != 0 {
		t.Errorf("emptied a full array to len %d cap %d, want it kept", len(got), cap(got))
	}
	if got := emptied(burst[:10], &k, t0); cap(got) != 2*arenaKeep {
		t.Fatal("a burst's array dropped at its first small use")
	}
	if got := emptied(burst[:10], &k, t0.Add(shrinkAfter-time.Millisecond)); cap(got) != 2*arenaKeep {
		t.Fatal("a burst's array dropped before shrinkAfter")
	}
	// A large use in between starts the count again.
	if got := emptied(burst[:arenaKeep], &k, t0.Add(shrinkAfter)); cap(got) != 2*arenaKeep {
		t.Errorf("a half-used array: cap %d, want it kept", cap(got))
	}
	_ = emptied(burst[:10], &k, t0.Add(shrinkAfter+time.Millisecond))
	if got := emptied(burst[:10], &k, t0.Add(2*shrinkAfter)); cap(got) != 2*arenaKeep {
		t.Fatal("dropped although a large use came within shrinkAfter")
	}
	if got := emptied(burst[:10], &k, t0.Add(3*shrinkAfter)); got != nil {
		t.Errorf("small uses for over shrinkAfter: cap %d, want nil", cap(got))
	}
	small := make([]Record, 10, feedKeep)
	for i := range 10 {
		if got := emptied(small, &k, t0.Add(time.Duration(i)*shrinkAfter)); cap(got) != feedKeep {
			t.Fatalf("emptied a small array to cap %d, want it kept", cap(got))
		}
	}
	// A moderate array too (a few hundred records) goes: only feedKeep
	// records are kept whatever the use.
	var km shrink
	moderate := make([]Record, 256)
	_ = emptied(moderate[:10], &km, t0)
	if got := emptied(moderate[:10], &km, t0.Add(shrinkAfter)); got != nil {
		t.Errorf("an array of %d records used by 10 for %v: kept (cap %d)", len(moderate), shrinkAfter, cap(got))
	}
	burst[0].Offset, burst[1].Offset = 7, 8
	_ = lean(burst[:2], &k, t0)
	got := lean(burst[:2], &k, t0.Add(shrinkAfter))
	if cap(got) > 4 || len(got) != 2 || got[0].Offset != 7 || got[1].Offset != 8 {
		t.Errorf("lean of a burst's array holding 2 records: len %d cap %d %v, want a small copy", len(got), cap(got), got)
	}
	// The subscription's inbox: a burst, then single records.
	s := newFeedSub()
	s.in = make([]Record, 3*arenaKeep)
	_ = s.take(nil, t0)
	for i := range 3 {
		s.in = append(s.in, Record{Offset: 1})
		if out := s.take(nil, t0.Add(time.Duration(i)*shrinkAfter)); len(out) != 1 {
			t.Fatalf("took %d records, want 1", len(out))
		}
	}
	if cap(s.in) > arenaKeep {
		t.Errorf("after a burst and single records for %v: inbox array cap %d", 2*shrinkAfter, cap(s.in))
	}

	// The copied bytes' chunks: kept while records come, let go after
	// shrinkAfter without any, the records taken keeping their bytes.
	kr := &kgo.Record{Value: []byte("v"), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("x")}}}
	t1 := t0.Add(10 * shrinkAfter)
	for i := range 3 {
		if !s.add(kr) {
			t.Fatal("add refused")
		}
		if out := s.take(nil, t1.Add(time.Duration(i)*shrinkAfter)); len(out) != 1 {
			t.Fatalf("took %d records, want 1", len(out))
		}
	}
	if s.bytes == nil || s.hdrs == nil {
		t.Fatal("a subscription with a record at every take let its chunks go")
	}
	if !s.add(kr) {
		t.Fatal("add refused")
	}
	held := s.take(nil, t1.Add(3*shrinkAfter))
	_ = s.take(nil, t1.Add(4*shrinkAfter))
	if s.bytes == nil || s.hdrs == nil {
		t.Fatal("chunks let go at the first empty take")
	}
	_ = s.take(nil, t1.Add(5*shrinkAfter-time.Millisecond))
	if s.bytes == nil {
		t.Fatal("chunks let go before shrinkAfter without records")
	}
	_ = s.take(nil, t1.Add(5*shrinkAfter))
	if s.bytes != nil || s.hdrs != nil {
		t.Errorf("after %v without records the subscription holds chunks of %d bytes and %d headers", shrinkAfter, cap(s.bytes), cap(s.hdrs))
	}
	if string(held[0].Value) != "v" || string(held[0].Headers[0].Value) != "x" {
		t.Errorf("a record taken before the chunks went reads %q, header %q", held[0].Value, held[0].Headers[0].Value)
	}
	if !s.add(kr) || len(s.take(nil, t1.Add(6*shrinkAfter))) != 1 || s.bytes == nil {
		t.Error("no new chunk for a record after the chunks went")
	}
}

// TestLocalConsumeSkipsHandedOff: with SkipHandedOff a local consumer gets
// a record marked HandoffEarly without its value (its headers, offset and
// mark intact) and every other record whole, late marks included.
func TestLocalConsumeSkipsHandedOff(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{ClientID: "a"})
	const topic, part = TopicDeliveries, int32(1)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	type got struct {
		value string
		kind  byte
	}
	gotc := make(chan got, 10)
	errc := make(chan error, 1)
	go func() {
		errc <- c.Consume(ctx, ConsumeConfig{Topic: topic, Partitions: []int32{part}, Local: true, SkipHandedOff: true,
			Start: func(int32) int64 { return StartAtEnd }},
			func(_ context.Context, bt Batch) error {
				for _, r := range bt.Records {
					_, kind, _ := ParseHandoffMark(r.Header(HeaderHandoff))
					gotc <- got{string(r.Value), kind}
				}
				return nil
			})
	}()
	// Once a first record came back the consumer is subscribed: what
	// follows comes through the feed (before, the catch-up would read it
	// from the log, whole).
	for {
		if err := c.ProduceSync(ctx, &Record{Topic: topic, Partition: part, Value: []byte("plain")}); err != nil {
			t.Fatal(err)
		}
		select {
		case g := <-gotc:
			if g != (got{"plain", 0}) {
				t.Fatalf("got %+v, want the plain record", g)
			}
		case <-time.After(100 * time.Millisecond):
			continue // produced before the consumer started: not handed out
		case <-ctx.Done():
			t.Fatal("consumer not started")
		}
		break
	}
	early, late := HandoffMark(7, HandoffEarly), HandoffMark(7, HandoffLate)
	for _, r := range []*Record{
		{Topic: topic, Partition: part, Value: []byte("plain")},
		{Topic: topic, Partition: part, Value: []byte("delivered"), Headers: []Header{{Key: HeaderHandoff, Value: early[:]}}},
		{Topic: topic, Partition: part, Value: []byte("left"), Headers: []Header{{Key: HeaderHandoff, Value: late[:]}}},
	} {
		if err := c.ProduceSync(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	wants := []got{{"", HandoffEarly}, {"left", HandoffLate}}
	for len(wants) > 0 {
		want := wants[0]
		select {
		case g := <-gotc:
			if g == (got{"plain", 0}) {
				continue // the plain record, or a late start-up one
			}
			wants = wants[1:]
			if g != want {
				t.Fatalf("got %+v, want %+v", g, want)
			}
		case err := <-errc:
			t.Fatalf("consumer stopped: %v", err)
		case <-ctx.Done():
			t.Fatal("records not handed out")
		}
	}
	if _, _, ok := ParseHandoffMark([]byte("not a mark")); ok {
		t.Error("ParseHandoffMark took a value of another length")
	}
	if run, kind, ok := ParseHandoffMark(late[:]); !ok || run != 7 || kind != HandoffLate {
		t.Errorf("ParseHandoffMark(late) = %d, %d, %v", run, kind, ok)
	}
}

// TestFeedSubSkippedRecordsCopyNothing: a record its consumer skips
// (SkipExpressed, SkipHandedOff) is handed out with no key or value and
// its mark alone of its headers, one copy of the mark shared by the
// records that carry the same: at a steady rate adding one allocates
// nothing.
func TestFeedSubSkippedRecordsCopyNothing(t *testing.T) {
	s := newFeedSub()
	s.skipExpress, s.skipEarly = true, true
	early := HandoffMark(7, HandoffEarly)
	other := HandoffMark(8, HandoffEarly)
	express := &kgo.Record{Key: []byte("k"), Value: []byte("v"), Headers: []kgo.RecordHeader{
		{Key: HeaderType, Value: []byte("publish")}, {Key: HeaderExpress, Value: ExpressMark},
	}}
	handed := func(mark []byte) *kgo.Record {
		return &kgo.Record{Value: []byte("d"), Headers: []kgo.RecordHeader{
			{Key: HeaderType, Value: []byte("delivery")}, {Key: HeaderHandoff, Value: mark},
		}}
	}
	now := time.Now()
	for _, kr := range []*kgo.Record{express, express, handed(early[:]), handed(early[:]), handed(other[:])} {
		if !s.add(kr) {
			t.Fatal("add refused")
		}
	}
	got := s.take(nil, now)
	if len(got) != 5 {
		t.Fatalf("took %d records, want 5", len(got))
	}
	for i, r := range got {
		if r.Key != nil || r.Value != nil || len(r.Headers) != 1 || cap(r.Headers) != 1 {
			t.Fatalf("record %d: key %q, value %q, headers %v (cap %d): want the mark alone", i, r.Key, r.Value, r.Headers, cap(r.Headers))
		}
	}
	if !got[0].Expressed() || !bytes.Equal(got[2].Header(HeaderHandoff), early[:]) || !bytes.Equal(got[4].Header(HeaderHandoff), other[:]) {
		t.Fatalf("marks: %v, %v, %v", got[0].Headers, got[2].Headers, got[4].Headers)
	}
	if &got[0].Headers[0] != &got[1].Headers[0] || &got[2].Headers[0] != &got[3].Headers[0] || &got[3].Headers[0] == &got[4].Headers[0] {
		t.Error("records with the same mark do not share it, or records with different marks do")
	}
	kr := handed(other[:])
	dst := make([]Record, 0, 4)
	if n := testing.AllocsPerRun(100, func() {
		s.add(kr)
		dst = s.take(dst[:0], now)
	}); n != 0 {
		t.Errorf("adding a skipped record allocates %.1f times", n)
	}
}

// warnCounter is a slog handler that counts the warnings whose message
// contains sub.
type warnCounter struct {
	sub string
	n   atomic.Int64
}

func (w *warnCounter) Enabled(context.Context, slog.Level) bool { return true }
func (w *warnCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn && strings.Contains(r.Message, w.sub) {
		w.n.Add(1)
	}
	return nil
}
func (w *warnCounter) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnCounter) WithGroup(string) slog.Handler      { return w }

// TestLocalConsumeTransactions: a transaction writes a partition a local
// consumer reads (the Kafka bridge's in mappings write shoal.messages so in
// shoal all). Its records reach the consumer through the feed, and its
// markers, offsets without a record, fill their holes: the records after
// them come without a wait, and nothing is reported deleted by
// retention.
func TestLocalConsumeTransactions(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{})
	warns := &warnCounter{sub: "deleted by retention"}
	c.log = slog.New(warns)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := kadm.NewClient(c.cl).CreateTopic(ctx, 1, 1, nil, "ltx.in"); err != nil {
		t.Fatal(err)
	}
	const topic, part = TopicDeliveries, int32(3)
	var mu sync.Mutex
	var got []string
	errc := make(chan error, 1)
	go func() {
		errc <- c.Consume(ctx, ConsumeConfig{Topic: topic, Partitions: []int32{part}, Local: true},
			func(_ context.Context, bt Batch) error {
				mu.Lock()
				defer mu.Unlock()
				for _, r := range bt.Records {
					got = append(got, string(r.Value))
				}
				return nil
			})
	}()
	in := plainClient(t, e)
	tctx, tcancel := context.WithCancel(ctx)
	tdone := make(chan error, 1)
	go func() {
		tdone <- c.Transact(tctx, TransactConfig{Topic: "ltx.in", Group: "ltx", TransactionalID: "ltx-0", ManualTopics: []string{topic}},
			func(_ context.Context, bs []Batch, tx *Tx) error {
				for _, b := range bs {
					for _, r := range b.Records {
						tx.Produce(&Record{Topic: topic, Partition: part, Value: r.Value})
					}
				}
				return nil
			})
	}()
	handed := e.feed.handed.Load()
	var want []string
	for i := range 5 {
		v := fmt.Sprintf("tx-%d", i)
		if err := in.ProduceSync(ctx, &kgo.Record{Topic: "ltx.in", Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		want = append(want, v)
		eventually.True(t, testTimeout, v+" consumed", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got) == len(want)
		})
		// A record of the process's own after the transaction's marker.
		own := fmt.Sprintf("own-%d", i)
		if err := c.ProduceSync(ctx, &Record{Topic: topic, Partition: part, Value: []byte(own)}); err != nil {
			t.Fatal(err)
		}
		want = append(want, own)
		eventually.True(t, testTimeout, own+" consumed", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got) == len(want)
		})
	}
	tcancel()
	if err := <-tdone; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if !slices.Equal(got, want) {
		t.Errorf("consumed %q, want %q", got, want)
	}
	mu.Unlock()
	if h := e.feed.handed.Load() - handed; h < 10 {
		t.Errorf("%d records handed over by the feed, want the 5 of the transactions and the 5 of the client", h)
	}
	if n := warns.n.Load(); n != 0 {
		t.Errorf("%d warnings of records deleted by retention: a marker's offset was taken for a removed record", n)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}
