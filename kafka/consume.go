package kafka

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// fetchMaxWait is how long a broker may hold a fetch that has no records.
const fetchMaxWait = 500 * time.Millisecond

// Special start offsets for ConsumeConfig.Start.
const (
	// StartAtEnd starts after the last record: only new records.
	StartAtEnd int64 = -1
	// StartAtBeginning starts at the oldest record still in the log.
	StartAtBeginning int64 = -2
)

// ConsumeConfig says what Consume reads.
type ConsumeConfig struct {
	// Topic is the topic to read.
	Topic string
	// Partitions are read when Group is empty (explicit assignment).
	Partitions []int32
	// Group, when set, makes Consume a member of this consumer group,
	// which divides the topic's partitions among its members. Offsets are
	// never committed to Kafka: services store the offsets they consumed
	// with their views and return them from Start. A partition moves from
	// one member to another only through OnRevoked on the old owner, then
	// OnAssigned and Start on the new one, never overlapping, unless a
	// member is expelled from the group while still handling (see the
	// package documentation): with the offset stored before the handler
	// returns, every record is handled once.
	Group string
	// Start returns the offset to start a partition at: the next offset to
	// read (a stored offset + 1), StartAtEnd or StartAtBeginning. nil means
	// StartAtBeginning for every partition. It is called right after
	// OnAssigned (which can load what Start returns): in group mode each
	// time a partition is assigned, in explicit mode once per partition at
	// the start. An offset below the
	// log start (records removed by retention) starts at the log start;
	// one past the log end (the broker lost records) starts at the log
	// start too: reading again is safe, skipping is not.
	Start func(partition int32) int64
	// OnAssigned is called with partitions newly given to this consumer
	// before any of their records are handed out; OnRevoked with
	// partitions taken away (or lost) after the last batch of theirs was
	// handled, and with all partitions when Consume returns. In explicit
	// mode they are called once, with Partitions, at the start and the end.
	// They, Start and the handler are never called concurrently, and the
	// callbacks may be nil.
	OnAssigned, OnRevoked func(ctx context.Context, partitions []int32)
	// Reuse makes the consumer reuse its batches' Records slices and
	// Record structs from one handler call to the next, so that consuming
	// allocates nothing per record: the handler must not keep a Batch's
	// Records, a *Record or a record's Headers slice after it returns. The
	// bytes they refer to (Key, Value, header values) it may keep: they
	// are never reused.
	Reuse bool
	// Local reads the partitions through the client's Feed (the embedded
	// backbone's local delivery path) when it has one: the records the
	// process's own clients produce come without a fetch, the others from
	// the log (feed.go). Explicit partitions only; a client with tracing
	// on, or without a feed, fetches as usual (kotel's receive spans come
	// from fetches).
	Local bool
	// SkipHandedOff: with Local, a record the process's gateway was handed
	// and delivered (HeaderHandoff, HandoffEarly) is handed out without
	// its key and value, and with its HeaderHandoff alone of its headers
	// (shared with the records before it that carry the same mark: the
	// consumer must not write a record's headers), which is all the
	// consumer reads of it; one read from the log comes whole.
	SkipHandedOff bool
	// SkipExpressed: with Local, a record the process's router routed
	// before it was produced (HeaderExpress) is handed out without its key
	// and value, with its HeaderExpress alone, as with SkipHandedOff.
	SkipExpressed bool
}

// Validate checks the configuration.
func (c ConsumeConfig) Validate() error {
	var errs []error
	if err := validTopicName(c.Topic); err != nil {
		errs = append(errs, fmt.Errorf("topic: %w", err))
	}
	switch {
	case c.Group == "" && len(c.Partitions) == 0:
		errs = append(errs, errors.New("partitions: give partitions or a group"))
	case c.Group != "" && len(c.Partitions) > 0:
		errs = append(errs, errors.New("partitions: give partitions or a group, not both"))
	}
	seen := make(map[int32]bool, len(c.Partitions))
	for _, p := range c.Partitions {
		if p < 0 {
			errs = append(errs, fmt.Errorf("partitions: %d is negative", p))
		}
		if seen[p] {
			errs = append(errs, fmt.Errorf("partitions: %d is listed twice", p))
		}
		seen[p] = true
	}
	return errors.Join(errs...)
}

