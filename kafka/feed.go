package kafka

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Feed is the local delivery path of a process whose roles share one
// broker (the embedded backbone of `shoal all`): the records its own
// clients produce, once the broker has acknowledged them, are handed to
// its own consumers of the same partitions (ConsumeConfig.Local) without
// a fetch. What a local consumer sees is what a fetch would have returned
// — the same acknowledged records, in offset order, each once — only
// sooner and without the fetch's request, response and decoding: the log
// stays the record, and nothing is delivered that the log does not hold.
//
// Records the process did not produce (another process's, through the
// embedded broker's socket) and records whose hand-over was missed reach a
// local consumer from the log: a consumer that finds a hole in the
// offsets it was handed (a later record arrived first) waits feedGapWait
// for the missing ones, then fetches them; and while idle it compares its
// position with the partition's end offset every feedIdleCheck.
//
// A nil *Feed hands nothing over.
type Feed struct {
	mu   sync.Mutex                             // serialises changes of subs
	subs atomic.Pointer[map[feedKey][]*feedSub] // read by every promise
	// handed counts the records handed to consumers (tests).
	handed atomic.Int64
	// order is the tracked topic's (feedorder.go), nil when none is.
	order atomic.Pointer[feedOrder]
}

// NewFeed returns an empty feed, for Config.Feed of every client of a
// process (Embedded.ClientConfig).
func NewFeed() *Feed { return &Feed{} }

type feedKey struct {
	topic     string
	partition int32
}

const (
	// feedGapWait is how long a local consumer waits for the records of
	// a hole before it fetches them: the promises of two clients (the
	// router's and the session service's records to one slot) run on
	// different goroutines, so a later offset may come first by a
	// little.
	feedGapWait = 20 * time.Millisecond
	// feedIdleCheck is how often an idle local consumer compares its
	// position with the log's end offset.
	feedIdleCheck = time.Second
	// feedChunk is the size of the memory a subscription copies handed
	// records' bytes into. Chunks are never reused (a consumer may keep
	// the bytes), so they go with the last record that refers to them,
	// as a fetch response's memory does.
	feedChunk = 64 << 10
	// feedHeaderChunk is the number of headers per header chunk.
	feedHeaderChunk = 1024
	// feedMaxInbox bounds the records a subscription holds for a consumer
	// that does not take them fast enough: beyond it records are not
	// copied, and the consumer reads them from the log (a hole), as a
	// fetch consumer would read everything, at its own pace.
	feedMaxInbox = 1 << 16
	// feedFillPoll bounds one poll of a fill: a poll that finds nothing
	// makes the fill look whether retention removed what it waits for.
	feedFillPoll = 2 * time.Second
)

// push hands kr, just acknowledged, to the consumers of its partition.
// Called by promise for every record produced without an error.
func (f *Feed) push(kr *kgo.Record) {
	if f == nil {
		return
	}
	f.written(kr.Topic, kr.Partition, kr.Offset)
	m := f.subs.Load()
	if m == nil {
		return
	}
	for _, s := range (*m)[feedKey{kr.Topic, kr.Partition}] {
		if s.add(kr) {
			f.handed.Add(1)
		}
	}
}

// subscribe registers s for topic's partitions.
func (f *Feed) subscribe(s *feedSub, topic string, partitions []int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	next := make(map[feedKey][]*feedSub)
	if m := f.subs.Load(); m != nil {
		for k, v := range *m {
			next[k] = v
		}
	}
	for _, p := range partitions {
		k := feedKey{topic, p}
		next[k] = append(slices.Clip(next[k]), s)
	}
	f.subs.Store(&next)
}

// unsubscribe removes s wherever it is registered.
func (f *Feed) unsubscribe(s *feedSub) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.subs.Load()
	if m == nil {
		return
	}
	next := make(map[feedKey][]*feedSub, len(*m))
	for k, v := range *m {
		if v = slices.DeleteFunc(slices.Clone(v), func(x *feedSub) bool { return x == s }); len(v) > 0 {
			next[k] = v
		}
	}
	f.subs.Store(&next)
}

