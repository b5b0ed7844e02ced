package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TransactConfig configures Client.Transact: a consumer group member whose
// output records and consumed offsets commit together, in one Kafka
// transaction per poll (KIP-447, franz-go's GroupTransactSession).
type TransactConfig struct {
	// Topic is the topic read.
	Topic string
	// Group is the consumer group, whose offsets commit in the
	// transactions: a member that starts again, or another that takes a
	// partition over, resumes after the last committed poll.
	Group string
	// TransactionalID names the member's producer; members of one group
	// need ids of their own (KIP-447 fences by the group's generation, not
	// by the id). A producer that restarts with its id fences the
	// transaction its previous run left open at once, instead of leaving
	// it to the transaction timeout.
	TransactionalID string
	// InstanceID, when set, is the member's static group instance id
	// (KIP-345): a member that restarts with it takes its partitions back
	// at once instead of waiting for the session's timeout.
	InstanceID string
	// OnAssigned and OnRevoked are called with the partitions given to
	// and taken from this member (may be nil), from the group's goroutine:
	// they may run while the handler runs, and must not block.
	OnAssigned, OnRevoked func(ctx context.Context, partitions []int32)
	// MaxPollRecords bounds the records of one poll, and so of one
	// transaction; 0 means 10,000.
	MaxPollRecords int
	// ManualTopics are the topics whose records the handler gives their
	// partition (Record.Partition); the others' records are partitioned
	// by key.
	ManualTopics []string
	// Target is the client of the cluster the handler's records go to;
	// nil is this one. A target of another cluster keeps the offsets in
	// OffsetsTopic, of OffsetsPartitions partitions (OffsetsSpec), in the
	// same transactions: across.go.
	Target            *Client
	OffsetsTopic      string
	OffsetsPartitions int32
}

// Tx is the transaction of one poll: what the handler produces in it
// becomes visible to read_committed consumers when the poll's offsets
// commit, and never otherwise.
type Tx struct {
	produce func(context.Context, *kgo.Record, func(*kgo.Record, error))
	ctx     context.Context
	// feed is the local delivery path of the cluster written to (nil but
	// in shoal all): its local consumers get the transaction's records
	// when they are acknowledged, as their read_uncommitted fetch would.
	feed *Feed

	mu  sync.Mutex
	err error

	afterCommit []func()

	// slab holds the headers of the records produced: a chunk handed on
	// from transaction to transaction, only ever appended to (a record
	// can outlive its transaction in the local feed), a new chunk when
	// short: one allocation for many records.
	slab []kgo.RecordHeader
}

// slabChunk is the least a Tx's header slab grows by.
const slabChunk = 4096

// AfterCommit has f called once the transaction committed, never when it
// aborts: what the handler keeps in memory of a poll it applies there, or
// an aborted poll read again would find it applied already.
func (tx *Tx) AfterCommit(f func()) { tx.afterCommit = append(tx.afterCommit, f) }

