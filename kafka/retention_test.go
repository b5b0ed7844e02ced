package kafka

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
	"github.com/shoal-mqtt/shoal/internal/testutil/testlog"
	"github.com/shoal-mqtt/shoal/internal/testutil/testmetrics"
)

// segmentFiles returns the sizes of a partition's segment files in the
// embedded broker's directory, by base offset.
func segmentFiles(t *testing.T, dir, topic string, partition int32) map[string]int64 {
	t.Helper()
	pdir := filepath.Join(dir, "partitions", fmt.Sprintf("%s-%d", topic, partition))
	ents, err := os.ReadDir(pdir)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]int64)
	for _, ent := range ents {
		if strings.HasSuffix(ent.Name(), ".dat") {
			fi, err := ent.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue // deleted by retention since the listing
			}
			if err != nil {
				t.Fatal(err)
			}
			out[strings.TrimSuffix(ent.Name(), ".dat")] = fi.Size()
		}
	}
	return out
}

func totalSize(files map[string]int64) int64 {
	var n int64
	for _, s := range files {
		n += s
	}
	return n
}

// An event topic keeps at most retention.bytes per partition (plus the
// segment being trimmed): the embedded broker deletes the oldest segments
// beyond it, also for topics it reloaded at start, which kfake's own
// cleaning timer never covers. A compacted topic loses nothing to the
// bound, even when its spec asks for one.
func TestEmbeddedRetentionBytes(t *testing.T) {
	const (
		bound   = 64 << 10
		segment = 16 << 10
		value   = 4 << 10
		records = 64 // 256 KiB per topic, four times the bound
	)
	dir := t.TempDir()
	cat := DefaultCatalogue()
	for _, s := range []*TopicSpec{&cat.Messages, &cat.Sessions, &cat.Presence, &cat.Deliveries, &cat.Quotas} {
		s.Partitions = 1
	}
	cat.Deliveries.RetentionBytes, cat.Deliveries.SegmentBytes = bound, segment
	cat.Presence.RetentionBytes, cat.Presence.SegmentBytes = bound, segment // ignored: compacted
	// The topics are created by one start and filled after a restart.
	e, err := StartEmbedded(EmbeddedConfig{Dir: dir, RetentionCheck: 20 * time.Millisecond}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	c := newTestClient(t, e, Config{Catalogue: cat})
	c.Close()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e, err = StartEmbedded(EmbeddedConfig{Dir: dir, RetentionCheck: 20 * time.Millisecond}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	c = newTestClient(t, e, Config{Catalogue: cat})
	for topic, want := range map[string]string{TopicDeliveries: "65536", TopicPresence: "-1"} {
		if got := topicConfig(t, c.adm, topic, "retention.bytes"); got != want {
			t.Errorf("%s retention.bytes = %s, want %s", topic, got, want)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for i := range records { // one batch each
		v := bytes.Repeat([]byte{byte(i)}, value)
		err := c.ProduceSync(ctx,
			&Record{Topic: TopicDeliveries, Partition: 0, Value: v},
			&Record{Topic: TopicPresence, Partition: PartitionByKey, Key: fmt.Appendf(nil, "t/client-%d", i), Value: v})
		if err != nil {
			t.Fatal(err)
		}
	}

	// Done when the records kept fit the bound (a batch is a record and
	// about 70 bytes more) and the segments they were in are gone but the
	// one being trimmed.
	var files map[string]int64
	var start int64
	eventually.Before(t, ctx, "retention.bytes to delete the oldest segments of "+TopicDeliveries, func() bool {
		starts, err := c.adm.ListStartOffsets(ctx, TopicDeliveries)
		if err != nil {
			t.Fatal(err)
		}
		s, _ := starts.Lookup(TopicDeliveries, 0)
		start, files = s.Offset, segmentFiles(t, dir, TopicDeliveries, 0)
		_, first := files["0"]
		return (records-start)*value <= bound && !first && totalSize(files) <= bound+segment+value
	})
	// The condition counts values only, kfake counts whole batches: a
	// check may trim one more record after it held. Settled when five
	// checks (100 ms) leave the start where it is.
	for settled := start; ; settled = start {
		time.Sleep(100 * time.Millisecond) // five retention checks: the start must stay put that long
		starts, err := c.adm.ListStartOffsets(ctx, TopicDeliveries)
		if err != nil {
			t.Fatal(err)
		}
		s, _ := starts.Lookup(TopicDeliveries, 0)
		if start, files = s.Offset, segmentFiles(t, dir, TopicDeliveries, 0); start == settled {
			break
		}
	}
	if kept := records - start; kept < bound/(value+256) {
		t.Errorf("%s/0 starts at %d after retention: %d records kept, want the %d that fit in %d bytes; segments %v",
			TopicDeliveries, start, kept, bound/(value+256), bound, files)
	}
	kept := consumeN(t, c, ConsumeConfig{Topic: TopicDeliveries, Partitions: []int32{0}}, int(records-start))
	if first, last := kept[0], kept[len(kept)-1]; first.Offset != start || last.Offset != records-1 || last.Value[0] != records-1 {
		t.Errorf("%s/0 holds offsets %d to %d (last value %d), want %d to %d", TopicDeliveries, first.Offset, last.Offset, last.Value[0], start, records-1)
	}

	// Several checks later, the compacted topic still holds every record.
	time.Sleep(100 * time.Millisecond) // real time: kfake checks retention on its own clock, and a check that trims nothing signals nothing
	starts, err := c.adm.ListStartOffsets(ctx, TopicPresence)
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := starts.Lookup(TopicPresence, 0); s.Offset != 0 {
		t.Errorf("%s/0 starts at %d, want 0: a compacted topic must not be trimmed by size", TopicPresence, s.Offset)
	}
	consumeN(t, c, ConsumeConfig{Topic: TopicPresence, Partitions: []int32{0}}, records)
	if n := totalSize(segmentFiles(t, dir, TopicPresence, 0)); n < records*value {
		t.Errorf("%s/0 has %d bytes of segments, want all %d records (≥ %d bytes)", TopicPresence, n, records, records*value)
	}
}

// loadProbeEnv names the data directory a child process of
// TestEmbeddedRestartMemory loads; loadProbeMark starts its answer.
const (
	loadProbeEnv  = "SHOAL_KAFKA_LOAD_PROBE"
	loadProbeMark = "LOAD-PROBE "
)

// loadMemory is what loading a data directory cost a fresh process, in
// bytes: the growth of the heap the runtime mapped while loading (its peak,
// as the runtime never unmaps), what the process holds of it once
// StartEmbedded returned (mapped and not released to the system), and the
// live heap after a collection.
type loadMemory struct {
	HeapGrowth uint64
	HeldGrowth int64
	Live       uint64
}

// probeLoad is the child's side: it loads dir once and prints loadMemory.
func probeLoad(t *testing.T, dir string) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	e, err := StartEmbedded(EmbeddedConfig{Dir: dir}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	m := loadMemory{
		HeapGrowth: after.HeapSys - before.HeapSys,
		HeldGrowth: max(0, int64(after.HeapSys-after.HeapReleased)-int64(before.HeapSys-before.HeapReleased)),
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	m.Live = after.HeapAlloc
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	// The parent reads the line from the test binary's output.
	if _, err := fmt.Fprintf(os.Stdout, "%s%s\n", loadProbeMark, b); err != nil {
		t.Fatal(err)
	}
}

// runLoadProbe loads dir in a child process (a fresh heap) and returns what
// it cost.
func runLoadProbe(t *testing.T, dir string) loadMemory {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestEmbeddedRestartMemory$", "-test.count=1")
	// Under the race detector a process sleeps a second at exit unless
	// told not to.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cmd.Env = append(os.Environ(), loadProbeEnv+"="+dir, "GORACE="+gorace)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("load probe of %s: %v\n%s", dir, err, out)
	}
	for line := range strings.Lines(string(out)) {
		if rest, ok := strings.CutPrefix(line, loadProbeMark); ok {
			var m loadMemory
			if err := json.Unmarshal([]byte(rest), &m); err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
	t.Fatalf("load probe of %s printed no figures:\n%s", dir, out)
	return loadMemory{}
}

// Loading the log at start takes memory that does not grow with the log:
// kfake reads whole segments, one per partition at a time, and the
// embedded broker's segments are small (EmbeddedSegmentBytes); what
// passed through the heap is returned to the system before StartEmbedded
// returns, also after a crash, when kfake rebuilds each partition from
// all its batches at once. Each load runs in a child process, so that its
// heap starts empty. With kfake's default 100 MiB segments and no release,
// the 64 MiB log took 64 MiB of heap and held it.
func TestEmbeddedRestartMemory(t *testing.T) {
	if dir := os.Getenv(loadProbeEnv); dir != "" {
		probeLoad(t, dir)
		return
	}
	const mib = 1 << 20
	cat := DefaultCatalogue()
	for _, s := range []*TopicSpec{&cat.Messages, &cat.Sessions, &cat.Presence, &cat.Deliveries, &cat.Quotas} {
		s.Partitions = 2
	}
	value := bytes.Repeat([]byte("x"), 64<<10)
	results := map[int]map[string]loadMemory{}
	for _, logMiB := range []int{8, 32} {
		dir := t.TempDir()
		e := startEmbedded(t, dir)
		c := newTestClient(t, e, Config{Catalogue: cat})
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		rs := make([]*Record, logMiB*mib/len(value))
		for i := range rs {
			rs[i] = &Record{Topic: TopicDeliveries, Partition: int32(i % 2), Value: value}
		}
		err := c.ProduceSync(ctx, rs...)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		results[logMiB] = map[string]loadMemory{"clean": runLoadProbe(t, dir)}
		// A crash leaves no snapshot that matches the segments.
		snaps, err := filepath.Glob(filepath.Join(dir, "partitions", "*", "snapshot.json"))
		if err != nil || len(snaps) == 0 {
			t.Fatalf("no snapshots to remove (%v)", err)
		}
		for _, s := range snaps {
			if err := os.Remove(s); err != nil {
				t.Fatal(err)
			}
		}
		results[logMiB]["crash"] = runLoadProbe(t, dir)
	}
	for logMiB, byStop := range results {
		for stop, m := range byStop {
			t.Logf("%d MiB log, %s stop: heap grew %.1f MiB while loading, held %.1f MiB more after StartEmbedded, %.1f MiB live",
				logMiB, stop, float64(m.HeapGrowth)/mib, float64(m.HeldGrowth)/mib, float64(m.Live)/mib)
			if m.HeldGrowth > 8*mib {
				t.Errorf("%d MiB log, %s stop: the process holds %.1f MiB more after StartEmbedded, want ≤ 8 MiB", logMiB, stop, float64(m.HeldGrowth)/mib)
			}
			if m.Live > 8*mib {
				t.Errorf("%d MiB log, %s stop: %.1f MiB live after loading, want ≤ 8 MiB", logMiB, stop, float64(m.Live)/mib)
			}
		}
		if g := byStop["clean"].HeapGrowth; g > 16*mib {
			t.Errorf("%d MiB log: the heap grew %.1f MiB while loading after a clean stop, want ≤ 16 MiB", logMiB, float64(g)/mib)
		}
	}
	if small, large := results[8]["clean"].HeapGrowth, results[32]["clean"].HeapGrowth; large > small+8*mib {
		t.Errorf("loading 32 MiB of log grew the heap by %.1f MiB, 8 MiB by %.1f: it grows with the log", float64(large)/mib, float64(small)/mib)
	}
}

// TestConsumerReportsSkippedRecords: records that retention deleted before
// a consumer read them are passed over, as Kafka's consumers do, but not
// silently. A consumer that starts below the log's start, whether it
// fetches, is in a group or is local (the feed's catch-up), logs a warning
// that names the gap and counts it in shoal.kafka.consumer.skipped, then
// reads what follows. Starting at the beginning, or where the log starts,
// reports nothing, nor do a compacted topic's gaps.
func TestConsumerReportsSkippedRecords(t *testing.T) {
	const deleted, kept = 5, 2
	e, err := StartEmbedded(EmbeddedConfig{Dir: t.TempDir(), RetentionCheck: 20 * time.Millisecond}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	cat := DefaultCatalogue()
	for _, s := range cat.specs() {
		s.Partitions = 2
	}
	p, r := testmetrics.New(t, 10)
	logs, log := testlog.NewLogger()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	c, err := NewClient(ctx, e.ClientConfig(Config{Catalogue: cat, Telemetry: p}), log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.EnsureTopics(ctx); err != nil {
		t.Fatal(err)
	}
	// Older than retention.ms: the next check deletes them.
	old := time.Now().Add(-DefaultRetention - 24*time.Hour)
	for i := range deleted {
		if err := c.ProduceSync(ctx, &Record{Topic: TopicDeliveries, Partition: 0, Value: []byte{byte(i)}, Timestamp: old}); err != nil {
			t.Fatal(err)
		}
	}
	eventually.Before(t, ctx, "retention to delete the old records", func() bool {
		starts, err := c.StartOffsets(ctx, TopicDeliveries)
		if err != nil {
			t.Fatal(err)
		}
		return starts[0] == deleted
	})
	for i := range kept {
		if err := c.ProduceSync(ctx, &Record{Topic: TopicDeliveries, Partition: 0, Value: []byte{byte(deleted + i)}}); err != nil {
			t.Fatal(err)
		}
	}
	warning := func(group string) string {
		if group != "" {
			group = " group=" + group
		}
		return fmt.Sprintf("topic=%s partition=0%s from=0 to=%d records=%d", TopicDeliveries, group, deleted, deleted)
	}
	for _, tc := range []struct {
		name  string
		cfg   ConsumeConfig
		start int64
		warns bool
	}{
		{"fetching", ConsumeConfig{Topic: TopicDeliveries, Partitions: []int32{0}}, 0, true},
		{"local", ConsumeConfig{Topic: TopicDeliveries, Partitions: []int32{0}, Local: true}, 0, true},
		{"group", ConsumeConfig{Topic: TopicDeliveries, Group: "skip-test"}, 0, true},
		{"from the beginning", ConsumeConfig{Topic: TopicDeliveries, Partitions: []int32{0}}, StartAtBeginning, false},
		{"from the log's start", ConsumeConfig{Topic: TopicDeliveries, Partitions: []int32{0}, Local: true}, deleted, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(logs.Lines("skipped"))
			tc.cfg.Start = func(p int32) int64 {
				if p == 0 {
					return tc.start
				}
				return StartAtBeginning
			}
			recs := consumeN(t, c, tc.cfg, kept)
			if recs[0].Offset != deleted || recs[kept-1].Offset != deleted+kept-1 {
				t.Errorf("consumed offsets %d to %d, want %d to %d", recs[0].Offset, recs[kept-1].Offset, deleted, deleted+kept-1)
			}
			lines := logs.Lines("skipped")[before:]
			switch {
			case !tc.warns && len(lines) > 0:
				t.Errorf("a consumer that skipped nothing warned: %q", lines)
			case tc.warns && (len(lines) != 1 || !strings.Contains(lines[0], "level=WARN") ||
				!strings.Contains(lines[0], warning(tc.cfg.Group))):
				t.Errorf("warnings %q, want one with %q", lines, warning(tc.cfg.Group))
			}
		})
	}
	if n := r.Value("shoal.kafka.consumer.skipped", "topic", TopicDeliveries); n != 3*deleted {
		t.Errorf("shoal.kafka.consumer.skipped{topic=%s} = %v, want %d", TopicDeliveries, n, 3*deleted)
	}
	if s, ok := r.Find("shoal.kafka.consumer.skipped", "topic", TopicMessages); !ok || s.Value != 0 {
		t.Errorf("shoal.kafka.consumer.skipped{topic=%s}: %+v, %v; want a series at 0", TopicMessages, s, ok)
	}

	// A compacted topic's gaps are not losses.
	c.skipped(TopicPresence, "", 0, 0, 3)
	if n := r.Value("shoal.kafka.consumer.skipped", "topic", TopicPresence); n != 0 {
		t.Errorf("a compacted topic's gap was counted: %v", n)
	}
}
