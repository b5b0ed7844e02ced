//go:build integration

package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// sentRecord is what a test produced, to compare with what it reads.
type sentRecord struct {
	topic     string
	partition int32
	offset    int64 // as the producer reported it
	byKey     bool  // the key chose the partition
	key       []byte
	value     []byte
	headers   []kafka.Header
}

// Keyed records (by key, and to explicit partitions), records to explicit
// partitions, headers: produced with Produce and ProduceSync, consumed back
// from explicit partitions with every field and in produce order, and
// written by an idempotent producer (acks=all: franz-go allows
// idempotence only with it).
func TestKafkaProduceConsume(t *testing.T) {
	kc := kafkaCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), kafkaTestTimeout)
	defer cancel()
	cat := testCatalogue(t, 8)
	c := newKafkaClient(t, kc, kafka.Config{Catalogue: cat}, nil)
	if err := c.EnsureTopics(ctx); err != nil {
		t.Fatal(err)
	}

	var (
		mu    sync.Mutex
		sent  []*sentRecord
		errs  []error
		async sync.WaitGroup
	)
	add := func(r *kafka.Record) *sentRecord {
		s := &sentRecord{topic: r.Topic, partition: r.Partition, byKey: r.Partition == kafka.PartitionByKey,
			key: r.Key, value: r.Value, headers: slices.Clone(r.Headers)}
		mu.Lock()
		sent = append(sent, s)
		mu.Unlock()
		return s
	}
	done := func(s *sentRecord) func(*kafka.Record, error) {
		return func(r *kafka.Record, err error) {
			defer async.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			s.partition, s.offset = r.Partition, r.Offset
		}
	}
	// One goroutine produces everything, alternating Produce and
	// ProduceSync: the order per partition is the order of the calls.
	env := &eventspb.Envelope{Tenant: "acme", ClientId: "acme-1", Event: &eventspb.Envelope_Publish{Publish: &eventspb.Publish{Message: &eventspb.Message{Topic: "sensors/1", Payload: []byte("21.5"), Qos: 1}}}}
	for i := range 400 {
		key := fmt.Appendf(nil, "acme/sensors/%d", i%23)
		var r *kafka.Record
		switch i % 4 {
		case 0: // an envelope, by key, with a traceparent
			r = kafka.NewRecord(cat.Messages.Name, key, kafka.PartitionByKey, env)
			kafka.WithTraceparent(r, fmt.Sprintf("00-%032x-%016x-01", i, i))
		case 1: // raw, by key, several headers, one empty
			r = &kafka.Record{Topic: cat.Messages.Name, Key: key, Partition: kafka.PartitionByKey,
				Value: fmt.Appendf(nil, "m%d", i), Headers: []kafka.Header{{Key: "seq", Value: []byte(strconv.Itoa(i))}, {Key: "empty", Value: []byte{}}, {Key: "seq", Value: []byte("again")}}}
		case 2: // keyed topic, explicit partition (a broadcast's record)
			r = &kafka.Record{Topic: cat.Messages.Name, Key: []byte("acme/+/wild"), Partition: int32(i % 8), Value: fmt.Appendf(nil, "b%d", i)}
		case 3: // unkeyed topic, explicit partition, no key
			r = &kafka.Record{Topic: cat.Deliveries.Name, Partition: int32(i % 7), Value: fmt.Appendf(nil, "d%d", i)}
		}
		s := add(r)
		if i%8 < 4 {
			async.Add(1)
			c.Produce(ctx, r, done(s))
			continue
		}
		if err := c.ProduceSync(ctx, r); err != nil {
			t.Fatalf("ProduceSync: %v", err)
		}
		s.partition, s.offset = r.Partition, r.Offset
	}
	async.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("Produce: %v", err)
	}

	// Where the producer says each record went.
	want := map[string]map[int32][]*sentRecord{}
	for _, s := range sent {
		if s.byKey {
			if p := kafka.PartitionForKey(s.key, 8); s.partition != p {
				t.Errorf("key %q went to partition %d, PartitionForKey says %d", s.key, s.partition, p)
			}
		}
		if want[s.topic] == nil {
			want[s.topic] = map[int32][]*sentRecord{}
		}
		want[s.topic][s.partition] = append(want[s.topic][s.partition], s)
	}
	for topic, parts := range want {
		for p, ss := range parts {
			for i, s := range ss {
				if s.offset != int64(i) {
					t.Errorf("%s/%d: record %d of the partition was acknowledged at offset %d", topic, p, i, s.offset)
				}
			}
		}
	}

	// Consume each topic from every partition and compare.
	for _, topic := range []string{cat.Messages.Name, cat.Deliveries.Name} {
		n := 0
		for _, ss := range want[topic] {
			n += len(ss)
		}
		got := consumeAll(t, ctx, c, kafka.ConsumeConfig{Topic: topic, Partitions: allPartitions(8)}, n)
		for p, ss := range want[topic] {
			rs := got[p]
			if len(rs) != len(ss) {
				t.Errorf("%s/%d: consumed %d records, want %d", topic, p, len(rs), len(ss))
				continue
			}
			for i, s := range ss {
				r := rs[i]
				if r.Offset != int64(i) || !bytes.Equal(r.Key, s.key) || !bytes.Equal(r.Value, s.value) || !headersEqual(r.Headers, s.headers) {
					t.Errorf("%s/%d: record %d is offset %d key %q value %q headers %v; want offset %d key %q value %q headers %v",
						topic, p, i, r.Offset, r.Key, r.Value, r.Headers, i, s.key, s.value, s.headers)
				}
				if time.Since(r.Timestamp) > time.Minute || r.Timestamp.After(time.Now().Add(time.Second)) {
					t.Errorf("%s/%d@%d: timestamp %v", topic, p, r.Offset, r.Timestamp)
				}
			}
		}
	}
	// The envelopes decode, with their headers.
	got := consumeAll(t, ctx, c, kafka.ConsumeConfig{Topic: cat.Messages.Name, Partitions: allPartitions(8)}, len(sent)-100)
	envs := 0
	for _, rs := range got {
		for _, r := range rs {
			if kafka.EventType(r) != kafka.EventPublish {
				continue
			}
			var e eventspb.Envelope
			if err := kafka.DecodeEnvelope(r, &e); err != nil {
				t.Fatal(err)
			}
			if !e.EqualVT(env) || !strings.HasPrefix(kafka.Traceparent(r), "00-") {
				t.Errorf("%d@%d: envelope %v traceparent %q", r.Partition, r.Offset, &e, kafka.Traceparent(r))
			}
			envs++
		}
	}
	if envs != 100 {
		t.Errorf("%d publish envelopes consumed, want 100", envs)
	}

	// Start offsets: a stored offset resumes after it; an offset past the
	// end of the log (records lost) restarts at the log start, as
	// ConsumeConfig.Start says.
	p0 := want[cat.Deliveries.Name][0]
	from3 := consumeAll(t, ctx, c, kafka.ConsumeConfig{Topic: cat.Deliveries.Name, Partitions: []int32{0},
		Start: func(int32) int64 { return 3 }}, len(p0)-3)
	if rs := from3[0]; len(rs) != len(p0)-3 || rs[0].Offset != 3 {
		t.Errorf("start at 3: got %d records from offset %d", len(rs), rs[0].Offset)
	}
	pastEnd := consumeAll(t, ctx, c, kafka.ConsumeConfig{Topic: cat.Deliveries.Name, Partitions: []int32{0},
		Start: func(int32) int64 { return int64(len(p0)) + 100 }}, len(p0))
	if rs := pastEnd[0]; len(rs) != len(p0) || rs[0].Offset != 0 {
		t.Errorf("start past the end: got %d records from offset %d, want all %d from 0", len(rs), rs[0].Offset, len(p0))
	}

	// Idempotent: every batch carries the producer's id and epoch.
	producers := map[int64]int{}
	for _, r := range readLog(t, ctx, kc, cat.Messages.Name, nil) {
		producers[r.ProducerID]++
		if r.ProducerEpoch < 0 {
			t.Fatalf("record %d@%d has producer epoch %d", r.Partition, r.Offset, r.ProducerEpoch)
		}
	}
	if len(producers) != 1 || producers[-1] != 0 {
		t.Errorf("records by producer id: %v, want all from one idempotent producer (id ≥ 0)", producers)
	}
}