// Batch is records of one partition, in offset order.
type Batch struct {
	Topic     string
	Partition int32
	// Records belong to the handler: it may keep the slice and the records
	// (unless ConsumeConfig.Reuse is set).
	Records []*Record
}

// Consume reads cfg.Topic with a consumer client of its own and calls handle
// with batches of records until ctx is done, then returns nil. Each call of
// handle gets records of one partition in offset order; calls are one at a
// time (a partition's batches in order, partitions interleaved), which keeps
// a handler simple and ordered — run several Consume calls for parallelism.
// A handler error stops Consume, which returns it wrapped (unless it is
// ctx's own error after ctx ended). Consume also returns fetch errors that
// retrying cannot fix (authorization, a deleted topic); others are logged
// and retried.
//
// Consume commits no offsets: where to start is Start's business. Records
// are read with read_uncommitted isolation (Shoal does not use
// transactions). Partitions of a catalogue topic are checked against its
// partition count.
func (c *Client) Consume(ctx context.Context, cfg ConsumeConfig, handle func(ctx context.Context, b Batch) error) error {
	return c.ConsumePolls(ctx, cfg, func(ctx context.Context, bs []Batch) error {
		for _, b := range bs {
			if err := handle(ctx, b); err != nil {
				return fmt.Errorf("partition %d at offset %d: %w", b.Partition, b.Records[0].Offset, err)
			}
		}
		return nil
	})
}

// ConsumePolls is Consume with one handler call per poll: bs holds a batch
// for each partition that had records in it (each partition at most once,
// never empty, in no particular order of partitions). A handler that
// writes something per batch can write once per poll instead: under load a
// poll carries many partitions' records, which is how the services amortise
// their produce round trips and store commits. bs belongs to the handler
// only until it returns (the records themselves it may keep).
func (c *Client) ConsumePolls(ctx context.Context, cfg ConsumeConfig, handle func(ctx context.Context, bs []Batch) error) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("consume %s: %w", cfg.Topic, err)
	}
	if n := c.Partitions(cfg.Topic); n > 0 {
		for _, p := range cfg.Partitions {
			if p >= n {
				return fmt.Errorf("consume %s: partition %d is outside [0, %d)", cfg.Topic, p, n)
			}
		}
	}
	start := cfg.Start
	if start == nil {
		start = func(int32) int64 { return StartAtBeginning }
	}
	opts := append(c.common[:len(c.common):len(c.common)],
		kgo.WithLogger(kgoLogger{c.log.With("consume", cfg.Topic, "group", cfg.Group)}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		// How long a broker holds a fetch without new records: Kafka's
		// default, not franz-go's 5s. franz-go may send the first fetch
		// while it is still applying an assignment, covering only some
		// partitions; if those have nothing new, the others wait until
		// it returns.
		kgo.FetchMaxWait(fetchMaxWait),
		// consumeLoop copies what it needs of each fetched record and
		// recycles it at once: franz-go decodes the next fetches into the
		// same record slices.
		kgo.WithPools(&kgoRecords{}),
		// A partition's fetch holds at least one of the largest batches
		// the topics accept (a broker returns one larger batch anyway, but
		// then only that one).
		kgo.FetchMaxPartitionBytes(max(1<<20, c.cfg.Catalogue.MaxMessageBytes())),
	)
	if c.tracing {
		opts = append(opts, kgo.WithHooks(c.kotelTracer(cfg.Group)))
	}
	lag := c.met.consumer(cfg.Topic, cfg.Group) // its lag, until Consume returns (metrics.go)
	defer c.met.forget(lag)
	if cfg.Local && cfg.Group == "" && c.cfg.Feed != nil && !c.tracing {
		return c.consumeLocal(ctx, cfg, lag, handle)
	}
	group := cfg.Group != ""
	if group {
		g := &groupStarts{topic: cfg.Topic, start: start, onAssigned: cfg.OnAssigned, onRevoked: cfg.OnRevoked, lag: lag}
		opts = append(opts,
			kgo.ConsumerGroup(cfg.Group),
			kgo.ConsumeTopics(cfg.Topic),
			kgo.SessionTimeout(c.cfg.GroupSessionTimeout),
			kgo.HeartbeatInterval(c.cfg.GroupSessionTimeout/10),
			kgo.DisableAutoCommit(),
			// Callbacks wait until the records handed out by a poll
			// are handled (AllowRebalance), and polls wait for the
			// callbacks: they never overlap with the handler.
			kgo.BlockRebalanceOnPoll(),
			kgo.OnPartitionsAssigned(g.assigned),
			kgo.OnPartitionsRevoked(g.revoked),
			kgo.OnPartitionsLost(g.revoked),
			kgo.AdjustFetchOffsetsFn(g.adjust),
		)
	} else {
		if cfg.OnAssigned != nil {
			cfg.OnAssigned(ctx, slices.Clone(cfg.Partitions))
		}
		parts := make(map[int32]kgo.Offset, len(cfg.Partitions))
		for _, p := range cfg.Partitions {
			at := start(p)
			parts[p] = startOffset(at)
			lag.expect(p, at)
		}
		opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: parts}))
	}

	cl, err := kgo.NewClient(opts...)
	if err != nil {
		if !group && cfg.OnRevoked != nil {
			cfg.OnRevoked(ctx, slices.Clone(cfg.Partitions))
		}
		return fmt.Errorf("consume %s: %w", cfg.Topic, err)
	}
	err = c.consumeLoop(ctx, cl, cfg, group, lag, handle)
	if group {
		// Leaves the group; OnRevoked runs for what was still assigned.
		cl.CloseAllowingRebalance()
	} else {
		cl.Close()
		if cfg.OnRevoked != nil {
			cfg.OnRevoked(ctx, slices.Clone(cfg.Partitions))
		}
	}
	return err
}

