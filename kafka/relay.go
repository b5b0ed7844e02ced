package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// RelayConfig configures Client.Relay: a consumer group member that hands
// each poll to its handler and commits the poll's offsets to the group
// once the handler returned.
type RelayConfig struct {
	// Topic is the topic read; Group the consumer group, whose committed
	// offsets say where a member resumes.
	Topic, Group string
	// InstanceID, when set, is the member's static group instance id
	// (KIP-345), as TransactConfig's.
	InstanceID string
	// MaxPollRecords bounds the records of one poll; 0 means 10,000.
	MaxPollRecords int
}

// Relay reads cfg.Topic as a member of cfg.Group and calls handle with each
// poll's batches (one per partition, in offset order). When handle returns
// nil the poll's offsets are committed: handle must have made its work
// durable by then (a ProduceSync of what it writes), and every record is
// handled at least once, twice when the process stops between the two.
// When handle returns an error Relay returns it, the poll's offsets not
// committed. Errors of Kafka end the session and a new one starts after a
// backoff, from the committed offsets, until ctx ends; then Relay returns
// nil. Partitions move only between polls. A record is read committed.
//
// It is Transact without the transaction, for a handler whose records go
// where a transaction's markers would cost more than a repeat: the
// embedded backbone's local consumers (feed.go) find each marker as a
// hole in the offsets they are handed, and wait for it.
func (c *Client) Relay(ctx context.Context, cfg RelayConfig, handle func(ctx context.Context, bs []Batch) error) error {
	if cfg.Topic == "" || cfg.Group == "" {
		return errors.New("relay: topic and group are required")
	}
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 5*time.Second) {
		err := c.relaySession(ctx, cfg, handle)
		if ctx.Err() != nil {
			return nil //nolint:nilerr // the session ends with ctx: how Relay stops
		}
		var herr handlerError
		if errors.As(err, &herr) {
			return herr.err
		}
		c.log.Warn("kafka relay session ended; starting again", "topic", cfg.Topic, "group", cfg.Group, "err", err, "backoff", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// relaySession runs one group session of Relay.
func (c *Client) relaySession(ctx context.Context, cfg RelayConfig, handle func(ctx context.Context, bs []Batch) error) error {
	maxPoll := cfg.MaxPollRecords
	if maxPoll <= 0 {
		maxPoll = 10_000
	}
	opts := append(c.common[:len(c.common):len(c.common)],
		kgo.WithLogger(kgoLogger{c.log.With("relay", cfg.Topic, "group", cfg.Group)}),
		kgo.ConsumerGroup(cfg.Group),
		kgo.SessionTimeout(c.cfg.GroupSessionTimeout),
		kgo.HeartbeatInterval(c.cfg.GroupSessionTimeout/10),
		kgo.ConsumeTopics(cfg.Topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(fetchMaxWait),
		kgo.FetchMaxPartitionBytes(max(1<<20, c.cfg.Catalogue.MaxMessageBytes())),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
	)
	if cfg.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(cfg.InstanceID))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("relay: new consumer: %w", err)
	}
	defer cl.Close()
	var bs []Batch
	for {
		fetches := cl.PollRecords(ctx, maxPoll)
		if ctx.Err() != nil {
			cl.AllowRebalance()
			return ctx.Err()
		}
		if fetches.IsClientClosed() {
			return kgo.ErrClientClosed
		}
		if ferr := firstFetchError("relay", fetches); ferr != nil {
			cl.AllowRebalance()
			return ferr
		}
		if fetches.NumRecords() == 0 {
			cl.AllowRebalance()
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
		if err := handle(ctx, bs); err != nil {
			cl.AllowRebalance()
			return handlerError{err}
		}
		err := cl.CommitUncommittedOffsets(ctx)
		cl.AllowRebalance()
		if err != nil {
			// The poll is handled again by whoever resumes from the
			// offsets committed before it: at least once.
			return fmt.Errorf("relay: commit: %w", err)
		}
	}
}
