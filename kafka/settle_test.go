package kafka

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestSettleGroupOffsets leaves a transaction open with offsets of a group
// pending, as a session killed between its offset commit and its end does:
// a require_stable fetch of the group's offsets is refused
// (UNSTABLE_OFFSET_COMMIT) until settleGroupOffsets runs for the same
// transactional id, after which it answers with the offset committed
// before that transaction, not the pending one.
func TestSettleGroupOffsets(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	const topic, group, txnID = "settle.in", "settle-group", "settle-tx"
	adm := kadm.NewClient(c.cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	var committed kadm.Offsets
	committed.Add(kadm.Offset{Topic: topic, Partition: 0, At: 3, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, group, committed); err != nil {
		t.Fatal(err)
	}

	raw := plainClient(t, e)
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID = kmsg.StringPtr(txnID)
	init.TransactionTimeoutMillis = 60_000
	ir, err := init.RequestWith(ctx, raw)
	if err == nil {
		err = kerr.ErrorForCode(ir.ErrorCode)
	}
	if err != nil {
		t.Fatalf("init producer id: %v", err)
	}
	if err := settleRequest(ctx, raw, &kmsg.AddOffsetsToTxnRequest{TransactionalID: txnID, ProducerID: ir.ProducerID,
		ProducerEpoch: ir.ProducerEpoch, Group: group}); err != nil {
		t.Fatalf("add offsets to the transaction: %v", err)
	}
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID, commit.Group, commit.Generation = txnID, group, -1
	commit.ProducerID, commit.ProducerEpoch = ir.ProducerID, ir.ProducerEpoch
	ct := kmsg.NewTxnOffsetCommitRequestTopic()
	ct.Topic, ct.TopicID = topic, e.cluster.TopicInfo(topic).TopicID
	cp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset = 0, 9
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	if cr, err := commit.RequestWith(ctx, raw); err != nil || cr.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("transactional offset commit: %v %+v", err, cr)
	}

	stable := func() (int64, error) {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.RequireStable = true
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = group
		gt := kmsg.NewOffsetFetchRequestGroupTopic()
		gt.Topic, gt.TopicID, gt.Partitions = topic, e.cluster.TopicInfo(topic).TopicID, []int32{0}
		g.Topics = append(g.Topics, gt)
		req.Groups = append(req.Groups, g)
		// One broker's answer, not franz-go's sharded request, which waits
		// out UNSTABLE_OFFSET_COMMIT.
		resp, err := raw.Broker(0).Request(ctx, req)
		if err != nil {
			return 0, err
		}
		fr, ok := resp.(*kmsg.OffsetFetchResponse)
		if !ok || len(fr.Groups) != 1 || len(fr.Groups[0].Topics) != 1 || len(fr.Groups[0].Topics[0].Partitions) != 1 {
			t.Fatalf("offset fetch: answer %+v, want one group, topic and partition", resp)
		}
		p := fr.Groups[0].Topics[0].Partitions[0]
		return p.Offset, kerr.ErrorForCode(p.ErrorCode)
	}
	if _, err := stable(); !errors.Is(err, kerr.UnstableOffsetCommit) {
		t.Fatalf("require_stable fetch with the transaction open: %v, want UNSTABLE_OFFSET_COMMIT", err)
	}
	if err := c.settleGroupOffsets(ctx, TransactConfig{Topic: topic, Group: group, TransactionalID: txnID}); err != nil {
		t.Fatal(err)
	}
	at, err := stable()
	if err != nil || at != 3 {
		t.Fatalf("require_stable fetch after settling: offset %d, %v; want 3, the offset committed before the transaction", at, err)
	}
}