// feedSub is one local consumer's inbox: the records handed to it and not
// yet taken, their bytes copied out of the producer's (which the producer
// reuses once its callback has run).
type feedSub struct {
	mu    sync.Mutex
	in    []Record
	inUse shrink // how long in has been mostly empty
	// skipEarly copies no key or value of records marked HandoffEarly
	// (ConsumeConfig.SkipHandedOff).
	skipEarly bool
	// skipExpress copies no key or value of records marked HeaderExpress
	// (ConsumeConfig.SkipExpressed).
	skipExpress bool
	bytes       []byte   // the current chunk of copied bytes
	hdrs        []Header // the current chunk of headers
	mark        []Header // the last skipped record's header mark (addSkipped)
	// quiet is since when take has found the inbox empty (zero: it found
	// records): after shrinkAfter of it the current chunks go, so that an
	// idle subscription holds no chunk (its records keep theirs alive).
	quiet time.Time
	wake  chan struct{}
}

func newFeedSub() *feedSub { return &feedSub{wake: make(chan struct{}, 1)} }

// add copies kr into the inbox and wakes the consumer. It reports false
// when the inbox is full.
func (s *feedSub) add(kr *kgo.Record) bool {
	if s.skipEarly && handedOff(kr) {
		return s.addSkipped(kr, HeaderHandoff)
	}
	if s.skipExpress && expressed(kr) {
		return s.addSkipped(kr, HeaderExpress)
	}
	key, value := kr.Key, kr.Value
	n := len(key) + len(value)
	for _, h := range kr.Headers {
		n += len(h.Value)
	}
	s.mu.Lock()
	if len(s.in) >= feedMaxInbox {
		s.mu.Unlock()
		return false // read from the log instead (a hole)
	}
	if cap(s.bytes)-len(s.bytes) < n {
		s.bytes = make([]byte, 0, max(feedChunk, n))
	}
	if k := len(kr.Headers); cap(s.hdrs)-len(s.hdrs) < k {
		s.hdrs = make([]Header, 0, max(feedHeaderChunk, k))
	}
	r := Record{Topic: kr.Topic, Partition: kr.Partition, Offset: kr.Offset, Timestamp: kr.Timestamp}
	r.Key = s.copyBytes(key)
	r.Value = s.copyBytes(value)
	if k := len(kr.Headers); k > 0 {
		from := len(s.hdrs)
		for _, h := range kr.Headers {
			s.hdrs = append(s.hdrs, Header{Key: h.Key, Value: s.copyBytes(h.Value)})
		}
		r.Headers = s.hdrs[from : from+k : from+k]
	}
	s.in = append(s.in, r)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return true
}

// addSkipped adds kr, a record its consumer skips (SkipHandedOff,
// SkipExpressed), as add does, with no key or value and only its header
// mark, the one header the consumer reads of it. Consecutive records with
// the same mark share one copy of it (a header slice without spare
// capacity, which the consumer does not write), so that at a steady rate,
// where the express path's records are nearly all of them, a skipped
// record copies nothing: before, these copies were a quarter of `shoal
// all`'s allocations at a steady QoS 0 rate.
func (s *feedSub) addSkipped(kr *kgo.Record, mark string) bool {
	var v []byte
	for _, h := range kr.Headers {
		if h.Key == mark {
			v = h.Value
			break
		}
	}
	s.mu.Lock()
	if len(s.in) >= feedMaxInbox {
		s.mu.Unlock()
		return false
	}
	if len(s.mark) != 1 || s.mark[0].Key != mark || !bytes.Equal(s.mark[0].Value, v) {
		s.mark = []Header{{Key: mark, Value: bytes.Clone(v)}}[:1:1]
	}
	s.in = append(s.in, Record{Topic: kr.Topic, Partition: kr.Partition, Offset: kr.Offset, Timestamp: kr.Timestamp, Headers: s.mark})
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return true
}

