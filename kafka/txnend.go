package kafka

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka answers EndTxn once the transaction is prepared, then writes its
// markers. A transaction whose first record comes before the markers are
// written is refused with CONCURRENT_TRANSACTIONS, and the broker asks again
// only after add.partitions.to.txn.retry.backoff.ms, 20 ms by default (the
// client, before KIP-890, after its own backoff, 20 ms in franz-go). A
// transaction per poll that starts as soon as the last one ended met that
// wait nearly every time. So a producer first asks the coordinator, with
// DescribeTransactions, until the last transaction is complete: a round
// trip or two, while the markers are written (docs/bridge.md "Latency" has
// the figures).

// txnEndPolls bounds the DescribeTransactions asked after one transaction,
// and txnEndWait the time they take: past either the next transaction
// starts anyway, and Kafka's own backoff applies.
const (
	txnEndPolls = 50
	txnEndWait  = 100 * time.Millisecond
	txnEndFails = 3
)

// txnEnds waits for a transactional producer's previous transaction to be
// complete at its coordinator before the next one produces. Not safe for
// concurrent use: one per producer, used by the goroutine that runs its
// transactions.
type txnEnds struct {
	cl  *kgo.Client
	id  string
	log *slog.Logger
	// pending says a transaction ended and its completion is not known.
	pending bool
	// off says the coordinator cannot be asked (a broker older than
	// DescribeTransactions, an ACL without Describe on the id, or the
	// embedded broker, which completes a transaction in its EndTxn):
	// never wait.
	off bool
	// fails counts the asks in a row that failed: a coordinator that
	// fails txnEndFails times is not asked again by this producer.
	fails int
}

// newTxnEnds is the waiter of the producer cl of transactional id id;
// off for a client of the embedded broker.
func (c *Client) newTxnEnds(cl *kgo.Client, id string) *txnEnds {
	return &txnEnds{cl: cl, id: id, log: c.log, off: c.cfg.Feed != nil}
}

// ended records that a transaction was committed or aborted.
func (w *txnEnds) ended() { w.pending = !w.off }

// await returns once the last transaction ended is complete at its
// coordinator, or after txnEndPolls answers or txnEndWait, or at once
// when none is pending. It never fails: waiting only saves Kafka's
// backoff, so after an error the next transaction starts, and a
// coordinator that cannot answer is not asked again (logged once).
func (w *txnEnds) await(ctx context.Context) {
	if !w.pending {
		return
	}
	w.pending = false
	deadline := time.Now().Add(txnEndWait)
	for range txnEndPolls {
		done, err := w.complete(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if w.fails++; w.fails >= txnEndFails || never(err) {
				w.off = true
				w.log.Info("kafka transactions: the coordinator cannot be asked whether a transaction is complete; "+
					"each transaction may wait Kafka's backoff", "transactional_id", w.id, "err", err)
			}
			return
		}
		w.fails = 0
		if done || time.Now().After(deadline) {
			return
		}
	}
}

// complete asks the coordinator whether the producer's last transaction
// is complete: its state is neither PrepareCommit nor PrepareAbort.
func (w *txnEnds) complete(ctx context.Context) (bool, error) {
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{w.id}
	resp, err := req.RequestWith(ctx, w.cl)
	if err != nil {
		return false, err
	}
	if len(resp.TransactionStates) != 1 {
		return true, nil
	}
	st := resp.TransactionStates[0]
	if err := kerr.ErrorForCode(st.ErrorCode); err != nil {
		return false, err
	}
	return st.State != "PrepareCommit" && st.State != "PrepareAbort", nil
}

// never reports whether err means the coordinator will never answer
// DescribeTransactions for this producer, rather than not now.
func never(err error) bool {
	return errors.Is(err, kerr.UnsupportedVersion) || errors.Is(err, kerr.TransactionalIDAuthorizationFailed) ||
		errors.Is(err, kerr.ClusterAuthorizationFailed) || errors.Is(err, kgo.ErrClientClosed)
}
