package kafka

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

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