// handedOff reports whether kr carries a HandoffEarly mark.
func handedOff(kr *kgo.Record) bool {
	for _, h := range kr.Headers {
		if h.Key == HeaderHandoff {
			_, kind, ok := ParseHandoffMark(h.Value)
			return ok && kind == HandoffEarly
		}
	}
	return false
}

// copyBytes copies b into the chunk (which has room); nil stays nil.
func (s *feedSub) copyBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	from := len(s.bytes)
	s.bytes = append(s.bytes, b...)
	return s.bytes[from:len(s.bytes):len(s.bytes)]
}

// take appends the inbox's records to dst and empties the inbox, keeping
// its array for the next ones (the records are copied by value).
func (s *feedSub) take(dst []Record, now time.Time) []Record {
	s.mu.Lock()
	switch {
	case len(s.in) > 0:
		s.quiet = time.Time{}
	case s.quiet.IsZero():
		s.quiet = now
	case now.Sub(s.quiet) >= shrinkAfter:
		s.bytes, s.hdrs = nil, nil // the next add starts new chunks
	}
	dst = append(dst, s.in...)
	clear(s.in)
	s.in = emptied(s.in, &s.inUse, now)
	s.mu.Unlock()
	return dst
}

// localPart is a local consumer's state of one partition.
type localPart struct {
	next    int64     // the next offset to hand out
	pending []Record  // handed over beyond next, in offset order
	gap     time.Time // since when a hole has been seen (zero: none)
	// behind is the log's end offset an idle check found beyond next:
	// what it holds up to there is read from the log unless the feed
	// hands it over within feedGapWait (a record acknowledged just before
	// the check, whose promise has not run yet).
	behind int64
	use    shrink // how long pending has been mostly empty
}

// consumeLocal is ConsumePolls for a consumer with ConsumeConfig.Local on
// a client with a feed: explicit partitions only.
func (c *Client) consumeLocal(ctx context.Context, cfg ConsumeConfig, lag *consumerLag, handle func(context.Context, []Batch) error) error {
	sub := newFeedSub()
	sub.skipEarly = cfg.SkipHandedOff
	sub.skipExpress = cfg.SkipExpressed
	// Subscribed before anything is read from the log, so that every
	// record acknowledged from now on is either handed over or, if it was
	// acknowledged before, found by the catch-up below.
	c.cfg.Feed.subscribe(sub, cfg.Topic, cfg.Partitions)
	defer c.cfg.Feed.unsubscribe(sub)
	if cfg.OnAssigned != nil {
		cfg.OnAssigned(ctx, slices.Clone(cfg.Partitions))
	}
	if cfg.OnRevoked != nil {
		defer cfg.OnRevoked(ctx, slices.Clone(cfg.Partitions))
	}
	start := cfg.Start
	if start == nil {
		start = func(int32) int64 { return StartAtBeginning }
	}
	lc := &localConsumer{c: c, cfg: cfg, lag: lag, handle: handle, parts: make(map[int32]*localPart, len(cfg.Partitions))}
	if cfg.Reuse {
		lc.arena = new(batchArena)
	}
	// Catch up with what the log holds now, through a fetch. Where to
	// start follows the fetch path's rules: below the log start, or past
	// its end, the log start.
	firsts, err := c.offsetsRetry(ctx, cfg.Topic, c.StartOffsets)
	if err != nil {
		return lc.stopped(ctx, err) // only when ctx ended
	}
	ends, err := c.offsetsRetry(ctx, cfg.Topic, c.EndOffsets)
	if err != nil {
		return lc.stopped(ctx, err)
	}
	for _, p := range cfg.Partitions {
		c.cfg.Feed.noteEnd(cfg.Topic, p, ends[p])
		from := start(p)
		switch {
		case from == StartAtEnd:
			from = ends[p]
		case from >= 0 && from < firsts[p]:
			c.skipped(cfg.Topic, "", p, from, firsts[p]-from)
			from = firsts[p]
		case from < firsts[p] || from > ends[p]:
			from = firsts[p]
		}
		lp := &localPart{next: from}
		lc.parts[p] = lp
		c.cfg.Feed.handedOut(cfg.Topic, p, from)
		if err := lc.fetch(ctx, p, ends[p]); err != nil {
			return lc.stopped(ctx, err)
		}
	}
	var buf []Record
	var bufUse shrink
	timer := time.NewTimer(feedIdleCheck)
	defer timer.Stop()
	idleSince := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-sub.wake:
		case <-timer.C:
		}
		now := time.Now()
		buf = sub.take(buf[:0], now)
		if len(buf) > 0 {
			idleSince = now
		}
		for i := range buf {
			lp := lc.parts[buf[i].Partition]
			if lp == nil || buf[i].Offset < lp.next {
				continue // read already (by the catch-up or a fill)
			}
			lp.pending = append(lp.pending, buf[i])
		}
		clear(buf)
		buf = emptied(buf, &bufUse, now)
		for _, lp := range lc.parts {
			lp.pending = lean(lp.pending, &lp.use, now)
		}
		lc.arena.trim(now)
		// An idle consumer looks at the log's end: a record written by
		// another process is never handed over.
		var ends map[int32]int64
		if now.Sub(idleSince) >= feedIdleCheck {
			idleSince = now
			if ends, err = c.EndOffsets(ctx, cfg.Topic); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				c.log.Warn("local consumer: end offsets", "topic", cfg.Topic, "err", err)
			}
		}
		for {
			if err := lc.handOut(ctx); err != nil {
				return lc.stopped(ctx, err)
			}
			filled, err := lc.fill(ctx, ends, now)
			if err != nil {
				return lc.stopped(ctx, err)
			}
			if !filled {
				break
			}
			ends = nil
		}
		wait := feedIdleCheck - now.Sub(idleSince)
		for _, lp := range lc.parts {
			if !lp.gap.IsZero() {
				wait = min(wait, max(feedGapWait-now.Sub(lp.gap), time.Millisecond))
			}
		}
		timer.Reset(wait)
	}
}

