package kafka

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
	"github.com/twmb/franz-go/pkg/kadm"
)

func TestStartEmbeddedRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "10.1.2.3:0", "192.168.0.1:9092", "example.com:0", "127.0.0.1", "127.0.0.1:notaport"} {
		t.Run(addr, func(t *testing.T) {
			dir := t.TempDir()
			e, err := StartEmbedded(EmbeddedConfig{Dir: dir, Addr: addr}, testLogger(t))
			if err == nil {
				_ = e.Close()
				t.Fatalf("StartEmbedded(%q) succeeded", addr)
			}
			if !strings.Contains(err.Error(), "kafka.embedded_addr") {
				t.Errorf("error %q does not name kafka.embedded_addr", err)
			}
		})
	}
	if _, err := StartEmbedded(EmbeddedConfig{}, testLogger(t)); err == nil || !strings.Contains(err.Error(), "kafka.embedded.dir") {
		t.Errorf("StartEmbedded without dir: %v", err)
	}
}

func TestStartEmbeddedLoopbackAddrs(t *testing.T) {
	for _, addr := range []string{"", "127.0.0.1:0", "localhost:0", "127.0.0.2:0"} {
		t.Run(addr, func(t *testing.T) {
			e := startEmbedded2(t, EmbeddedConfig{Dir: t.TempDir(), Addr: addr})
			got := e.Addrs()
			if len(got) != 1 {
				t.Fatalf("Addrs() = %v", got)
			}
			if want := map[string]string{"": EmbeddedHost + ":", "127.0.0.1:0": "127.0.0.1:", "127.0.0.2:0": "127.0.0.2:"}[addr]; want != "" && !strings.HasPrefix(got[0], want) {
				t.Errorf("Addrs() = %v, want %s…", got, want)
			}
			newTestClient(t, e, Config{}) // a client reaches it
		})
	}
}

