package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A Kafka transaction lives on one cluster: it cannot hold records of one
// cluster and the consumer offsets of another. Transact with a Target of
// another cluster keeps the offsets on the target instead, in
// TransactConfig.OffsetsTopic, in the same transaction as the records they
// cover; a member that takes a partition over reads them back
// (read_committed) and resumes after them. What fences a member that lost
// a partition but still writes (KIP-447's generation check, for offsets
// in the group) is here one transactional producer per source partition
// (Kafka Streams' first exactly-once design): its id is the partition's,
// so the new owner's producer fences the old one's, and aborts its open
// transaction, before the offsets are read.

// OffsetsSpec is the spec of a Transact offsets topic of partitions
// partitions: compacted, one record per group and source partition.
func OffsetsSpec(name string, partitions int32, replication int16) TopicSpec {
	return TopicSpec{
		Name: name, Partitions: partitions, Replication: replication, Compacted: true,
		Doc: "consumer offsets kept beside the records they cover, in their transactions (Transact with a Target of another cluster); key group/topic/partition",
	}
}

// across is one session of Transact with a Target of another cluster.
type across struct {
	c, t *Client
	cfg  TransactConfig

	mu    sync.Mutex
	prods map[int32]*txProducer // the producer of each source partition owned
}

// txProducer is a transactional producer of the target, with the waiter
// for its transactions' ends (txnend.go).
type txProducer struct {
	*kgo.Client
	ends *txnEnds
}

// transactAcross is transactSession for a Target of another cluster: the
// group (for the assignment) and the fetches are on c, each partition's
// poll is a transaction of its own producer on the target, its records
// and its next offset together.
func (c *Client) transactAcross(ctx context.Context, cfg TransactConfig, handle func(ctx context.Context, bs []Batch, tx *Tx) error) error {
	if cfg.OffsetsTopic == "" || cfg.OffsetsPartitions <= 0 {
		return errors.New("transact: a target on another cluster needs an offsets topic and its partitions")
	}
	a := &across{c: c, t: cfg.Target, cfg: cfg, prods: make(map[int32]*txProducer)}
	defer a.closeAll()
	maxPoll := cfg.MaxPollRecords
	if maxPoll <= 0 {
		maxPoll = 10_000
	}
	lost := func(ctx context.Context, _ *kgo.Client, m map[string][]int32) {
		a.drop(m[cfg.Topic])
		if cfg.OnRevoked != nil {
			cfg.OnRevoked(ctx, m[cfg.Topic])
		}
	}
	opts := append(c.common[:len(c.common):len(c.common)],
		kgo.WithLogger(kgoLogger{c.log.With("transact", cfg.Topic, "group", cfg.Group)}),
		kgo.ConsumerGroup(cfg.Group),
		kgo.SessionTimeout(c.cfg.GroupSessionTimeout),
		kgo.HeartbeatInterval(c.cfg.GroupSessionTimeout/10),
		kgo.ConsumeTopics(cfg.Topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(fetchMaxWait),
		kgo.FetchMaxPartitionBytes(max(1<<20, c.cfg.Catalogue.MaxMessageBytes())),
		// The group's offsets are committed after each poll's
		// transactions, for the lag alone: a member resumes from the
		// target's (adjust).
		kgo.DisableAutoCommit(),
		// Partitions move only between polls: none is revoked while its
		// transaction runs.
		kgo.BlockRebalanceOnPoll(),
		kgo.AdjustFetchOffsetsFn(a.adjust),
		kgo.OnPartitionsRevoked(lost), kgo.OnPartitionsLost(lost),
	)
	if cfg.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(cfg.InstanceID))
	}
	if cfg.OnAssigned != nil {
		opts = append(opts, kgo.OnPartitionsAssigned(func(ctx context.Context, _ *kgo.Client, m map[string][]int32) {
			cfg.OnAssigned(ctx, m[cfg.Topic])
		}))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("transact: new consumer: %w", err)
	}
	defer cl.Close()
	for {
		fetches := cl.PollRecords(ctx, maxPoll)
		if ctx.Err() != nil {
			cl.AllowRebalance()
			return ctx.Err()
		}
		if fetches.IsClientClosed() {
			return kgo.ErrClientClosed
		}
		if ferr := firstFetchError("transact", fetches); ferr != nil {
			cl.AllowRebalance()
			return ferr
		}
		commits := map[int32]kgo.EpochOffset{}
		var perr error
		fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
			if perr != nil || len(fp.Records) == 0 {
				return
			}
			if perr = a.poll(ctx, fp, handle); perr == nil {
				last := fp.Records[len(fp.Records)-1]
				commits[fp.Partition] = kgo.EpochOffset{Epoch: last.LeaderEpoch, Offset: last.Offset + 1}
			}
		})
		if len(commits) > 0 {
			cl.CommitOffsets(ctx, map[string]map[int32]kgo.EpochOffset{cfg.Topic: commits}, nil)
		}
		cl.AllowRebalance()
		if perr != nil {
			// The session ends; the next one reads the target's offsets
			// again, so a poll that did not commit is read again.
			return perr
		}
	}
}