// localConsumer is consumeLocal's state.
type localConsumer struct {
	c      *Client
	cfg    ConsumeConfig
	lag    *consumerLag
	handle func(context.Context, []Batch) error
	arena  *batchArena
	parts  map[int32]*localPart
	bs     []Batch
}

// stopped returns what consumeLocal returns for err: nil once ctx ended
// (a stopped consumer is not a failed one), err otherwise.
func (lc *localConsumer) stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		err = nil
	}
	return err
}

// handOut hands out every partition's pending records from its next
// offset on, as far as they are contiguous, in one handler call (as a
// fetch consumer's poll would: handlers amortise their writes per poll).
func (lc *localConsumer) handOut(ctx context.Context) error {
	lc.arena.reset()
	bs := lc.bs[:0]
	for _, p := range lc.cfg.Partitions {
		lp := lc.parts[p]
		if len(lp.pending) == 0 {
			continue
		}
		if len(lp.pending) > 1 {
			slices.SortStableFunc(lp.pending, func(a, b Record) int { return cmp.Compare(a.Offset, b.Offset) })
		}
		// Drop what was read already (by a fill), and duplicates.
		i := 0
		for i < len(lp.pending) && lp.pending[i].Offset < lp.next {
			i++
		}
		lp.pending = dropFront(lp.pending, i)
		n := 0
		for n < len(lp.pending) && lp.pending[n].Offset == lp.next+int64(n) {
			n++
		}
		if n == 0 {
			continue
		}
		recs, ptrs, _ := lc.arena.take(n, 0)
		for k := range n {
			recs[k] = lp.pending[k]
			ptrs[k] = &recs[k]
		}
		bs = append(bs, Batch{Topic: lc.cfg.Topic, Partition: p, Records: ptrs})
		lp.next += int64(n)
		lp.pending = dropFront(lp.pending, n)
		lp.gap = time.Time{}
		lc.at(p, lp.next)
	}
	lc.bs = bs
	if len(bs) == 0 {
		return nil
	}
	err := lc.handle(ctx, bs)
	clear(bs)
	if err != nil {
		return fmt.Errorf("consume %s: %w", lc.cfg.Topic, err)
	}
	return nil
}

