package kafka

import (
	"context"
	"errors"
	"fmt"
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
	// by the id).
	TransactionalID string
	// OnAssigned and OnRevoked are called with the partitions given to
	// and taken from this member (may be nil). They are never called while
	// the handler runs.
	OnAssigned, OnRevoked func(ctx context.Context, partitions []int32)
	// MaxPollRecords bounds the records of one poll, and so of one
	// transaction; 0 means 10,000.
	MaxPollRecords int
}

// Tx is the transaction of one poll: what the handler produces in it
// becomes visible to read_committed consumers when the poll's offsets
// commit, and never otherwise.
type Tx struct {
	sess *kgo.GroupTransactSession
	ctx  context.Context

	mu  sync.Mutex
	err error
}

// Produce adds r to the transaction: a plain record (Value, Key, Headers,
// Timestamp) for r.Topic, its partition chosen by its key as Kafka's
// default partitioner does (no key: any). r is not kept.
func (tx *Tx) Produce(r *Record) {
	kr := &kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}
	if len(r.Headers) > 0 {
		kr.Headers = make([]kgo.RecordHeader, len(r.Headers))
		for i, h := range r.Headers {
			kr.Headers[i] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
		}
	}
	tx.sess.Produce(tx.ctx, kr, tx.done)
}

func (tx *Tx) done(_ *kgo.Record, err error) {
	if err == nil {
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
// until ctx ends; then it returns nil. handle and the callbacks are never
// called concurrently. A record is read committed: a transactional
// producer's aborted records are never seen.
func (c *Client) Transact(ctx context.Context, cfg TransactConfig, handle func(ctx context.Context, bs []Batch, tx *Tx) error) error {
	if cfg.Topic == "" || cfg.Group == "" || cfg.TransactionalID == "" {
		return fmt.Errorf("transact: topic, group and transactional id are required")
	}
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 5*time.Second) {
		err := c.transactSession(ctx, cfg, handle)
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
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(fetchMaxWait),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.FetchMaxPartitionBytes(max(1<<20, c.cfg.Catalogue.MaxMessageBytes())),
	)
	if n := c.cfg.Catalogue.MaxMessageBytes(); n > 0 {
		opts = append(opts, kgo.ProducerBatchMaxBytes(n))
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
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		return fmt.Errorf("transact: new session: %w", err)
	}
	defer sess.Close()
	var bs []Batch
	for {
		fetches := sess.PollRecords(ctx, maxPoll)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if fetches.IsClientClosed() {
			return kgo.ErrClientClosed
		}
		var ferr error
		fetches.EachError(func(topic string, p int32, err error) {
			if ferr == nil && !errors.Is(err, context.Canceled) {
				ferr = fmt.Errorf("transact: fetch %s/%d: %w", topic, p, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		if fetches.NumRecords() == 0 {
			continue
		}
		bs = bs[:0]
		fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
			if len(fp.Records) == 0 {
				return
			}
			b := Batch{Topic: fp.Topic, Partition: fp.Partition, Records: make([]*Record, len(fp.Records))}
			for i, kr := range fp.Records {
				b.Records[i] = fromKgo(kr)
			}
			bs = append(bs, b)
		})
		if err := sess.Begin(); err != nil {
			return fmt.Errorf("transact: begin: %w", err)
		}
		tx := &Tx{sess: sess, ctx: ctx}
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
		switch {
		case herr != nil:
			return handlerError{herr}
		case perr != nil:
			return fmt.Errorf("transact: %w: %w", ErrTransactionAborted, perr)
		case err != nil:
			return fmt.Errorf("transact: end: %w", err)
		case !committed:
			c.log.Debug("kafka transaction aborted by a rebalance; the poll is read again", "topic", cfg.Topic, "group", cfg.Group)
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