func (c *Client) consumeLoop(ctx context.Context, cl *kgo.Client, cfg ConsumeConfig, group bool, lag *consumerLag, handle func(context.Context, []Batch) error) error {
	var bs []Batch
	var arena *batchArena
	if cfg.Reuse {
		arena = new(batchArena)
	}
	for {
		fetches := cl.PollFetches(ctx)
		select {
		case <-ctx.Done():
			return nil // stopped: what the poll returned is read again next time
		default:
		}
		var fatal error
		fetches.EachError(func(topic string, p int32, err error) {
			if topic == "" { // an error of the group, not of a partition
				topic = cfg.Topic
			}
			if fatal == nil {
				fatal = c.fetchError(topic, p, err)
			}
		})
		if fatal != nil {
			return fmt.Errorf("consume %s: %w", cfg.Topic, fatal)
		}
		clear(bs)
		bs = bs[:0]
		arena.reset()
		fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
			if from, n := lag.fetched(fp); n > 0 {
				c.skipped(cfg.Topic, cfg.Group, fp.Partition, from, n)
			}
			if len(fp.Records) > 0 {
				c.cfg.Feed.fetchedUpTo(cfg.Topic, fp.Partition, fp.Records[len(fp.Records)-1].Offset+1)
				bs = appendBatch(bs, toBatch(fp, arena))
				// Not with tracing: kotel's hook reads a record
				// after the poll that returned it, when franz-go may
				// be decoding a new one into it.
				for _, kr := range fp.Records {
					if !c.tracing {
						kr.Recycle()
					}
				}
			}
		})
		var herr error
		if len(bs) > 0 {
			if err := handle(ctx, bs); err != nil {
				herr = fmt.Errorf("consume %s: %w", cfg.Topic, err)
			}
		}
		if herr != nil {
			if ctx.Err() != nil && errors.Is(herr, ctx.Err()) {
				return nil
			}
			return herr
		}
		if group {
			cl.AllowRebalance()
		}
	}
}

// EndOffsets returns the next offset of every partition of topic: its high
// watermark, the offset the next record written to the partition gets.
// Every record below it is acknowledged (on every in-sync replica) and
// readable, so a consumer whose next offset has reached it has caught up
// with the log as it was when EndOffsets was called. It asks the
// partitions' leaders (not a cache) and fails if the topic does not exist
// or any partition's offset cannot be listed (a partition without a
// leader while a broker restarts: franz-go retries that for its request
// retry timeout, then the caller may try again).
func (c *Client) EndOffsets(ctx context.Context, topic string) (map[int32]int64, error) {
	listed, err := c.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	return listedOffsets("end offsets", topic, listed)
}