// fill reads from the log what the feed did not hand over: a hole before
// a partition's first pending record, or the records up to an end offset
// an idle check found (ends, the log's end offsets, nil between checks),
// once either has lasted feedGapWait. It reports whether it read anything.
func (lc *localConsumer) fill(ctx context.Context, ends map[int32]int64, now time.Time) (bool, error) {
	filled := false
	for _, p := range lc.cfg.Partitions {
		lp := lc.parts[p]
		if e, ok := ends[p]; ok && e > lp.behind {
			lp.behind = e
		}
		var to int64
		switch {
		case len(lp.pending) > 0 && lp.pending[0].Offset > lp.next:
			to = lp.pending[0].Offset
		case len(lp.pending) == 0 && lp.behind > lp.next:
			to = lp.behind
		default:
			lp.gap = time.Time{}
			continue
		}
		if lp.gap.IsZero() {
			lp.gap = now
		}
		if now.Sub(lp.gap) < feedGapWait {
			continue
		}
		lc.c.log.Debug("local consumer: reading a hole from the log", "topic", lc.cfg.Topic, "partition", p,
			"from", lp.next, "to", to)
		if err := lc.fetch(ctx, p, to); err != nil {
			return filled, err
		}
		lp.gap = time.Time{}
		filled = true
	}
	return filled, nil
}

// dropFront removes s's first n records, keeping the array.
func dropFront(s []Record, n int) []Record {
	if n == 0 {
		return s
	}
	k := copy(s, s[n:])
	clear(s[k:])
	return s[:k]
}

// shrink tells when a reused array has been used to less than a quarter
// of its capacity for shrinkAfter: a consumer that fell behind under a
// burst does not keep the burst's arrays (tens of MiB over a router's
// partitions) once traffic is moderate again or gone (the consumer's loop
// runs at least every feedIdleCheck), while a saturating load, whose polls
// vary in size, keeps its own.
type shrink struct{ since time.Time } // zero: the last use was large

const shrinkAfter = 2 * time.Second

// feedKeep is the capacity up to which the feed's arrays of records (an
// inbox, a consumer's take and pending records) are kept however little
// they are used: a burst's arrays go once their use falls (small).
const feedKeep = 64

// small reports whether a use of n elements of an array of capacity c at
// now makes it go.
func (k *shrink) small(n, c int, now time.Time) bool {
	switch {
	case c <= feedKeep || n >= c/4:
		k.since = time.Time{}
		return false
	case k.since.IsZero():
		k.since = now
		return false
	case now.Sub(k.since) < shrinkAfter:
		return false
	}
	k.since = time.Time{}
	return true
}

// lean returns s, or a copy of it in a small array when s is a burst's
// large array that has held less than a quarter of it for shrinkAfter.
func lean[T any](s []T, k *shrink, now time.Time) []T {
	if !k.small(len(s), cap(s), now) {
		return s
	}
	if len(s) == 0 {
		return nil
	}
	return append(make([]T, 0, 2*len(s)), s...)
}

// emptied returns s, whose last use filled len(s), emptied for reuse, or
// nil when it is a burst's large array used to less than a quarter for
// shrinkAfter.
func emptied[T any](s []T, k *shrink, now time.Time) []T {
	if k.small(len(s), cap(s), now) {
		return nil
	}
	return s[:0]
}

