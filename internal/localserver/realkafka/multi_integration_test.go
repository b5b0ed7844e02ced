//go:build integration

package realkafka

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Three nodes: a topic replicated on all of them takes acks=all writes
// while any one node is killed, stopped or paused, and a node that comes
// back registers again and catches up.
func TestNodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir := t.TempDir()
	logs := make([]*os.File, 3)
	for i := range logs {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("kafka-%d.log", i+1)))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = f.Close() }()
		logs[i] = f
	}
	began := time.Now()
	m, err := StartNodes(ctx, filepath.Join(dir, "cluster"), 3, func(i int) io.Writer { return logs[i] }, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Stop(); err != nil {
			t.Error(err)
		}
	})
	t.Logf("3 nodes started in %s on %v", time.Since(began).Round(time.Millisecond), m.Brokers())

	cl, err := kgo.NewClient(kgo.SeedBrokers(m.Brokers()...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DefaultProduceTopic("nodes.t"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 3, -1, nil, "nodes.t"); err != nil {
		t.Fatal(err)
	}
	td, err := adm.ListTopics(ctx, "nodes.t")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range td["nodes.t"].Partitions {
		if len(p.Replicas) != 3 {
			t.Fatalf("partition %d has replicas %v, want 3 (default.replication.factor)", p.Partition, p.Replicas)
		}
	}
	produced := 0
	produce := func(what string) {
		t.Helper()
		pctx, pcancel := context.WithTimeout(ctx, 60*time.Second)
		defer pcancel()
		for i := range 30 {
			if err := cl.ProduceSync(pctx, &kgo.Record{Key: []byte{byte(i)}, Value: []byte(what)}).FirstErr(); err != nil {
				t.Fatalf("%s: produce: %v", what, err)
			}
			produced++
		}
	}
	produce("all up")
	leader := m.NodeByID(td["nodes.t"].Partitions[0].Leader)
	faults := []struct {
		name      string
		down, up  func() error
		restarted bool
	}{
		{"kill the leader of partition 0", leader.Kill, func() error { return leader.Restart(ctx) }, true},
		{"stop node 2", m.Node(1).Stop, func() error { return m.Node(1).Restart(ctx) }, true},
		{"pause node 3", m.Node(2).Pause, m.Node(2).Resume, false},
	}
	for _, f := range faults {
		if err := f.down(); err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		produce(f.name)
		began := time.Now()
		if err := f.up(); err != nil {
			t.Fatalf("%s, back: %v", f.name, err)
		}
		t.Logf("%s: writes went on; back in %s", f.name, time.Since(began).Round(time.Millisecond))
	}
	ends, err := adm.ListEndOffsets(ctx, "nodes.t")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total != int64(produced) {
		t.Errorf("nodes.t holds %d records, %d were acknowledged", total, produced)
	}
}
