package kafka

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// describeAnswers makes the embedded broker answer DescribeTransactions
// for id with the states given, one per request, then with the last one;
// it returns the count of requests answered. The embedded broker itself
// never reports a transaction still being prepared: its EndTxn completes
// it.
func describeAnswers(e *Embedded, id string, code int16, states ...string) *atomic.Int32 {
	var asked atomic.Int32
	e.cluster.ControlKey(int16(kmsg.DescribeTransactions), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		e.cluster.KeepControl()
		n := int(asked.Add(1))
		req, ok := kreq.(*kmsg.DescribeTransactionsRequest)
		if !ok {
			return nil, nil, false
		}
		resp := kmsg.NewPtrDescribeTransactionsResponse()
		resp.Version = req.Version
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID, st.ErrorCode = id, code
		st.State = states[min(n, len(states))-1]
		resp.TransactionStates = append(resp.TransactionStates, st)
		return resp, nil, true
	})
	return &asked
}

// TestTxnEndsAwaitsCompletion: after a transaction ends, the next waits
// until the coordinator no longer reports it being prepared, asking once
// more for each answer that does; with none ended, it does not ask.
func TestTxnEndsAwaitsCompletion(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	const id = "ends-tx"
	asked := describeAnswers(e, id, 0, "PrepareCommit", "PrepareCommit", "PrepareCommit", "CompleteCommit")
	w := &txnEnds{cl: plainClient(t, e), id: id, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	w.await(ctx)
	if n := asked.Load(); n != 0 {
		t.Fatalf("asked %d times with no transaction ended, want 0", n)
	}
	w.ended()
	w.await(ctx)
	if n := asked.Load(); n != 4 {
		t.Fatalf("asked %d times, want 4: three answers PrepareCommit, then CompleteCommit", n)
	}
	w.await(ctx)
	if n := asked.Load(); n != 4 {
		t.Fatalf("asked again for a transaction already seen complete: %d times", n)
	}
	w.ended()
	w.await(ctx)
	if n := asked.Load(); n != 5 {
		t.Fatalf("asked %d times after the second end, want 5: complete at the first answer", n)
	}
}

// TestTxnEndsStopsAsking: a coordinator that refuses the question (an ACL
// without Describe on the transactional id) is not asked again, nor is
// the embedded broker ever asked.
func TestTxnEndsStopsAsking(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	const id = "ends-denied"
	asked := describeAnswers(e, id, kerr.TransactionalIDAuthorizationFailed.Code, "")
	w := &txnEnds{cl: plainClient(t, e), id: id, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for range 3 {
		w.ended()
		w.await(ctx)
	}
	if n := asked.Load(); n != 1 {
		t.Fatalf("asked %d times, want 1: a refusal stops the asking", n)
	}

	c := newTestClient(t, e, Config{})
	emb := c.newTxnEnds(c.cl, id)
	if c.cfg.Feed == nil {
		t.Fatal("the embedded backbone's test client has no feed")
	}
	emb.ended()
	emb.await(ctx)
	if n := asked.Load(); n != 1 {
		t.Fatalf("the embedded broker was asked: %d requests, want 1", n)
	}
}