// Produce adds r to the transaction: a plain record (Value, Key, Headers,
// Timestamp) for r.Topic, its partition chosen by its key as Kafka's
// default partitioner does (no key: any), or r.Partition on one of the
// ManualTopics. r is not kept; its bytes must not change until the
// transaction ends.
func (tx *Tx) Produce(r *Record) {
	kr := &kgo.Record{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}
	if n := len(r.Headers); n > 0 {
		if cap(tx.slab)-len(tx.slab) < n {
			tx.slab = make([]kgo.RecordHeader, 0, max(slabChunk, n))
		}
		from := len(tx.slab)
		for _, h := range r.Headers {
			tx.slab = append(tx.slab, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		kr.Headers = tx.slab[from:len(tx.slab):len(tx.slab)]
	}
	tx.produce(tx.ctx, kr, tx.done)
}

// Fail aborts the transaction: its poll is read again by a new session,
// after a backoff (a record that cannot be written yet: its topic cannot
// be made). err is logged.
func (tx *Tx) Fail(err error) { tx.done(nil, err) }

func (tx *Tx) done(kr *kgo.Record, err error) {
	if err == nil {
		if kr != nil {
			tx.feed.push(kr)
		}
		return
	}
	tx.mu.Lock()
	if tx.err == nil {
		tx.err = err
	}
	tx.mu.Unlock()
}

func (tx *Tx) failed() error {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	return tx.err
}

// ErrTransactionAborted reports a transaction that did not commit: the
// group rebalanced meanwhile, or a record of it failed. Its poll is read
// again, by this member or the partition's new owner.
var ErrTransactionAborted = errors.New("transaction aborted")

// Transact reads cfg.Topic as a member of cfg.Group and calls handle with
// each poll's batches (one per partition, in offset order) and the poll's
// transaction. When handle returns nil the records it produced and the
// poll's offsets commit together: each consumed record's output is visible
// to read_committed consumers exactly once, through crashes of this
// process and restarts of Kafka. When handle returns an error, or the
// transaction cannot commit (a rebalance, a failed record), the
// transaction aborts and the poll is read again; an error of handle is
// then returned. Errors of Kafka (a broker down, the producer fenced) end
// the session: Transact logs them and starts a new one after a backoff,
// until ctx ends; then it returns nil. handle is never called
// concurrently with itself (the callbacks may be: TransactConfig). The
// batches, their Records and the records' Headers slices are reused from
// poll to poll, as ConsumeConfig.Reuse's: handle must not keep them after
// it returns, only the bytes they refer to. A record is read committed: a
// transactional producer's aborted records are never seen. With a
// cfg.Target of another cluster, the records go there and each
// partition's poll is a transaction of its own, the offsets kept beside
// the records (across.go).
func (c *Client) Transact(ctx context.Context, cfg TransactConfig, handle func(ctx context.Context, bs []Batch, tx *Tx) error) error {
	if cfg.Topic == "" || cfg.Group == "" || cfg.TransactionalID == "" {
		return fmt.Errorf("transact: topic, group and transactional id are required")
	}
	session := c.transactSession
	if cfg.Target != nil && cfg.Target != c {
		session = c.transactAcross
	}
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 5*time.Second) {
		err := session(ctx, cfg, handle)
		if ctx.Err() != nil {
			return nil //nolint:nilerr // the session ends with ctx: how Transact stops
		}
		var herr handlerError
		if errors.As(err, &herr) {
			return herr.err
		}
		c.log.Warn("kafka transactional session ended; starting again", "topic", cfg.Topic, "group", cfg.Group,
			"transactional_id", cfg.TransactionalID, "err", err, "backoff", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// firstFetchError is the first error of fetches other than a cancelled
// context (the session ending), named for what (transact, relay); nil
// without one.
func firstFetchError(what string, fetches kgo.Fetches) error {
	var ferr error
	fetches.EachError(func(topic string, p int32, err error) {
		if ferr == nil && !errors.Is(err, context.Canceled) {
			ferr = fmt.Errorf("%s: fetch %s/%d: %w", what, topic, p, err)
		}
	})
	return ferr
}

// handlerError is an error of Transact's handler, which ends Transact.
type handlerError struct{ err error }

func (e handlerError) Error() string { return e.err.Error() }

// transactSession runs one GroupTransactSession until ctx ends or an error
// of Kafka ends it.
func (c *Client) transactSession(ctx context.Context, cfg TransactConfig, handle func(ctx context.Context, bs []Batch, tx *Tx) error) error {
	maxPoll := cfg.MaxPollRecords
	if maxPoll <= 0 {
		maxPoll = 10_000
	}
	opts := append(c.common[:len(c.common):len(c.common)],
		kgo.WithLogger(kgoLogger{c.log.With("transact", cfg.Topic, "group", cfg.Group)}),
		kgo.TransactionalID(cfg.TransactionalID),
		kgo.TransactionTimeout(c.cfg.GroupSessionTimeout),
		kgo.ConsumerGroup(cfg.Group),
		kgo.SessionTimeout(c.cfg.GroupSessionTimeout),
		kgo.HeartbeatInterval(c.cfg.GroupSessionTimeout/10),
		kgo.ConsumeTopics(cfg.Topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(fetchMaxWait),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(txPartitioner{manual: cfg.ManualTopics, byKey: kgo.StickyKeyPartitioner(nil)}),
		kgo.FetchMaxPartitionBytes(max(1<<20, c.cfg.Catalogue.MaxMessageBytes())),
		// Each poll's records are copied into its batches and recycled,
		// as Consume's.
		kgo.WithPools(&kgoRecords{}),
	)
	if n := c.cfg.Catalogue.MaxMessageBytes(); n > 0 {
		opts = append(opts, kgo.ProducerBatchMaxBytes(n))
	}
	if cfg.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(cfg.InstanceID))
	}
	if cfg.OnAssigned != nil {
		opts = append(opts, kgo.OnPartitionsAssigned(func(ctx context.Context, _ *kgo.Client, m map[string][]int32) {
			cfg.OnAssigned(ctx, m[cfg.Topic])
		}))
	}
	if cfg.OnRevoked != nil {
		revoked := func(ctx context.Context, _ *kgo.Client, m map[string][]int32) { cfg.OnRevoked(ctx, m[cfg.Topic]) }
		opts = append(opts, kgo.OnPartitionsRevoked(revoked), kgo.OnPartitionsLost(revoked))
	}
	if err := c.settleGroupOffsets(ctx, cfg); err != nil {
		return err
	}
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		return fmt.Errorf("transact: new session: %w", err)
	}
	defer sess.Close()
	// The producer id first, as Java's initTransactions: taken lazily, at
	// the first record, it would wait for the first poll, which waits for
	// the group's offsets.
	if _, _, err := sess.Client().ProducerID(ctx); err != nil {
		return fmt.Errorf("transact: init producer id: %w", err)
	}
	ends := c.newTxnEnds(sess.Client(), cfg.TransactionalID)
	arena := new(batchArena)
	var bs []Batch
	var slab []kgo.RecordHeader
	for {
		fetches := sess.PollRecords(ctx, maxPoll)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if fetches.IsClientClosed() {
			return kgo.ErrClientClosed
		}
		if ferr := firstFetchError("transact", fetches); ferr != nil {
			return ferr
		}
		if fetches.NumRecords() == 0 {
			continue
		}
		bs = bs[:0]
		arena.reset()
		fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
			if len(fp.Records) == 0 {
				return
			}
			bs = append(bs, toBatch(fp, arena))
			if !c.tracing { // as consumeLoop's
				for _, kr := range fp.Records {
					kr.Recycle()
				}
			}
		})
		ends.await(ctx)
		if err := sess.Begin(); err != nil {
			return fmt.Errorf("transact: begin: %w", err)
		}
		tx := &Tx{produce: sess.Produce, ctx: ctx, feed: c.cfg.Feed, slab: slab}
		herr := handle(ctx, bs, tx)
		if herr == nil {
			// Every record's outcome is known before the commit is tried:
			// a failed one aborts the poll's transaction.
			if err := sess.Client().Flush(ctx); err != nil {
				return fmt.Errorf("transact: flush: %w", err)
			}
		}
		perr := tx.failed()
		commit := kgo.TryCommit
		if herr != nil || perr != nil {
			commit = kgo.TryAbort
		}
		committed, err := sess.End(ctx, commit)
		ends.ended()
		slab = tx.slab
		switch {
		case herr != nil:
			return handlerError{herr}
		case perr != nil:
			return fmt.Errorf("transact: %w: %w", ErrTransactionAborted, perr)
		case err != nil:
			return fmt.Errorf("transact: end: %w", err)
		case !committed:
			c.log.Debug("kafka transaction aborted by a rebalance; the poll is read again", "topic", cfg.Topic, "group", cfg.Group)
		default:
			for _, f := range tx.afterCommit {
				f()
			}
		}
	}
}