func headersEqual(a, b []kafka.Header) bool {
	return slices.EqualFunc(a, b, func(x, y kafka.Header) bool { return x.Key == y.Key && bytes.Equal(x.Value, y.Value) })
}

func allPartitions(n int32) []int32 {
	ps := make([]int32, n)
	for i := range ps {
		ps[i] = int32(i)
	}
	return ps
}

// consumeAll consumes cfg until n records arrived and returns them by
// partition, checking that each batch is in offset order.
func consumeAll(t *testing.T, ctx context.Context, c *kafka.Client, cfg kafka.ConsumeConfig, n int) map[int32][]*kafka.Record {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := map[int32][]*kafka.Record{}
	total := 0
	err := c.Consume(ctx, cfg, func(_ context.Context, b kafka.Batch) error {
		for _, r := range b.Records {
			if rs := got[b.Partition]; len(rs) > 0 && r.Offset <= rs[len(rs)-1].Offset {
				return fmt.Errorf("partition %d: offset %d after %d", b.Partition, r.Offset, rs[len(rs)-1].Offset)
			}
			got[b.Partition] = append(got[b.Partition], r)
		}
		if total += len(b.Records); total >= n {
			cancel()
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Consume %s: %v", cfg.Topic, err)
	}
	if total != n {
		t.Fatalf("Consume %s: %d records, want %d", cfg.Topic, total, n)
	}
	return got
}

// EndOffsets is the number of records written to each partition, and a
// consumer that has read up to it has read every record.
func TestKafkaEndOffsets(t *testing.T) {
	kc := kafkaCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), kafkaTestTimeout)
	defer cancel()
	const parts = 6
	cat := testCatalogue(t, parts)
	c := newKafkaClient(t, kc, kafka.Config{Catalogue: cat}, nil)
	if err := c.EnsureTopics(ctx); err != nil {
		t.Fatal(err)
	}
	topic := cat.Sessions.Name // keyed
	ends, err := c.EndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[int32]int64{0: 0, 1: 0, 2: 0, 3: 0, 4: 0, 5: 0}; !maps.Equal(ends, want) {
		t.Fatalf("EndOffsets of a new topic = %v, want %v", ends, want)
	}
	want := map[int32]int64{}
	var rs []*kafka.Record
	for i := range 500 {
		key := fmt.Appendf(nil, "acme/client-%d", i%37)
		if i%37 == 5 {
			continue // leaves some partition with fewer records
		}
		rs = append(rs, &kafka.Record{Topic: topic, Key: key, Partition: kafka.PartitionByKey, Value: []byte("v")})
		want[kafka.PartitionForKey(key, parts)]++
	}
	if err := c.ProduceSync(ctx, rs...); err != nil {
		t.Fatal(err)
	}
	for p := range int32(parts) {
		want[p] += 0 // every partition is listed, empty ones with 0
	}
	if ends, err = c.EndOffsets(ctx, topic); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(ends, want) {
		t.Errorf("EndOffsets = %v, want the records per partition %v", ends, want)
	}
	// Agrees with kadm.
	_, adm := newAdmin(t, kc)
	listed, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	listed.Each(func(o kadm.ListedOffset) {
		if o.Err != nil || ends[o.Partition] != o.Offset {
			t.Errorf("kadm lists %d for partition %d (%v), EndOffsets %d", o.Offset, o.Partition, o.Err, ends[o.Partition])
		}
	})
	// A consumer that reached every end offset has read every record.
	got := consumeAll(t, ctx, c, kafka.ConsumeConfig{Topic: topic, Partitions: allPartitions(parts)}, len(rs))
	for p, end := range ends {
		if n := int64(len(got[p])); n != end || (n > 0 && got[p][n-1].Offset != end-1) {
			t.Errorf("partition %d: consumed %d records, end offset %d", p, n, end)
		}
	}
	if _, err := c.EndOffsets(ctx, "it.no.such.topic"); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("EndOffsets of a missing topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
}
