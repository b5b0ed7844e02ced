package kafka

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shoal-mqtt/shoal/internal/testutil/testmetrics"
)

// TestProduceMetrics: every acknowledged record is timed under its topic,
// every failed one counted; recording allocates nothing.
func TestProduceMetrics(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	p, r := testmetrics.New(t, 10)
	c := newTestClient(t, e, Config{Telemetry: p})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for i := range 3 {
		if err := c.ProduceSync(ctx, &Record{Topic: TopicDeliveries, Partition: int32(i), Value: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	// Refused: a keyed topic's record without a key.
	failed := make(chan error, 1)
	c.Produce(ctx, &Record{Topic: TopicMessages, Value: []byte("x")}, func(_ *Record, err error) { failed <- err })
	if err := <-failed; err == nil {
		t.Fatal("a record without a key was produced to a keyed topic")
	}
	d, ok := r.Find("shoal.kafka.produce.duration", "topic", TopicDeliveries)
	if !ok || d.Count != 3 || d.Value <= 0 || d.Value > 3*testTimeout.Seconds() {
		t.Errorf("produce duration of %s: %+v, want 3 samples", TopicDeliveries, d)
	}
	if _, ok := r.Find("shoal.kafka.produce.duration", "topic", TopicMessages); ok {
		t.Errorf("a failed record was timed")
	}
	if n := r.Value("shoal.kafka.produce.errors", "topic", TopicMessages); n != 1 {
		t.Errorf("produce errors of %s = %v, want 1", TopicMessages, n)
	}
	if e, ok := r.Find("shoal.kafka.produce.errors", "topic", TopicDeliveries); !ok || e.Value != 0 {
		t.Errorf("produce errors of %s: %+v, %v; want a series at 0", TopicDeliveries, e, ok)
	}

	start, errRefused := time.Now(), errors.New("refused")
	for name, f := range map[string]func(){
		"acknowledged": func() { c.met.produced(TopicDeliveries, start, nil) },
		"failed":       func() { c.met.produced(TopicDeliveries, start, errRefused) },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s record: %v allocations, want 0", name, n)
		}
	}
}

// TestProduceMetricsTopicsBounded: topics outside the catalogue get
// series of their own until maxMetricTopics topics have one (the
// catalogue's first), then share topic="_other".
func TestProduceMetricsTopicsBounded(t *testing.T) {
	p, r := testmetrics.New(t, 10)
	cat := DefaultCatalogue()
	m, err := newClientMetrics(p, cat)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 * maxMetricTopics {
		m.produced(fmt.Sprintf("extra-%d", i), time.Now(), nil)
	}
	series := r.Points("shoal.kafka.produce.duration")
	if want := maxMetricTopics - len(cat.All()) + 1; len(series) != want {
		t.Errorf("%d series, want %d (and none of the catalogue's, which produced nothing)", len(series), want)
	}
	if _, ok := r.Find("shoal.kafka.produce.duration", "topic", "_other"); !ok {
		t.Error("no _other series")
	}
}

// TestConsumerLagOfFetches: the lag is the high watermark less the next
// offset to consume, known from the first fetched record on; a fetch
// without records moves the watermark only; revoked partitions and a
// stopped consumer have no series.
func TestConsumerLagOfFetches(t *testing.T) {
	p, r := testmetrics.New(t, 10)
	m, err := newClientMetrics(p, DefaultCatalogue())
	if err != nil {
		t.Fatal(err)
	}
	l := m.consumer("t", "g")
	fetch := func(part int32, hw int64, offsets ...int64) kgo.FetchTopicPartition {
		fp := kgo.FetchTopicPartition{Topic: "t", FetchPartition: kgo.FetchPartition{Partition: part, HighWatermark: hw}}
		for _, o := range offsets {
			fp.Records = append(fp.Records, &kgo.Record{Offset: o})
		}
		return fp
	}
	lag := func(part string) (float64, bool) {
		pt, ok := r.Find("shoal.kafka.consumer.lag", "topic", "t", "partition", part, "group", "g")
		return pt.Value, ok
	}
	l.fetched(fetch(1, 20)) // nothing fetched yet: the next offset is unknown
	if _, ok := lag("1"); ok {
		t.Error("a series before any record")
	}
	l.fetched(fetch(1, 20, 8, 9))
	l.fetched(fetch(2, 5, 4))
	if v, ok := lag("1"); !ok || v != 10 {
		t.Errorf("partition 1: lag %v (%v), want 20 - 10", v, ok)
	}
	if v, ok := lag("2"); !ok || v != 0 {
		t.Errorf("partition 2: lag %v (%v), want 0", v, ok)
	}
	l.fetched(fetch(1, 25))
	bad := fetch(1, 99)
	bad.Err = errors.New("fetch failed")
	l.fetched(bad)
	if v, _ := lag("1"); v != 15 {
		t.Errorf("partition 1 after an empty fetch: lag %v, want 25 - 10", v)
	}
	fp := fetch(1, 30, 12)
	if n := testing.AllocsPerRun(100, func() { l.fetched(fp) }); n != 0 {
		t.Errorf("fetched: %v allocations, want 0", n)
	}
	l.revoke([]int32{1})
	if _, ok := lag("1"); ok {
		t.Error("a series of a revoked partition")
	}
	if _, ok := lag("2"); !ok {
		t.Error("partition 2 lost its series with partition 1's revocation")
	}
	m.forget(l)
	if ps := r.Points("shoal.kafka.consumer.lag"); len(ps) != 0 {
		t.Errorf("series of a stopped consumer: %+v", ps)
	}
}

// TestConsumerLagOfConsume: a consumer's partitions report their lag
// while it runs, 0 once it has read everything, with the group attribute
// only in group mode, and nothing once Consume returned.
func TestConsumerLagOfConsume(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	p, r := testmetrics.New(t, 10)
	c := newTestClient(t, e, Config{Telemetry: p})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for range 5 {
		if err := c.ProduceSync(ctx, &Record{Topic: TopicDeliveries, Partition: 2, Value: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	for _, group := range []string{"", "lag-group"} {
		cctx, ccancel := context.WithCancel(ctx)
		cfg := ConsumeConfig{Topic: TopicDeliveries, Group: group}
		if group == "" {
			cfg.Partitions = []int32{2}
		}
		kv := []string{"topic", TopicDeliveries, "partition", "2"}
		if group != "" {
			kv = append(kv, "group", group)
		}
		read := 0
		var lag float64
		var seen bool
		err := c.Consume(cctx, cfg, func(_ context.Context, b Batch) error {
			if read += len(b.Records); read == 5 {
				var pt testmetrics.Point
				pt, seen = r.Find("shoal.kafka.consumer.lag", kv...)
				lag = pt.Value
				ccancel()
			}
			return nil
		})
		ccancel()
		if err != nil {
			t.Fatal(err)
		}
		if !seen || lag != 0 {
			t.Errorf("group %q: lag %v (series: %v) after reading everything, want 0; all: %+v", group, lag, seen, r.Points("shoal.kafka.consumer.lag"))
		}
		if ps := r.Points("shoal.kafka.consumer.lag"); len(ps) != 0 {
			t.Errorf("group %q: series after Consume returned: %+v", group, ps)
		}
	}
}