// fromKgo is a consumed record in this package's form; its bytes alias the
// franz-go record's, which Transact does not recycle.
func fromKgo(kr *kgo.Record) *Record {
	r := &Record{Topic: kr.Topic, Partition: kr.Partition, Offset: kr.Offset, Key: kr.Key, Value: kr.Value, Timestamp: kr.Timestamp}
	if len(kr.Headers) > 0 {
		r.Headers = make([]Header, len(kr.Headers))
		for i, h := range kr.Headers {
			r.Headers[i] = Header{Key: h.Key, Value: h.Value}
		}
	}
	return r
}

// ReadCommitted calls fn with each record of partition part of topic that
// a committed transaction wrote, or that was written outside any
// transaction, from the partition's start to its end as it is when
// ReadCommitted is called: what a role writes in its transactions, read
// back to rebuild its state (the Kafka bridge's). A transaction's records
// are handed over at its commit marker, in their order; those of an
// aborted transaction, or of one without a marker by the end (still open,
// or aborted by a broker that lost it: the embedded backbone after a
// crash writes no marker), never. fn's record is valid only during the
// call.
//
// It reads uncommitted and filters by the markers itself: a read_committed
// consumer skips aborted records without a trace, so when the last records
// before the end are aborted it cannot tell that it reached the end.
func (c *Client) ReadCommitted(ctx context.Context, topic string, part int32, fn func(*Record) error) error {
	ends, err := c.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("read %s/%d: end offset: %w", topic, part, err)
	}
	end, ok := ends.Lookup(topic, part)
	switch {
	case !ok:
		return fmt.Errorf("read %s/%d: no end offset: no such partition", topic, part)
	case end.Err != nil:
		return fmt.Errorf("read %s/%d: end offset: %w", topic, part, end.Err)
	case end.Offset <= 0:
		return nil
	}
	opts := append(c.common[:len(c.common):len(c.common)],
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {part: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		kgo.FetchMaxWait(fetchMaxWait),
		kgo.KeepControlRecords(),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("read %s/%d: %w", topic, part, err)
	}
	defer cl.Close()
	pending := make(map[int64][]*kgo.Record) // by producer id: an open transaction's records
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("read %s/%d: %w", topic, part, ctx.Err())
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if ferr == nil {
				ferr = err
			}
		})
		if ferr != nil {
			return fmt.Errorf("read %s/%d: %w", topic, part, ferr)
		}
		done := false
		var herr error
		fs.EachRecord(func(kr *kgo.Record) {
			if done || herr != nil {
				return
			}
			if kr.Offset >= end.Offset {
				done = true
				return
			}
			done = kr.Offset+1 >= end.Offset
			switch {
			case kr.Attrs.IsControl():
				recs := pending[kr.ProducerID]
				delete(pending, kr.ProducerID)
				if len(kr.Key) >= 4 && binary.BigEndian.Uint16(kr.Key[2:4]) == 1 { // a COMMIT marker
					for _, r := range recs {
						if herr = fn(fromKgo(r)); herr != nil {
							return
						}
					}
				}
			case kr.Attrs.IsTransactional():
				pending[kr.ProducerID] = append(pending[kr.ProducerID], kr)
			default:
				herr = fn(fromKgo(kr))
			}
		})
		if herr != nil {
			return herr
		}
		if done {
			return nil
		}
	}
}

// txPartitioner takes the record's partition on the manual topics and
// partitions the others by key.
type txPartitioner struct {
	manual []string
	byKey  kgo.Partitioner
}

func (p txPartitioner) ForTopic(topic string) kgo.TopicPartitioner {
	if slices.Contains(p.manual, topic) {
		return manualPartitioner{}
	}
	return p.byKey.ForTopic(topic)
}

// manualPartitioner takes Record.Partition.
type manualPartitioner struct{}

func (manualPartitioner) RequiresConsistency(*kgo.Record) bool { return true }
func (manualPartitioner) Partition(r *kgo.Record, _ int) int   { return int(r.Partition) }
