package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// settleGroupOffsets ends, before a transactional session starts, any
// offsets of cfg.Group that an earlier transaction of cfg.TransactionalID
// left pending. A consumer of the group fetches its offsets with
// require_stable: while offsets of an open transaction are pending, Kafka
// answers UNSTABLE_OFFSET_COMMIT, and franz-go waits and asks again
// without end. Kafka normally settles them when it aborts the transaction
// (on its timeout, or when the id's producer starts again), but after a
// restart of Kafka under a stream of transactions the group coordinator
// was seen to keep them pending for good, the transaction long aborted:
// the session then never got its first poll (the restart subtests of
// TestCluster's bridge). An abort marker of the same producer id on the
// group's offsets partition settles them: a producer of the id is
// started, which fences the earlier one and aborts its transaction, then
// ties the group to an empty transaction of its own (AddOffsetsToTxn)
// and aborts that. Offsets already committed are not touched.
//
// It fails only when Kafka cannot be reached (the session is tried again
// after a backoff); an answer it does not expect is logged and the
// session starts anyway.
func (c *Client) settleGroupOffsets(ctx context.Context, cfg TransactConfig) error {
	opts := append(c.common[:len(c.common):len(c.common)],
		kgo.WithLogger(kgoLogger{c.log.With("settle", cfg.Group)}),
		kgo.TransactionalID(cfg.TransactionalID),
		kgo.TransactionTimeout(c.cfg.GroupSessionTimeout),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("transact: settle group offsets: %w", err)
	}
	defer cl.Close()
	id, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		return fmt.Errorf("transact: settle group offsets: init producer id: %w", err)
	}
	if err := settleRequest(ctx, cl, &kmsg.AddOffsetsToTxnRequest{
		TransactionalID: cfg.TransactionalID, ProducerID: id, ProducerEpoch: epoch, Group: cfg.Group,
	}); err != nil {
		c.log.Warn("kafka: could not tie the group to an empty transaction; its pending offsets, if any, stay as Kafka keeps them",
			"group", cfg.Group, "transactional_id", cfg.TransactionalID, "err", err)
		return nil
	}
	if err := settleRequest(ctx, cl, &kmsg.EndTxnRequest{
		TransactionalID: cfg.TransactionalID, ProducerID: id, ProducerEpoch: epoch, Commit: false,
	}); err != nil {
		c.log.Warn("kafka: could not abort the group's empty transaction; Kafka aborts it at its timeout",
			"group", cfg.Group, "transactional_id", cfg.TransactionalID, "err", err)
	}
	return nil
}

// settleRequest sends req (AddOffsetsToTxn or EndTxn) to the transaction
// coordinator, again while Kafka answers that the id's transactions are
// still settling, for at most ten seconds.
func settleRequest(ctx context.Context, cl *kgo.Client, req kmsg.Request) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := cl.Request(ctx, req)
		if err == nil {
			var code int16
			switch r := resp.(type) {
			case *kmsg.AddOffsetsToTxnResponse:
				code = r.ErrorCode
			case *kmsg.EndTxnResponse:
				code = r.ErrorCode
			}
			err = kerr.ErrorForCode(code)
		}
		retriable := errors.Is(err, kerr.ConcurrentTransactions) || errors.Is(err, kerr.CoordinatorLoadInProgress) ||
			errors.Is(err, kerr.CoordinatorNotAvailable) || errors.Is(err, kerr.NotCoordinator)
		if err == nil || !retriable || time.Now().After(deadline) {
			return err
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}
