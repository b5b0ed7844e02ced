//go:build integration

package integration

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/internal/localserver/realkafka"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
	"github.com/shoal-mqtt/shoal/kafka"
)

// The broker is stopped (SIGTERM), then killed (SIGKILL), and restarted
// each time while a producer keeps producing with acks=all and consumers
// (explicit partitions, and a group) keep reading. Afterwards every
// acknowledged record is in the log exactly once, at the offset it was
// acknowledged with and in produce order; a record whose Produce failed
// (no room in the buffer while the broker was down) is reported failed
// and is not in the log; no record is without an outcome; and both
// consumers handled every record once.
func TestKafkaBrokerRestart(t *testing.T) {
	skipWithContainers(t)
	kc := restartable(t, ownKafka(t))
	for _, how := range []string{"stop", "kill"} {
		t.Run(how, func(t *testing.T) {
			restartUnderLoad(t, kc, how)
		})
	}
}

func restartUnderLoad(t *testing.T, kc *realkafka.Cluster, how string) {
	ctx, cancel := context.WithTimeout(context.Background(), kafkaTestTimeout)
	defer cancel()
	const parts = 4
	cat := testCatalogue(t, parts)
	// A small buffer: while the broker is down, Produce soon waits for
	// room, and gives up after roomWait.
	c := newKafkaClient(t, kc, kafka.Config{Catalogue: cat, MaxBufferedRecords: 2000}, nil)
	if err := c.EnsureTopics(ctx); err != nil {
		t.Fatal(err)
	}
	topic := cat.Deliveries.Name
	const roomWait = 500 * time.Millisecond
	// A second producer, with room in its buffer, for ProduceSync calls
	// made while the broker is down.
	sc := newKafkaClient(t, kc, kafka.Config{Catalogue: cat, ClientID: "sync"}, nil)

	explicit := newGroupLog()
	ecfg, ehandle := explicit.config(topic, "", "explicit")
	ecfg.Partitions, ecfg.Start = allPartitions(parts), nil
	ectx, estop := context.WithCancel(ctx)
	defer estop()
	eerr := make(chan error, 1)
	go func() { eerr <- c.Consume(ectx, ecfg, ehandle) }()
	grouped := newGroupLog()
	gm := startMember(ctx, c, grouped, topic, topic+".group", "member")

	pr := startProducer(ctx, c, topic, parts, 1_000_000, 50, 5*time.Millisecond, roomWait)
	eventually.Before(t, ctx, "1000 records acknowledged", func() bool { return pr.acked.Load() >= 1000 })

	down := time.Now()
	var err error
	if how == "kill" {
		err = kc.Kill()
	} else {
		err = kc.Stop()
	}
	if err != nil {
		t.Fatalf("%s: %v", how, err)
	}
	stoppedAt := time.Now()
	stopped := stoppedAt.Sub(down)
	ackedDown := pr.acked.Load()
	// While it is down: ProduceSync returns when its context ends, but
	// the records it handed to the client stay there and are retried:
	// the error does not mean "not written".
	const syncN = 3
	for i := range syncN {
		sctx, scancel := context.WithTimeout(ctx, 300*time.Millisecond)
		err := sc.ProduceSync(sctx, &kafka.Record{Topic: topic, Partition: int32(i), Value: fmt.Appendf(nil, "sync-%d", i)})
		scancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("ProduceSync while the broker is down: %v, want DeadlineExceeded", err)
		}
	}
	time.Sleep(time.Until(stoppedAt.Add(time.Second))) // down for a while: the buffer fills, Produce gives up
	restart := time.Now()
	if err := kc.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	ready := time.Now()
	ackedUp := pr.acked.Load()
	eventually.Before(t, ctx, "an acknowledgement after the restart", func() bool { return pr.acked.Load() > ackedUp })
	firstAck := time.Since(ready)
	eventually.Before(t, ctx, "1000 more acknowledgements", func() bool { return pr.acked.Load() > ackedUp+1000 })
	outcomes := pr.stop(t, ctx)
	if err := sc.Flush(ctx); err != nil {
		t.Fatalf("flush the ProduceSync client: %v", err)
	}

	var acked, failed int
	for seq, o := range outcomes {
		switch {
		case o.err == nil:
			acked++
		case errors.Is(o.err, context.DeadlineExceeded):
			failed++
		default:
			t.Errorf("record %d failed with %v; only DeadlineExceeded (no room while the broker was down) is expected", seq, o.err)
		}
	}
	t.Logf("%s took %s, broker down for %s; Restart ready after %s, first acknowledgement %s later; %d records: %d acknowledged (%d of them before the %s), %d failed waiting for buffer room",
		how, stopped.Round(time.Millisecond), restart.Sub(stoppedAt).Round(time.Millisecond), ready.Sub(restart).Round(time.Millisecond),
		firstAck.Round(time.Millisecond), len(outcomes), acked, ackedDown, how, failed)

	// The log, read independently.
	ends, err := c.EndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	logged := readLog(t, ctx, kc, topic, ends)
	if len(logged) != acked+syncN {
		t.Errorf("the log holds %d records, %d were acknowledged and %d given to ProduceSync", len(logged), acked, syncN)
	}
	seen := map[int]int{}
	syncSeen := map[string]int{}
	lastSeq := map[int32]int{}
	producerIDs := map[int64]bool{}
	for _, r := range logged {
		if v := string(r.Value); strings.HasPrefix(v, "sync-") {
			syncSeen[v]++
			continue
		}
		producerIDs[r.ProducerID] = true
		seq, err := strconv.Atoi(string(r.Value))
		if err != nil || seq < 0 || seq >= len(outcomes) {
			t.Fatalf("record %d@%d: value %q is not a sequence number we produced", r.Partition, r.Offset, r.Value)
		}
		seen[seq]++
		o := outcomes[seq]
		switch {
		case seen[seq] > 1:
			t.Errorf("record %d is in the log %d times (at %d@%d)", seq, seen[seq], r.Partition, r.Offset)
		case o.err != nil:
			t.Errorf("record %d is in the log at %d@%d, but its Produce failed: %v", seq, r.Partition, r.Offset, o.err)
		case o.partition != r.Partition || o.offset != r.Offset:
			t.Errorf("record %d is at %d@%d, acknowledged at %d@%d", seq, r.Partition, r.Offset, o.partition, o.offset)
		}
		if l, ok := lastSeq[r.Partition]; ok && seq <= l {
			t.Errorf("partition %d: record %d after record %d", r.Partition, seq, l)
		}
		lastSeq[r.Partition] = seq
	}
	// Written once, after the restart, although ProduceSync had failed.
	for i := range syncN {
		if v := fmt.Sprintf("sync-%d", i); syncSeen[v] != 1 {
			t.Errorf("%s (ProduceSync failed on its deadline while the broker was down) is in the log %d times, want 1: the client keeps retrying it", v, syncSeen[v])
		}
	}
	for seq, o := range outcomes {
		if o.err == nil && seen[seq] != 1 {
			t.Errorf("acknowledged record %d (%d@%d) is in the log %d times", seq, o.partition, o.offset, seen[seq])
		}
	}
	t.Logf("producer ids in the log: %v", slices.Collect(maps.Keys(producerIDs)))

	// Both consumers read on across the restart and handled every
	// record exactly once.
	for _, gl := range []*groupLog{explicit, grouped} {
		eventually.Before(t, ctx, "the consumers catch up", func() bool { return gl.caughtUp(ends) })
	}
	estop()
	if err := <-eerr; err != nil {
		t.Errorf("explicit consumer: %v", err)
	}
	gm.stop(t)
	for name, gl := range map[string]*groupLog{"explicit": explicit, "group": grouped} {
		gl.mu.Lock()
		n := 0
		for _, h := range gl.handled {
			n += h
		}
		if n != acked+syncN {
			t.Errorf("%s consumer handled %d records, the log holds %d", name, n, acked+syncN)
		}
		if len(gl.violations) > 0 {
			t.Errorf("%s consumer:\n%s", name, strings.Join(gl.violations, "\n"))
		}
		t.Logf("%s consumer: %d records, Start called %d times", name, n, gl.starts["member"])
		gl.mu.Unlock()
	}
}