// StartOffsets returns, for each partition of topic, the offset of its
// oldest record still in the log (the end offset when it holds none):
// what retention and compaction left. Errors as EndOffsets.
func (c *Client) StartOffsets(ctx context.Context, topic string) (map[int32]int64, error) {
	listed, err := c.adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("start offsets of %s: %w", topic, err)
	}
	return listedOffsets("start offsets", topic, listed)
}

// OffsetsAt returns, for each partition of topic, the offset of its first
// record whose timestamp is at or after t, or the end offset when it has
// none. Errors as EndOffsets.
func (c *Client) OffsetsAt(ctx context.Context, topic string, t time.Time) (map[int32]int64, error) {
	listed, err := c.adm.ListOffsetsAfterMilli(ctx, t.UnixMilli(), topic)
	if err != nil {
		return nil, fmt.Errorf("offsets of %s at %s: %w", topic, t.Format(time.RFC3339), err)
	}
	return listedOffsets("offsets at "+t.Format(time.RFC3339), topic, listed)
}

// listedOffsets turns one topic of a kadm listing into offsets per
// partition, failing on any partition's error.
func listedOffsets(what, topic string, listed kadm.ListedOffsets) (map[int32]int64, error) {
	parts, ok := listed[topic]
	if !ok {
		return nil, fmt.Errorf("%s of %s: %w", what, topic, kerr.UnknownTopicOrPartition)
	}
	out := make(map[int32]int64, len(parts))
	var errs []error
	for p, o := range parts {
		switch {
		case o.Err != nil && p < 0:
			errs = append(errs, fmt.Errorf("%s of %s: %w", what, topic, o.Err))
		case o.Err != nil:
			errs = append(errs, fmt.Errorf("%s of %s partition %d: %w", what, topic, p, o.Err))
		default:
			out[p] = o.Offset
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s of %s: the broker listed no partitions", what, topic)
	}
	return out, nil
}

// fetchError returns err when retrying cannot help and logs it otherwise
// (franz-go keeps retrying those by itself).
func (c *Client) fetchError(topic string, p int32, err error) error {
	var (
		ke   *kerr.Error
		loss *kgo.ErrDataLoss
		gs   *kgo.ErrGroupSession
	)
	switch {
	case errors.Is(err, kgo.ErrClientClosed):
		return err
	case errors.As(err, &gs) && !errors.Is(err, kerr.GroupAuthorizationFailed) && !errors.Is(err, kerr.TopicAuthorizationFailed):
		// The member left the group (UNKNOWN_MEMBER_ID after a broker
		// paused past the session, a coordinator that moved): franz-go
		// has called OnRevoked with what it held and joins again after a
		// backoff, and OnAssigned comes with what it then gets. Only a
		// refusal of access is for the operator to fix.
		c.log.Warn("kafka consumer group session lost; joining again", "topic", topic, "err", err)
		return nil
	case errors.As(err, &loss):
		c.log.Warn("kafka data loss: the log ends before the offset reached, reading again from where it resumes",
			"topic", topic, "partition", p, "err", err)
	case errors.As(err, &ke) && !ke.Retriable:
		return fmt.Errorf("partition %d: %w", p, err)
	default:
		c.log.Warn("kafka fetch error, retrying", "topic", topic, "partition", p, "err", err)
	}
	return nil
}

// skipped reports that a consumer of topic passed over the offsets [from,
// from+n) of partition because the log no longer held them: retention
// deleted them while the consumer lagged or was stopped. Nothing reads
// them again, so the operator is told, once per gap, in the log and in
// shoal.kafka.consumer.skipped. A compacted topic's gaps are its
// compaction: not reported.
func (c *Client) skipped(topic, group string, partition int32, from, n int64) {
	if s, ok := c.Catalogue().Spec(topic); ok && s.Compacted {
		return
	}
	c.met.skip(topic, n)
	args := []any{"topic", topic, "partition", partition}
	if group != "" {
		args = append(args, "group", group)
	}
	c.log.Warn("kafka records deleted by retention before this consumer read them: skipped",
		append(args, "from", from, "to", from+n, "records", n)...)
}

func startOffset(at int64) kgo.Offset {
	switch {
	case at == StartAtEnd:
		return kgo.NewOffset().AtEnd()
	case at < 0:
		return kgo.NewOffset().AtStart()
	}
	return kgo.NewOffset().At(at).WithEpoch(-1)
}

// groupStarts runs the group callbacks. Start is called in the assigned
// callback, which franz-go serialises with the handler, and its offsets are
// kept for AdjustFetchOffsetsFn, which franz-go calls right after from a
// goroutine that is not serialised with the handler.
type groupStarts struct {
	topic                 string
	start                 func(int32) int64
	onAssigned, onRevoked func(context.Context, []int32)
	lag                   *consumerLag

	mu      sync.Mutex
	offsets map[int32]int64
}

func (g *groupStarts) assigned(ctx context.Context, _ *kgo.Client, m map[string][]int32) {
	parts := m[g.topic]
	if len(parts) == 0 {
		return
	}
	slices.Sort(parts)
	if g.onAssigned != nil {
		g.onAssigned(ctx, parts)
	}
	offsets := make(map[int32]int64, len(parts))
	for _, p := range parts {
		offsets[p] = g.start(p)
		g.lag.expect(p, offsets[p])
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.offsets == nil {
		g.offsets = make(map[int32]int64, len(parts))
	}
	maps.Copy(g.offsets, offsets)
}

func (g *groupStarts) revoked(ctx context.Context, _ *kgo.Client, m map[string][]int32) {
	parts := m[g.topic]
	if len(parts) == 0 {
		return
	}
	slices.Sort(parts)
	g.mu.Lock()
	for _, p := range parts {
		delete(g.offsets, p)
	}
	g.mu.Unlock()
	g.lag.revoke(parts)
	if g.onRevoked != nil {
		g.onRevoked(ctx, parts)
	}
}

func (g *groupStarts) adjust(_ context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for p := range offsets[g.topic] {
		at, ok := g.offsets[p]
		if !ok { // not announced by the assigned callback: cannot happen
			at = g.start(p)
		}
		offsets[g.topic][p] = startOffset(at)
	}
	return offsets, nil
}

// appendBatch appends b to bs, or its records to the batch of the same
// partition already in bs (a poll can return two fetches of a partition,
// the older first).
func appendBatch(bs []Batch, b Batch) []Batch {
	for i := range bs {
		if bs[i].Partition == b.Partition && bs[i].Topic == b.Topic {
			bs[i].Records = append(bs[i].Records, b.Records...)
			return bs
		}
	}
	return append(bs, b)
}

// toBatch converts a partition's fetched records, into a's memory when a is
// not nil; otherwise with one allocation for the records, one for the
// pointers and one for all headers.
func toBatch(fp kgo.FetchTopicPartition, a *batchArena) Batch {
	n := len(fp.Records)
	nh := 0
	for _, kr := range fp.Records {
		nh += len(kr.Headers)
	}
	recs, ptrs, hs := a.take(n, nh)
	for i, kr := range fp.Records {
		r := &recs[i]
		r.Topic = kr.Topic
		r.Partition = kr.Partition
		r.Offset = kr.Offset
		r.Key = kr.Key
		r.Value = kr.Value
		r.Timestamp = kr.Timestamp
		r.Context = kr.Context // the kotel receive span's, with tracing on
		if k := len(kr.Headers); k > 0 {
			h := hs[:k:k]
			hs = hs[k:]
			for j, kh := range kr.Headers {
				h[j] = Header{Key: kh.Key, Value: kh.Value}
			}
			r.Headers = h
		}
		ptrs[i] = r
	}
	return Batch{Topic: fp.Topic, Partition: fp.Partition, Records: ptrs}
}

// batchArena backs the batches of one poll of a consumer with
// ConsumeConfig.Reuse: reset at the next poll, it hands out the same
// memory again. Each batch gets slices of its own length and capacity, so
// that appending to one (appendBatch) never writes into another.
type batchArena struct {
	recs []Record
	ptrs []*Record
	hdrs []Header
	// taken counts the records of this poll; peak is the most a poll
	// took since the last trim; since is when the polls began to use
	// less than a quarter of the arrays (zero: they did not).
	taken, peak int
	since       time.Time
}

// take returns n records, n pointers and nh headers, from a when a is not
// nil. An arena too small for the poll starts larger arrays, which it keeps
// from then on (the batches already made keep the old ones).
func (a *batchArena) take(n, nh int) ([]Record, []*Record, []Header) {
	if a == nil {
		var hs []Header
		if nh > 0 {
			hs = make([]Header, nh)
		}
		return make([]Record, n), make([]*Record, n), hs
	}
	a.recs = grow(a.recs, n)
	a.ptrs = grow(a.ptrs, n)
	a.hdrs = grow(a.hdrs, nh)
	a.taken += n
	a.peak = max(a.peak, a.taken)
	return carve(&a.recs, n), carve(&a.ptrs, n), carve(&a.hdrs, nh)
}

// arenaKeep is the number of records from which an arena that a poll
// used only a quarter of lets its arrays go: a burst's poll does not hold
// its memory forever.
const arenaKeep = 4096

// reset makes a's memory free for the next poll, dropping the references
// to the last poll's bytes. A nil arena does nothing.
func (a *batchArena) reset() {
	if a == nil {
		return
	}
	if cap(a.recs) > arenaKeep && len(a.recs) < cap(a.recs)/4 {
		*a = batchArena{}
		return
	}
	clear(a.recs)
	clear(a.ptrs)
	clear(a.hdrs)
	a.recs, a.ptrs, a.hdrs = a.recs[:0], a.ptrs[:0], a.hdrs[:0]
	a.taken = 0
}

// arenaFloor is the most records an arena keeps however little its polls
// use (trim).
const arenaFloor = 256

// trim lets a's arrays go once the polls have used less than a quarter of
// them for shrinkAfter, whatever their size: reset keeps up to arenaKeep
// records for a load whose polls vary in size, which a consumer that a
// burst left with a trickle of records (heartbeats) or none would keep
// for good. Called by the consumer's loop, at least every feedIdleCheck;
// the next poll starts small arrays. A nil arena does nothing.
func (a *batchArena) trim(now time.Time) {
	if a == nil {
		return
	}
	used := a.peak
	a.peak = 0
	switch {
	case cap(a.recs) <= arenaFloor || used >= cap(a.recs)/4:
		a.since = time.Time{}
	case a.since.IsZero():
		a.since = now
	case now.Sub(a.since) >= shrinkAfter:
		*a = batchArena{}
	}
}

// grow returns s, or a new empty array twice as large when s has no room
// for n more elements.
func grow[T any](s []T, n int) []T {
	if len(s)+n <= cap(s) {
		return s
	}
	return make([]T, 0, max(2*cap(s), n, 64))
}

// carve takes the next n elements of *s (which has room for them), with
// their capacity limited to n.
func carve[T any](s *[]T, n int) []T {
	from := len(*s)
	*s = (*s)[:from+n]
	return (*s)[from : from+n : from+n]
}

// kgoRecords is franz-go's pool of the record slices it decodes fetches
// into (kgo.PoolRecords). It keeps a few slices of moderate size: a burst's
// huge fetch is not held forever.
type kgoRecords struct {
	mu   sync.Mutex
	free [][]kgo.Record
}

const (
	kgoRecordsKept   = 4    // slices kept (at most 5 MiB of records)
	kgoRecordsMaxLen = 8192 // records in a slice kept (a full fetch of small records)
)

// GetRecords returns a slice with room for n records.
func (p *kgoRecords) GetRecords(n int) []kgo.Record {
	p.mu.Lock()
	for i, s := range p.free {
		if cap(s) >= n {
			last := len(p.free) - 1
			p.free[i] = p.free[last]
			p.free[last] = nil
			p.free = p.free[:last]
			p.mu.Unlock()
			return s[:0]
		}
	}
	p.mu.Unlock()
	return make([]kgo.Record, 0, n)
}

// PutRecords takes back a slice whose records were all recycled (zeroed).
func (p *kgoRecords) PutRecords(s []kgo.Record) {
	if cap(s) > kgoRecordsMaxLen {
		return
	}
	p.mu.Lock()
	if len(p.free) < kgoRecordsKept {
		p.free = append(p.free, s)
	}
	p.mu.Unlock()
}