// poll handles the records of one partition in one transaction of the
// partition's producer, with the partition's next offset.
func (a *across) poll(ctx context.Context, fp kgo.FetchTopicPartition, handle func(ctx context.Context, bs []Batch, tx *Tx) error) error {
	prod, err := a.producer(ctx, fp.Partition)
	if err != nil {
		return err
	}
	b := Batch{Topic: fp.Topic, Partition: fp.Partition, Records: make([]*Record, len(fp.Records))}
	for i, kr := range fp.Records {
		b.Records[i] = fromKgo(kr)
	}
	prod.ends.await(ctx)
	if err := prod.BeginTransaction(); err != nil {
		return fmt.Errorf("transact: begin: %w", err)
	}
	tx := &Tx{produce: prod.Produce, ctx: ctx, feed: a.t.cfg.Feed}
	herr := handle(ctx, []Batch{b}, tx)
	if herr == nil {
		next := fp.Records[len(fp.Records)-1].Offset + 1
		tx.Produce(a.offsetRecord(fp.Partition, next))
		if err := prod.Flush(ctx); err != nil {
			return fmt.Errorf("transact: flush: %w", err)
		}
	}
	perr := tx.failed()
	commit := kgo.TryCommit
	if herr != nil || perr != nil {
		commit = kgo.TryAbort
	}
	err = prod.EndTransaction(ctx, commit)
	prod.ends.ended()
	switch {
	case herr != nil:
		return handlerError{herr}
	case perr != nil:
		return fmt.Errorf("transact: %w: %w", ErrTransactionAborted, perr)
	case err != nil:
		return fmt.Errorf("transact: end: %w", err)
	}
	for _, f := range tx.afterCommit {
		f()
	}
	return nil
}

// offsetsKey is the offsets topic's key of partition p of the source
// topic, for the group.
func (a *across) offsetsKey(p int32) []byte {
	return []byte(a.cfg.Group + "/" + a.cfg.Topic + "/" + strconv.Itoa(int(p)))
}

// offsetsPartition is the offsets topic's partition that holds p's.
func (a *across) offsetsPartition(p int32) int32 { return p % a.cfg.OffsetsPartitions }

func (a *across) offsetRecord(p int32, next int64) *Record {
	return &Record{Topic: a.cfg.OffsetsTopic, Partition: a.offsetsPartition(p), Key: a.offsetsKey(p),
		Value: binary.BigEndian.AppendUint64(nil, uint64(next))}
}

// producer returns the transactional producer of source partition p,
// making it when there is none: its producer id is loaded at once, which
// fences the previous owner's producer of p and ends its open
// transaction.
func (a *across) producer(ctx context.Context, p int32) (*txProducer, error) {
	a.mu.Lock()
	prod := a.prods[p]
	a.mu.Unlock()
	if prod != nil {
		return prod, nil
	}
	t, id := a.t, a.cfg.TransactionalID+"-p"+strconv.Itoa(int(p))
	opts := append(t.common[:len(t.common):len(t.common)],
		kgo.WithLogger(kgoLogger{t.log.With("transact", a.cfg.Topic, "partition", p)}),
		kgo.TransactionalID(id),
		kgo.TransactionTimeout(a.c.cfg.GroupSessionTimeout),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(txPartitioner{manual: append(a.cfg.ManualTopics[:len(a.cfg.ManualTopics):len(a.cfg.ManualTopics)], a.cfg.OffsetsTopic),
			byKey: kgo.StickyKeyPartitioner(nil)}),
	)
	if n := max(a.c.cfg.Catalogue.MaxMessageBytes(), t.cfg.Catalogue.MaxMessageBytes()); n > 0 {
		opts = append(opts, kgo.ProducerBatchMaxBytes(n))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("transact: new producer of partition %d: %w", p, err)
	}
	if _, _, err := cl.ProducerID(ctx); err != nil {
		cl.Close()
		return nil, fmt.Errorf("transact: producer of partition %d: %w", p, err)
	}
	prod = &txProducer{Client: cl, ends: t.newTxnEnds(cl, id)}
	a.mu.Lock()
	a.prods[p] = prod
	a.mu.Unlock()
	return prod, nil
}

// adjust replaces the offsets the group fetched for the partitions
// assigned with those the target keeps, once each partition's producer has
// fenced its previous owner. A partition the target has no offset of
// starts where the group says.
func (a *across) adjust(ctx context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	for p := range offsets[a.cfg.Topic] {
		if _, err := a.producer(ctx, p); err != nil {
			return nil, err
		}
		key := a.offsetsKey(p)
		next, found := int64(0), false
		err := a.t.ReadCommitted(ctx, a.cfg.OffsetsTopic, a.offsetsPartition(p), func(r *Record) error {
			if string(r.Key) == string(key) && len(r.Value) == 8 {
				next, found = int64(binary.BigEndian.Uint64(r.Value)), true
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("transact: offsets of %s/%d: %w", a.cfg.Topic, p, err)
		}
		if found {
			offsets[a.cfg.Topic][p] = kgo.NewOffset().At(next).WithEpoch(-1)
		}
	}
	return offsets, nil
}

// drop closes the producers of the partitions taken away.
func (a *across) drop(parts []int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range parts {
		if prod := a.prods[p]; prod != nil {
			prod.Close()
			delete(a.prods, p)
		}
	}
}

func (a *across) closeAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for p, prod := range a.prods {
		prod.Close()
		delete(a.prods, p)
	}
}