func startEmbedded2(t *testing.T, cfg EmbeddedConfig) *Embedded {
	t.Helper()
	e, err := StartEmbedded(cfg, testLogger(t))
	if err != nil {
		t.Fatalf("StartEmbedded(%+v): %v", cfg, err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func TestStartEmbeddedDirInUse(t *testing.T) {
	dir := t.TempDir()
	e := startEmbedded(t, dir)
	if e2, err := StartEmbedded(EmbeddedConfig{Dir: dir}, testLogger(t)); err == nil {
		_ = e2.Close()
		t.Fatal("a second StartEmbedded on the same dir succeeded")
	} else if !strings.Contains(err.Error(), "held by another process") {
		t.Errorf("error = %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	startEmbedded(t, dir) // free again
}

// sent is what a test produced, to compare with what it consumes.
type sent struct {
	topic     string
	key       []byte
	partition int32
	env       *eventspb.Envelope
	tp        string
}

// produceMixed produces n keyed publishes to messages and n deliveries to
// explicit partitions, asynchronously, and returns them in produce order.
func produceMixed(t *testing.T, c *Client, n int) []sent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	envs := testEnvelopes()
	var out []sent
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	done := func(r *Record, err error) {
		defer wg.Done()
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			errs = append(errs, err)
		case r.Offset < 0:
			errs = append(errs, fmt.Errorf("record to %s/%d has offset %d", r.Topic, r.Partition, r.Offset))
		}
	}
	for i := range n {
		pub := envs[EventPublish].CloneVT()
		pub.MessageId.Seq = uint64(i)
		key := fmt.Appendf(nil, "acme/sensors/%d", i%37)
		s := sent{topic: TopicMessages, key: key, partition: PartitionForKey(key, 16), env: pub,
			tp: fmt.Sprintf("00-%032x-%016x-01", i, i)}
		r := NewRecord(s.topic, s.key, PartitionByKey, s.env)
		WithTraceparent(r, s.tp)
		out = append(out, s)
		wg.Add(1)
		c.Produce(ctx, r, done)

		del := envs[EventDelivery].CloneVT()
		del.MessageId.Seq = uint64(i)
		s = sent{topic: TopicDeliveries, partition: int32(i % 5), env: del}
		out = append(out, s)
		wg.Add(1)
		c.Produce(ctx, NewRecord(s.topic, nil, s.partition, s.env), done)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("produce: %v", err)
	}
	return out
}

// checkConsumed checks that got (consumed from topic) holds exactly the
// records of want for that topic, in produce order per partition.
func checkConsumed(t *testing.T, topic string, want []sent, got []*Record) {
	t.Helper()
	byPart := map[int32][]sent{}
	for _, s := range want {
		if s.topic == topic {
			byPart[s.partition] = append(byPart[s.partition], s)
		}
	}
	gotByPart := map[int32][]*Record{}
	for _, r := range got {
		gotByPart[r.Partition] = append(gotByPart[r.Partition], r)
	}
	if len(gotByPart) != len(byPart) {
		t.Errorf("%s: records in %d partitions, want %d", topic, len(gotByPart), len(byPart))
	}
	var env eventspb.Envelope
	for p, ws := range byPart {
		gs := gotByPart[p]
		if len(gs) != len(ws) {
			t.Errorf("%s/%d: %d records, want %d", topic, p, len(gs), len(ws))
			continue
		}
		for i, w := range ws {
			r := gs[i]
			if r.Offset != int64(i) {
				t.Errorf("%s/%d: record %d has offset %d", topic, p, i, r.Offset)
			}
			if !bytes.Equal(r.Key, w.key) {
				t.Errorf("%s/%d@%d: key %q, want %q", topic, p, r.Offset, r.Key, w.key)
			}
			if got := EventType(r); got != EnvelopeType(w.env) {
				t.Errorf("%s/%d@%d: type %q, want %q", topic, p, r.Offset, got, EnvelopeType(w.env))
			}
			if got := Traceparent(r); got != w.tp {
				t.Errorf("%s/%d@%d: traceparent %q, want %q", topic, p, r.Offset, got, w.tp)
			}
			// The record's timestamp is the event's; now without one.
			if us := w.env.GetTimestampUs(); us > 0 && !r.Timestamp.Equal(time.UnixMicro(us).Truncate(time.Millisecond)) ||
				us == 0 && (r.Timestamp.IsZero() || time.Since(r.Timestamp) > time.Hour) {
				t.Errorf("%s/%d@%d: timestamp %v, event time %d µs", topic, p, r.Offset, r.Timestamp, us)
			}
			if err := DecodeEnvelope(r, &env); err != nil {
				t.Fatalf("%s/%d@%d: %v", topic, p, r.Offset, err)
			}
			if !env.EqualVT(w.env) {
				t.Errorf("%s/%d@%d: envelope %v, want %v", topic, p, r.Offset, &env, w.env)
			}
		}
	}
}

func TestProduceConsumeRoundTrip(t *testing.T) {
	// Uncompressed records alias the fetch response, compressed ones the
	// decompression buffer: both must outlive the handler.
	for _, compression := range []string{"none", "lz4"} {
		t.Run(compression, func(t *testing.T) {
			e := startEmbedded(t, t.TempDir())
			c := newTestClient(t, e, Config{Compression: compression})
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			if err := c.EnsureTopics(ctx); err != nil { // a second time: idempotent
				t.Fatalf("EnsureTopics again: %v", err)
			}
			const n = 300
			want := produceMixed(t, c, n)

			// consumeN keeps the records of every batch; they are
			// checked only after Consume returned.
			msgs := consumeN(t, c, ConsumeConfig{Topic: TopicMessages, Partitions: allPartitions(16)}, n)
			checkConsumed(t, TopicMessages, want, msgs)
			dels := consumeN(t, c, ConsumeConfig{Topic: TopicDeliveries, Partitions: allPartitions(16)}, n)
			checkConsumed(t, TopicDeliveries, want, dels)
		})
	}
}

// The partition the producer chose for every keyed record is the one
// PartitionForKey computes, for many keys.
func TestPartitionForKeyMatchesProduce(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	const n = 2000
	rs := make([]*Record, n)
	for i := range rs {
		rs[i] = &Record{Topic: TopicSessions, Key: fmt.Appendf(nil, "tenant-%d/client-%d", i%13, i), Partition: PartitionByKey, Value: []byte("v")}
	}
	if err := c.ProduceSync(ctx, rs...); err != nil {
		t.Fatal(err)
	}
	used := map[int32]bool{}
	for _, r := range rs {
		if want := PartitionForKey(r.Key, c.Partitions(TopicSessions)); r.Partition != want {
			t.Fatalf("key %q went to partition %d, PartitionForKey says %d", r.Key, r.Partition, want)
		}
		used[r.Partition] = true
	}
	if len(used) != 16 {
		t.Errorf("%d keys used %d partitions of 16", n, len(used))
	}
	// And the broker agrees: consume them back.
	got := consumeN(t, c, ConsumeConfig{Topic: TopicSessions, Partitions: allPartitions(16)}, n)
	for _, r := range got {
		if want := PartitionForKey(r.Key, 16); r.Partition != want {
			t.Fatalf("consumed key %q from partition %d, PartitionForKey says %d", r.Key, r.Partition, want)
		}
	}
}

// A keyed topic's record with a partition ≥ 0 goes there (a broadcast), one
// with PartitionByKey where its key hashes.
func TestKeyedTopicExplicitPartition(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	key := []byte("acme/sensors/+/temp")
	env := testEnvelopes()[EventSubscriptionChange]
	var rs []*Record
	for p := range c.Partitions(TopicMessages) {
		rs = append(rs, NewRecord(TopicMessages, key, p, env))
	}
	byKey := NewRecord(TopicMessages, key, PartitionByKey, env)
	rs = append(rs, byKey)
	if err := c.ProduceSync(ctx, rs...); err != nil {
		t.Fatal(err)
	}
	for p, r := range rs[:16] {
		if r.Partition != int32(p) || r.Offset != 0 {
			t.Errorf("broadcast record %d went to %d@%d", p, r.Partition, r.Offset)
		}
	}
	if want := PartitionForKey(key, 16); byKey.Partition != want || byKey.Offset != 1 {
		t.Errorf("keyed record went to %d@%d, want %d@1", byKey.Partition, byKey.Offset, want)
	}
}

func TestDurableAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	e := startEmbedded(t, dir)
	c := newTestClient(t, e, Config{})
	const n = 100
	want := produceMixed(t, c, n)
	c.Close()
	if err := e.Close(); err != nil {
		t.Fatalf("Embedded.Close: %v", err)
	}

	e = startEmbedded(t, dir)
	c = newTestClient(t, e, Config{}) // EnsureTopics checks partitions and cleanup.policy
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	configs, err := c.adm.DescribeTopicConfigs(ctx, TopicPresence, TopicMessages)
	if err != nil {
		t.Fatal(err)
	}
	for topic, wantCfg := range map[string]map[string]string{
		TopicPresence: {"cleanup.policy": "compact", "retention.ms": "-1"},
		TopicMessages: {"cleanup.policy": "delete", "retention.ms": "604800000"},
	} {
		rc, err := configs.On(topic, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range wantCfg {
			found := false
			for _, cfg := range rc.Configs {
				if cfg.Key == k {
					found = true
					if cfg.MaybeValue() != v {
						t.Errorf("%s %s = %q after restart, want %q", topic, k, cfg.MaybeValue(), v)
					}
				}
			}
			if !found {
				t.Errorf("%s: no %s after restart", topic, k)
			}
		}
	}
	msgs := consumeN(t, c, ConsumeConfig{Topic: TopicMessages, Partitions: allPartitions(16)}, n)
	checkConsumed(t, TopicMessages, want, msgs)
	dels := consumeN(t, c, ConsumeConfig{Topic: TopicDeliveries, Partitions: allPartitions(16)}, n)
	checkConsumed(t, TopicDeliveries, want, dels)

	// New records continue the offsets.
	r := NewRecord(TopicDeliveries, nil, 0, testEnvelopes()[EventKick])
	if err := c.ProduceSync(ctx, r); err != nil {
		t.Fatal(err)
	}
	if r.Offset != 20 { // 100 deliveries over 5 partitions
		t.Errorf("first offset after restart in deliveries/0 = %d, want 20", r.Offset)
	}
}

func TestEnsureTopicsRefusesMismatch(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	c, err := NewClient(ctx, e.ClientConfig(Config{}), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Topics made by someone else, unlike the catalogue.
	if _, err := c.adm.CreateTopic(ctx, 4, 1, nil, TopicMessages); err != nil {
		t.Fatal(err)
	}
	if _, err := c.adm.CreateTopic(ctx, 32, 1, nil, TopicSessions); err != nil {
		t.Fatal(err)
	}
	if _, err := c.adm.CreateTopic(ctx, 16, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("delete")}, TopicPresence); err != nil {
		t.Fatal(err)
	}
	if _, err := c.adm.CreateTopic(ctx, 20, 1, nil, TopicDeliveries); err != nil {
		t.Fatal(err)
	}
	err = c.EnsureTopics(ctx)
	if err == nil {
		t.Fatal("EnsureTopics accepted mismatching topics")
	}
	for _, want := range []string{
		"ensure topic shoal.messages: it has 4 partitions, the catalogue needs 16",
		"ensure topic shoal.sessions: it has 32 partitions, the catalogue says 16",
		`ensure topic shoal.presence: cleanup.policy is "delete", the catalogue needs "compact"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("EnsureTopics error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), TopicDeliveries) {
		t.Errorf("more partitions on an unkeyed topic should be accepted: %v", err)
	}
}

func TestProduceRefusals(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	tests := []struct {
		r    *Record
		want string
	}{
		{&Record{Topic: TopicMessages, Value: []byte("x")}, "keyed and the record has no key"},
		{&Record{Topic: TopicDeliveries, Partition: 16, Value: []byte("x")}, "partition 16 is outside [0, 16)"},
		{&Record{Topic: TopicDeliveries, Partition: -1, Value: []byte("x")}, "partition -1 is outside"},
		{&Record{Value: []byte("x")}, "no topic"},
	}
	for _, tt := range tests {
		errc := make(chan error, 2)
		c.Produce(ctx, tt.r, func(_ *Record, err error) { errc <- err })
		select {
		case err := <-errc:
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Produce(%+v): %v, want %q", tt.r, err, tt.want)
			}
		case <-ctx.Done():
			t.Fatal("done was not called")
		}
		good := &Record{Topic: TopicDeliveries, Value: []byte("ok")}
		if err := c.ProduceSync(ctx, good, tt.r); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ProduceSync(%+v): %v, want %q", tt.r, err, tt.want)
		}
	}
	// Nothing reached deliveries: ProduceSync refused before producing.
	ends, err := c.adm.ListEndOffsets(ctx, TopicDeliveries)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset != 0 {
			t.Errorf("deliveries/%d has end offset %d", o.Partition, o.Offset)
		}
	})
}

func TestProduceSyncContext(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{})

	// Already cancelled: refused, nothing written.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := NewRecord(TopicMessages, []byte("k"), PartitionByKey, testEnvelopes()[EventPublish])
	if err := c.ProduceSync(ctx, r); !errors.Is(err, context.Canceled) {
		t.Fatalf("ProduceSync(cancelled) = %v, want context.Canceled", err)
	}
	errc := make(chan error, 1)
	c.Produce(ctx, r, func(_ *Record, err error) { errc <- err })
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Produce(cancelled) done(%v), want context.Canceled", err)
	}

	// The broker goes away: ProduceSync returns when its context ends.
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	r = NewRecord(TopicMessages, []byte("k"), PartitionByKey, testEnvelopes()[EventPublish])
	if err := c.ProduceSync(ctx, r); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ProduceSync(broker down) = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("ProduceSync took %s after its deadline", d)
	}
	// Close fails what is still buffered.
	errc = make(chan error, 1)
	c.Produce(context.Background(), NewRecord(TopicMessages, []byte("k"), PartitionByKey, testEnvelopes()[EventPublish]),
		func(_ *Record, err error) { errc <- err })
	c.Close()
	select {
	case err := <-errc:
		if err == nil {
			t.Error("a record buffered at Close succeeded")
		}
	case <-time.After(testTimeout):
		t.Fatal("Close did not fail the buffered record")
	}
}

// ProduceAll returns before the records are acknowledged; its Pending
// says when they are, and they are written in order.
func TestProduceAll(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{})
	ctx := context.Background()
	var rs []*Record
	for i := range 20 {
		env := testEnvelopes()[EventPublish]
		env.MessageId = &eventspb.MessageID{Seq: uint64(i + 1)}
		rs = append(rs, NewRecord(TopicDeliveries, nil, 2, env))
	}
	first, err := c.ProduceAll(ctx, rs[:10]...)
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.ProduceAll(ctx, rs[10:]...)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-second.Done():
	case <-time.After(testTimeout):
		t.Fatal("the second call's records were not acknowledged")
	}
	if err := second.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := first.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if r.Partition != 2 || r.Offset != int64(i) {
			t.Errorf("record %d at %d/%d, want 2/%d (in call order)", i, r.Partition, r.Offset, i)
		}
	}
	got := consumeN(t, c, ConsumeConfig{Topic: TopicDeliveries, Partitions: []int32{2}}, len(rs))
	env := &eventspb.Envelope{}
	for i, r := range got {
		if err := DecodeEnvelope(r, env); err != nil || env.GetMessageId().GetSeq() != uint64(i+1) {
			t.Errorf("record %d: message seq %d, %v; want %d", i, env.GetMessageId().GetSeq(), err, i+1)
		}
	}

	// Nothing to produce: done at once. A refused record or a done
	// context: nothing produced.
	none, err := c.ProduceAll(ctx)
	if err != nil || none.Wait(ctx) != nil {
		t.Errorf("ProduceAll() = %v", err)
	}
	if _, err := c.ProduceAll(ctx, NewRecord(TopicDeliveries, nil, 999, env)); err == nil {
		t.Error("ProduceAll of a record to partition 999: no error")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.ProduceAll(cctx, NewRecord(TopicDeliveries, nil, 2, env)); !errors.Is(err, context.Canceled) {
		t.Errorf("ProduceAll(cancelled) = %v, want context.Canceled", err)
	}
	// Wait ends with its context while the records cannot be written.
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	p, err := c.ProduceAll(ctx, NewRecord(TopicDeliveries, nil, 2, env))
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer wcancel()
	if err := p.Wait(wctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait with the broker gone = %v, want context.DeadlineExceeded", err)
	}
}

// Records accepted beyond MaxBufferedRecords wait; the wait ends with ctx.
func TestProduceWaitsForBufferRoom(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{MaxBufferedRecords: 2})
	if err := e.Close(); err != nil { // nothing is acknowledged any more
		t.Fatal(err)
	}
	var failed atomic.Int32
	for range 2 {
		c.Produce(context.Background(), NewRecord(TopicDeliveries, nil, 0, testEnvelopes()[EventKick]),
			func(_ *Record, err error) {
				if err != nil {
					failed.Add(1)
				}
			})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	errc := make(chan error, 1)
	start := time.Now()
	c.Produce(ctx, NewRecord(TopicDeliveries, nil, 0, testEnvelopes()[EventKick]), func(_ *Record, err error) { errc <- err })
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("the third Produce returned after %s, want it to wait for room until ctx ended", d)
	}
	if err := <-errc; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("third record: %v, want context.DeadlineExceeded", err)
	}
	c.Close()
	if failed.Load() != 2 {
		t.Errorf("%d of the 2 buffered records failed at Close", failed.Load())
	}
}

func TestConsumeGroupStartOffsets(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	// 10 records in each of the 16 partitions of deliveries.
	var rs []*Record
	for p := range int32(16) {
		for i := range 10 {
			rs = append(rs, &Record{Topic: TopicDeliveries, Partition: p, Value: fmt.Appendf(nil, "%d-%d", p, i)})
		}
	}
	if err := c.ProduceSync(ctx, rs...); err != nil {
		t.Fatal(err)
	}
	// The service stored "consumed up to offset p" for partition p (so it
	// starts at p+1); partition 15 starts at the end, partition 0 at the
	// beginning.
	start := func(p int32) int64 {
		switch p {
		case 0:
			return StartAtBeginning
		case 15:
			return StartAtEnd
		}
		return int64(p%10) + 1
	}
	want := 0
	for p := range int32(16) {
		switch off := start(p); off {
		case StartAtBeginning:
			want += 10
		case StartAtEnd:
		default:
			want += 10 - int(off)
		}
	}
	var (
		events   []string
		assigned []int32
		revoked  []int32
		got      []*Record
		firstOff = map[int32]int64{}
	)
	cctx, ccancel := context.WithTimeout(ctx, testTimeout)
	defer ccancel()
	err := c.Consume(cctx, ConsumeConfig{
		Topic: TopicDeliveries,
		Group: "test-group",
		Start: start,
		OnAssigned: func(_ context.Context, ps []int32) {
			events = append(events, "assigned")
			assigned = append(assigned, ps...)
		},
		OnRevoked: func(_ context.Context, ps []int32) {
			events = append(events, "revoked")
			revoked = append(revoked, ps...)
		},
	}, func(_ context.Context, b Batch) error {
		if len(events) == 0 || events[len(events)-1] != "assigned" && events[len(events)-1] != "batch" {
			t.Errorf("batch of %d before its partition was assigned (events %v)", b.Partition, events)
		}
		events = append(events, "batch")
		if _, ok := firstOff[b.Partition]; !ok {
			firstOff[b.Partition] = b.Records[0].Offset
		}
		got = append(got, b.Records...)
		if len(got) >= want {
			ccancel()
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Consume: %v", err)
	}
	if len(got) != want {
		t.Fatalf("consumed %d records, want %d", len(got), want)
	}
	for p, off := range firstOff {
		wantOff := start(p)
		if wantOff == StartAtBeginning {
			wantOff = 0
		}
		if off != wantOff {
			t.Errorf("partition %d started at offset %d, want %d", p, off, wantOff)
		}
	}
	if _, ok := firstOff[15]; ok {
		t.Error("partition 15 (start at end) delivered records")
	}
	slices.Sort(assigned)
	slices.Sort(revoked)
	if !slices.Equal(assigned, allPartitions(16)) || !slices.Equal(revoked, allPartitions(16)) {
		t.Errorf("assigned %v, revoked %v, want all 16 partitions each", assigned, revoked)
	}
	if events[len(events)-1] != "revoked" {
		t.Errorf("last event %q, want revoked", events[len(events)-1])
	}
	// Nothing was committed: the group has no offsets.
	offs, err := c.adm.FetchOffsets(ctx, "test-group")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(offs); n != 0 {
		t.Errorf("the group committed offsets for %d topics", n)
	}
}

// TestConsumePolls checks that a poll's batches come in one call, each
// partition at most once and in offset order, and that every record
// arrives exactly once.
func TestConsumePolls(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	const perPartition = 50
	parts := []int32{0, 1, 2, 3}
	var recs []*Record
	for i := range perPartition {
		for _, p := range parts {
			recs = append(recs, &Record{Topic: TopicDeliveries, Partition: p, Value: []byte{byte(i)}})
		}
	}
	if err := c.ProduceSync(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	next := map[int32]int64{}
	got, multi := 0, false
	err := c.ConsumePolls(cctx, ConsumeConfig{Topic: TopicDeliveries, Partitions: parts}, func(_ context.Context, bs []Batch) error {
		seen := map[int32]bool{}
		for _, b := range bs {
			if seen[b.Partition] {
				return fmt.Errorf("partition %d twice in one poll", b.Partition)
			}
			seen[b.Partition] = true
			if len(b.Records) == 0 {
				return fmt.Errorf("empty batch of partition %d", b.Partition)
			}
			for _, r := range b.Records {
				if r.Offset != next[b.Partition] {
					return fmt.Errorf("partition %d: offset %d, want %d", b.Partition, r.Offset, next[b.Partition])
				}
				next[b.Partition]++
				got++
			}
		}
		multi = multi || len(bs) > 1
		if got == len(recs) {
			stop()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got != len(recs) {
		t.Fatalf("consumed %d records, want %d", got, len(recs))
	}
	if !multi {
		t.Error("no poll carried more than one partition: records already in the log should come together")
	}
}

func TestConsumeHandlerError(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := c.ProduceSync(ctx, &Record{Topic: TopicDeliveries, Partition: 3, Value: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	var assigned, revoked []int32
	err := c.Consume(ctx, ConsumeConfig{
		Topic:      TopicDeliveries,
		Partitions: []int32{3, 1},
		OnAssigned: func(_ context.Context, ps []int32) { assigned = ps },
		OnRevoked:  func(_ context.Context, ps []int32) { revoked = ps },
	}, func(context.Context, Batch) error { return boom })
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "consume shoal.deliveries: partition 3 at offset 0") {
		t.Fatalf("Consume = %v, want boom wrapped with where", err)
	}
	if !slices.Equal(assigned, []int32{3, 1}) || !slices.Equal(revoked, []int32{3, 1}) {
		t.Errorf("assigned %v, revoked %v", assigned, revoked)
	}
	for _, bad := range []ConsumeConfig{
		{Topic: TopicDeliveries},
		{Topic: TopicDeliveries, Group: "g", Partitions: []int32{1}},
		{Topic: TopicDeliveries, Partitions: []int32{16}},
		{Topic: TopicDeliveries, Partitions: []int32{1, 1}},
		{Topic: "", Partitions: []int32{1}},
	} {
		if err := c.Consume(ctx, bad, func(context.Context, Batch) error { return nil }); err == nil {
			t.Errorf("Consume(%+v) accepted", bad)
		}
	}
}

func TestProduceOutsideCatalogueAndAfterClose(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := c.adm.CreateTopic(ctx, 3, 1, nil, "other"); err != nil {
		t.Fatal(err)
	}
	keyed := &Record{Topic: "other", Key: []byte("some key"), Partition: PartitionByKey, Value: []byte("a")}
	manual := &Record{Topic: "other", Partition: 2, Value: []byte("b")}
	if err := c.ProduceSync(ctx, keyed, manual); err != nil {
		t.Fatal(err)
	}
	if want := PartitionForKey(keyed.Key, 3); keyed.Partition != want {
		t.Errorf("keyed record outside the catalogue went to %d, want %d", keyed.Partition, want)
	}
	if manual.Partition != 2 {
		t.Errorf("unkeyed record outside the catalogue went to %d, want 2", manual.Partition)
	}
	if c.Partitions("other") != 0 {
		t.Errorf("Partitions(other) = %d", c.Partitions("other"))
	}

	c.Close()
	errc := make(chan error, 1)
	c.Produce(ctx, &Record{Topic: TopicDeliveries, Value: []byte("late")}, func(_ *Record, err error) { errc <- err })
	select {
	case err := <-errc:
		if err == nil {
			t.Error("Produce after Close succeeded")
		}
	case <-ctx.Done():
		t.Fatal("Produce after Close never called done")
	}
	if err := c.ProduceSync(ctx, &Record{Topic: TopicDeliveries, Value: []byte("late")}); err == nil {
		t.Error("ProduceSync after Close succeeded")
	}
}

// Two members of a group: the partitions are divided, a member never gets a
// batch of a partition it does not own, and OnRevoked comes after the last
// batch of a revoked partition.
func TestConsumeGroupRebalance(t *testing.T) {
	if testing.Short() {
		t.Skip("a rebalance takes a few seconds")
	}
	e := startEmbedded(t, t.TempDir())
	c := newTestClient(t, e, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	type member struct {
		mu       sync.Mutex
		owned    map[int32]bool
		batches  int
		violated []string
		records  int
	}
	run := func(m *member, mctx context.Context) chan error {
		m.owned = map[int32]bool{}
		errc := make(chan error, 1)
		go func() {
			errc <- c.Consume(mctx, ConsumeConfig{
				Topic: TopicDeliveries, Group: "rebalance",
				OnAssigned: func(_ context.Context, ps []int32) {
					m.mu.Lock()
					defer m.mu.Unlock()
					for _, p := range ps {
						m.owned[p] = true
					}
				},
				OnRevoked: func(_ context.Context, ps []int32) {
					m.mu.Lock()
					defer m.mu.Unlock()
					for _, p := range ps {
						delete(m.owned, p)
					}
				},
			}, func(_ context.Context, b Batch) error {
				m.mu.Lock()
				defer m.mu.Unlock()
				if !m.owned[b.Partition] {
					m.violated = append(m.violated, fmt.Sprintf("batch of partition %d not owned", b.Partition))
				}
				m.batches++
				m.records += len(b.Records)
				return nil
			})
		}()
		return errc
	}
	ownedOf := func(m *member) []int32 {
		m.mu.Lock()
		defer m.mu.Unlock()
		var ps []int32
		for p := range m.owned {
			ps = append(ps, p)
		}
		slices.Sort(ps)
		return ps
	}
	// Keep producing to every partition while the group changes.
	pctx, pstop := context.WithCancel(ctx)
	var produced atomic.Int64
	var pwg sync.WaitGroup
	pwg.Add(1)
	go func() {
		defer pwg.Done()
		for i := 0; pctx.Err() == nil; i++ {
			rs := make([]*Record, 16)
			for p := range rs {
				rs[p] = &Record{Topic: TopicDeliveries, Partition: int32(p), Value: fmt.Appendf(nil, "%d", i)}
			}
			if err := c.ProduceSync(pctx, rs...); err != nil {
				return
			}
			produced.Add(16)
			time.Sleep(5 * time.Millisecond)
		}
	}()

	var a, b member
	actx, astop := context.WithCancel(ctx)
	defer astop()
	aerr := run(&a, actx)
	eventually.Before(t, ctx, "a owns 16 partitions", func() bool { return len(ownedOf(&a)) == 16 })
	bctx, bstop := context.WithCancel(ctx)
	defer bstop()
	berr := run(&b, bctx)
	eventually.Before(t, ctx, "a and b share the partitions", func() bool {
		pa, pb := ownedOf(&a), ownedOf(&b)
		return len(pa) > 0 && len(pb) > 0 && len(pa)+len(pb) == 16
	})
	eventually.Before(t, ctx, "b consumes", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.records > 0
	})
	pa, pb := ownedOf(&a), ownedOf(&b)
	for _, p := range pa {
		if slices.Contains(pb, p) {
			t.Errorf("partition %d owned by both members", p)
		}
	}
	pstop()
	pwg.Wait()
	astop()
	bstop()
	for _, errc := range []chan error{aerr, berr} {
		if err := <-errc; err != nil {
			t.Errorf("Consume: %v", err)
		}
	}
	for name, m := range map[string]*member{"a": &a, "b": &b} {
		if len(m.violated) > 0 {
			t.Errorf("member %s: %v", name, m.violated)
		}
		if len(m.owned) != 0 {
			t.Errorf("member %s still owns %v after Consume returned", name, m.owned)
		}
	}
	if b.records == 0 || a.records == 0 {
		t.Errorf("records: a %d, b %d (produced %d)", a.records, b.records, produced.Load())
	}
}

// TestEmbeddedTCPAndInProcess: a client over TCP (another process, a
// tool) and one in-process (Embedded.Dial) use the same broker: each
// reads what the other wrote. Dial connects in-process only to the
// embedded broker's own address, and fails once it is closed.
func TestEmbeddedTCPAndInProcess(t *testing.T) {
	e := startEmbedded2(t, EmbeddedConfig{Dir: t.TempDir(), Addr: "127.0.0.1:0"})
	tcpDial := func(ctx context.Context, network, host string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, host)
	}
	tcp := newTestClient(t, e, Config{Dial: tcpDial})
	inproc := newTestClient(t, e, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := tcp.ProduceSync(ctx, &Record{Topic: TopicSessions, Key: []byte("t/over-tcp"), Partition: 0, Value: []byte("tcp")}); err != nil {
		t.Fatal(err)
	}
	if err := inproc.ProduceSync(ctx, &Record{Topic: TopicSessions, Key: []byte("t/in-process"), Partition: 0, Value: []byte("mem")}); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*Client{"tcp": tcp, "in-process": inproc} {
		got := consumeN(t, c, ConsumeConfig{Topic: TopicSessions, Partitions: []int32{0}}, 2)
		if string(got[0].Value) != "tcp" || string(got[1].Value) != "mem" {
			t.Errorf("%s client read %q, %q", name, got[0].Value, got[1].Value)
		}
	}

	nc, err := e.Dial(ctx, "tcp", e.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	if nc.RemoteAddr().Network() != "mem" {
		t.Errorf("Dial of the broker's address gave a %s connection", nc.RemoteAddr().Network())
	}
	_ = nc.Close()
	// Another address goes over the network (here: nothing listens).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	other := ln.Addr().String()
	go func() {
		if c, err := ln.Accept(); err == nil {
			_ = c.Close()
		}
	}()
	if nc, err = e.Dial(ctx, "tcp", other); err != nil {
		t.Fatalf("Dial(%s): %v", other, err)
	}
	if nc.RemoteAddr().String() != other {
		t.Errorf("Dial(%s) reached %s", other, nc.RemoteAddr())
	}
	_ = nc.Close()
	_ = ln.Close()

	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Dial(ctx, "tcp", e.Addrs()[0]); err == nil {
		t.Fatal("Dial of a closed embedded broker succeeded")
	}
}