// fetch reads partition p from its next offset up to (not including)
// offset to with a consumer of its own, handing the records out as a
// fetch consumer would, and moves the partition's next offset to to. What
// the log no longer holds (removed by retention meanwhile) is skipped, as
// a fetch consumer would skip it, and reported (Client.skipped).
func (lc *localConsumer) fetch(ctx context.Context, p int32, to int64) error {
	c, lp := lc.c, lc.parts[p]
	if lp.next >= to {
		return nil
	}
	opts := append(c.common[:len(c.common):len(c.common)],
		kgo.WithLogger(kgoLogger{c.log.With("consume", lc.cfg.Topic, "local", "fill")}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		kgo.FetchMaxWait(fetchMaxWait),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{lc.cfg.Topic: {p: kgo.NewOffset().At(lp.next)}}),
		// A transaction's marker takes an offset no record has (the Kafka
		// bridge writes shoal.messages in transactions): it fills its
		// hole, where without it the fill would wait for a record that
		// never comes and call the hole removed by retention.
		kgo.KeepControlRecords(),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("consume %s: %w", lc.cfg.Topic, err)
	}
	defer cl.Close()
	for lp.next < to {
		pctx, cancel := context.WithTimeout(ctx, feedFillPoll)
		fetches := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var fatal error
		fetches.EachError(func(topic string, p int32, err error) {
			if fatal == nil && !errors.Is(err, context.DeadlineExceeded) {
				fatal = c.fetchError(topic, p, err)
			}
		})
		if fatal != nil {
			return fmt.Errorf("consume %s: %w", lc.cfg.Topic, fatal)
		}
		if fetches.NumRecords() == 0 {
			// Nothing for a while: the rest may have been removed.
			firsts, err := c.StartOffsets(ctx, lc.cfg.Topic)
			if err == nil && firsts[p] >= to {
				break
			}
			continue
		}
		fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
			recs := fp.Records
			if k := slices.IndexFunc(recs, func(r *kgo.Record) bool { return r.Offset >= to }); k >= 0 {
				recs = recs[:k]
			}
			// A record below next was handed out already.
			if k := slices.IndexFunc(recs, func(r *kgo.Record) bool { return r.Offset >= lp.next }); k > 0 {
				recs = recs[k:]
			} else if k < 0 {
				recs = nil
			}
			if len(recs) == 0 || err != nil {
				return
			}
			if first := recs[0].Offset; first > lp.next {
				c.skipped(lc.cfg.Topic, "", p, lp.next, first-lp.next)
			}
			next := recs[len(recs)-1].Offset + 1
			recs = slices.DeleteFunc(recs, func(r *kgo.Record) bool { return r.Attrs.IsControl() })
			lc.at(p, next)
			if len(recs) > 0 {
				fp.Records = recs
				lc.arena.reset()
				lc.bs = append(lc.bs[:0], toBatch(fp, lc.arena))
				if herr := lc.handle(ctx, lc.bs); herr != nil {
					err = fmt.Errorf("consume %s: %w", lc.cfg.Topic, herr)
				}
				clear(lc.bs)
			}
			lp.next = next
		})
		if err != nil {
			return err
		}
		if fetches.NumRecords() > 0 && lp.next < to {
			// Records at or past to only: the ones below were removed.
			last := int64(-1)
			fetches.EachRecord(func(r *kgo.Record) { last = max(last, r.Offset) })
			if last >= to {
				break
			}
		}
	}
	if lp.next < to {
		c.skipped(lc.cfg.Topic, "", p, lp.next, to-lp.next)
		lp.next = to
		lc.at(p, to)
	}
	return nil
}

// at notes that partition p's records before next are handed out: the
// consumer's lag, and the feed's backlog (Feed.Room).
func (lc *localConsumer) at(p int32, next int64) {
	lc.lag.at(p, next)
	lc.c.cfg.Feed.handedOut(lc.cfg.Topic, p, next)
}

// offsetsRetry lists topic's offsets with list, retrying until it
// succeeds or ctx ends (the broker may still be starting).
func (c *Client) offsetsRetry(ctx context.Context, topic string, list func(context.Context, string) (map[int32]int64, error)) (map[int32]int64, error) {
	for fails := 0; ; fails++ {
		offs, err := list(ctx, topic)
		if err == nil {
			return offs, nil
		}
		c.log.Warn("local consumer: list offsets", "topic", topic, "err", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(retryBackoff(fails)):
		}
	}
}
