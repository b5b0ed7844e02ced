//go:build integration

package integration

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shoal-mqtt/shoal/compose/config"
	"github.com/shoal-mqtt/shoal/integration/servers"
	"github.com/shoal-mqtt/shoal/internal/localserver/realkafka"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
	"github.com/shoal-mqtt/shoal/internal/testutil/testlog"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// These tests run Shoal's kafka package against a real Apache Kafka
// (realkafka: one KRaft node as a local JVM). They check what the package
// promises with Kafka's own answers, read back with franz-go's kadm and a
// plain kgo consumer, independent of the code under test.

// Bounds of the waits.
const (
	// kafkaStartTimeout bounds starting a broker, including fetching the
	// jars on a machine that has none cached.
	kafkaStartTimeout = 4 * time.Minute
	// kafkaTestTimeout bounds each test's own waits.
	kafkaTestTimeout = 2 * time.Minute
)

// kafkaServer is a running one-node Kafka: a local process
// (*realkafka.Cluster, which the restart scenarios also stop, kill and
// restart) or a container (*servers.KafkaContainer).
type kafkaServer interface {
	Brokers() []string
	Stop() error
}

// sharedKafka is the broker the tests of this binary share, started on
// first use and stopped after the last test (atExit).
var sharedKafka struct {
	once sync.Once
	c    kafkaServer
	log  string
	err  error
}

// kafkaCluster returns the shared broker, starting it on first use.
func kafkaCluster(t *testing.T) kafkaServer {
	t.Helper()
	mode := serverMode(t)
	sharedKafka.once.Do(func() {
		dir, err := os.MkdirTemp("", "shoal-it-kafka-")
		if err != nil {
			sharedKafka.err = err
			return
		}
		c, logPath, stop, err := startKafka(dir, mode)
		if err != nil {
			sharedKafka.err = errors.Join(err, os.RemoveAll(dir))
			return
		}
		sharedKafka.c, sharedKafka.log = c, logPath
		atExit(func() {
			if err := errors.Join(stop(), os.RemoveAll(dir)); err != nil {
				fmt.Fprintf(os.Stderr, "stop the shared kafka: %v\n", err)
			}
		})
	})
	if sharedKafka.err != nil {
		t.Fatalf("start the shared kafka: %v", sharedKafka.err)
	}
	logKafkaWarningsOnFailure(t, sharedKafka.log)
	return sharedKafka.c
}

// startKafka starts a broker: a local process in dir, its log in
// dir/kafka.log, or a container (no log path). stop stops it and closes
// the log; dir is the caller's to remove.
func startKafka(dir string, mode servers.Mode) (c kafkaServer, logPath string, stop func() error, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), kafkaStartTimeout)
	defer cancel()
	began := time.Now()
	if mode == servers.Containers {
		image := imageFrom("SHOAL_IT_KAFKA_IMAGE", servers.KafkaImage)
		kc, err := servers.StartKafka(ctx, image)
		if err != nil {
			return nil, "", nil, err
		}
		fmt.Fprintf(os.Stderr, "kafka container %s started on %v in %s\n", image, kc.Brokers(), time.Since(began).Round(time.Millisecond))
		return kc, "", kc.Stop, nil
	}
	logPath = filepath.Join(dir, "kafka.log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, "", nil, err
	}
	rc, err := realkafka.Start(ctx, filepath.Join(dir, "cluster"), f)
	if err != nil {
		return nil, "", nil, errors.Join(err, f.Close())
	}
	fmt.Fprintf(os.Stderr, "kafka %s started on %v in %s (log %s)\n", realkafka.Version, rc.Brokers(), time.Since(began).Round(time.Millisecond), logPath)
	return rc, logPath, func() error { return errors.Join(rc.Stop(), f.Close()) }, nil
}

// ownKafka starts a broker for t alone, stopped and removed when t ends.
func ownKafka(t *testing.T) kafkaServer {
	t.Helper()
	dir := t.TempDir()
	c, logPath, stop, err := startKafka(dir, serverMode(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("stop kafka: %v", err)
		}
	})
	logKafkaWarningsOnFailure(t, logPath)
	return c
}

// restartable returns kc as the local Kafka process the restart scenarios
// stop, kill and restart (skipWithContainers comes first).
func restartable(t *testing.T, kc kafkaServer) *realkafka.Cluster {
	t.Helper()
	rc, ok := kc.(*realkafka.Cluster)
	if !ok {
		t.Fatalf("kafka %T cannot be restarted", kc)
	}
	return rc
}

// logKafkaWarningsOnFailure logs the broker's latest warnings and errors
// when t fails.
func logKafkaWarningsOnFailure(t *testing.T, logPath string) {
	t.Cleanup(func() {
		if !t.Failed() || logPath == "" {
			return
		}
		data, err := os.ReadFile(logPath)
		if err != nil {
			t.Logf("kafka log: %v", err)
			return
		}
		var lines []string
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			if l := sc.Text(); strings.Contains(l, " WARN ") || strings.Contains(l, " ERROR ") || strings.HasPrefix(l, "realkafka:") {
				lines = append(lines, l)
			}
		}
		lines = lines[max(0, len(lines)-40):]
		t.Logf("kafka log %s, latest warnings and errors:\n%s", logPath, strings.Join(lines, "\n"))
	})
}

// testCatalogue returns the default catalogue with topics of t's own
// (it.<test>.<nanos>.messages, …) of partitions partitions each.
func testCatalogue(t *testing.T, partitions int32) kafka.Catalogue {
	name := strings.NewReplacer("/", ".", "#", ".").Replace(strings.TrimPrefix(t.Name(), "TestKafka"))
	prefix := fmt.Sprintf("it.%s.%d", name, time.Now().UnixNano()%1_000_000_000)
	cat := kafka.DefaultCatalogue()
	for _, s := range []*kafka.TopicSpec{&cat.Messages, &cat.Sessions, &cat.Presence, &cat.Deliveries} {
		s.Name = prefix + "." + strings.TrimPrefix(s.Name, "shoal.")
		s.Partitions = partitions
	}
	// shoal.quotas keeps its own partitions (kafka.DefaultQuotaPartitions).
	cat.Quotas.Name = prefix + "." + strings.TrimPrefix(cat.Quotas.Name, "shoal.")
	return cat
}

// renameTopics gives cat's topics names of t's own, as testCatalogue
// does, keeping everything else.
func renameTopics(t *testing.T, cat kafka.Catalogue) kafka.Catalogue {
	names := testCatalogue(t, 1)
	cat.Messages.Name, cat.Sessions.Name = names.Messages.Name, names.Sessions.Name
	cat.Presence.Name, cat.Deliveries.Name = names.Presence.Name, names.Deliveries.Name
	cat.Quotas.Name = names.Quotas.Name
	return cat
}

// newKafkaClient connects a Shoal client to kc; it is closed when t ends.
func newKafkaClient(t *testing.T, kc kafkaServer, cfg kafka.Config, log *slog.Logger) *kafka.Client {
	t.Helper()
	cfg.Brokers = kc.Brokers()
	if log == nil {
		log = testlog.New(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), kafkaTestTimeout)
	defer cancel()
	c, err := kafka.NewClient(ctx, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// newAdmin returns a plain franz-go client and its admin client, to check
// what the broker says independently of the code under test.
func newAdmin(t *testing.T, kc kafkaServer, opts ...kgo.Opt) (*kgo.Client, *kadm.Client) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(kc.Brokers()...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl)
}

// topicFacts is what the broker says about one topic.
type topicFacts struct {
	id          kadm.TopicID
	partitions  int
	replication []int // per partition
	policy      string
	retentionMS string
	sources     map[string]string // config key → source
}

func describeTopics(t *testing.T, ctx context.Context, adm *kadm.Client, names ...string) map[string]topicFacts {
	t.Helper()
	details, err := adm.ListTopics(ctx, names...)
	if err != nil {
		t.Fatalf("list topics: %v", err)
	}
	configs, err := adm.DescribeTopicConfigs(ctx, names...)
	if err != nil {
		t.Fatalf("describe topic configs: %v", err)
	}
	out := map[string]topicFacts{}
	for _, n := range names {
		d, ok := details[n]
		if !ok || d.Err != nil {
			t.Fatalf("topic %s: %v (listed %v)", n, d.Err, ok)
		}
		f := topicFacts{id: d.ID, partitions: len(d.Partitions), sources: map[string]string{}}
		for p := range int32(len(d.Partitions)) {
			f.replication = append(f.replication, len(d.Partitions[p].Replicas))
		}
		rc, err := configs.On(n, nil)
		if err != nil || rc.Err != nil {
			t.Fatalf("configs of %s: %v %v", n, err, rc.Err)
		}
		for _, c := range rc.Configs {
			switch c.Key {
			case "cleanup.policy":
				f.policy = c.MaybeValue()
			case "retention.ms":
				f.retentionMS = c.MaybeValue()
			default:
				continue
			}
			f.sources[c.Key] = c.Source.String()
		}
		out[n] = f
	}
	return out
}

// logCapture is a slog handler that keeps the messages logged, with the
// value of their "topic" attribute.
type logCapture struct {
	mu    sync.Mutex
	msgs  []string // "message topic"
	lines []string // "LEVEL message key=value …"
}

func (h *logCapture) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (h *logCapture) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h *logCapture) WithGroup(string) slog.Handler                { return h }
func (h *logCapture) Handle(_ context.Context, r slog.Record) error {
	topic := ""
	line := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "topic" {
			topic = a.Value.String()
		}
		line += " " + a.String()
		return true
	})
	h.mu.Lock()
	h.msgs = append(h.msgs, r.Message+" "+topic)
	h.lines = append(h.lines, line)
	h.mu.Unlock()
	return nil
}

// find returns the captured lines that contain every one of subs.
func (h *logCapture) find(subs ...string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, l := range h.lines {
		all := true
		for _, s := range subs {
			all = all && strings.Contains(l, s)
		}
		if all {
			out = append(out, l)
		}
	}
	return out
}

func (h *logCapture) count(msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, m := range h.msgs {
		if strings.HasPrefix(m, msg+" ") {
			n++
		}
	}
	return n
}

// EnsureTopics creates the catalogue's topics with their partitions,
// replication factor, retention.ms and cleanup.policy; two clients doing it
// at once both succeed and each topic is created once; running it again
// changes nothing.
func TestKafkaEnsureTopics(t *testing.T) {
	kc := kafkaCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), kafkaTestTimeout)
	defer cancel()
	_, adm := newAdmin(t, kc)

	type want struct {
		partitions  int
		policy      string
		retentionMS string
	}
	// Several rounds, each on new topics, so that the two clients race
	// to create them more than once.
	for round := range 3 {
		cat := testCatalogue(t, 1)
		cat.Messages.Partitions, cat.Messages.Retention = 6, 2*time.Hour
		cat.Sessions.Partitions, cat.Sessions.Retention = 5, 0 // no time limit
		cat.Presence.Partitions = 3                            // compacted
		cat.Deliveries.Partitions, cat.Deliveries.Retention = 4, 90*time.Minute
		wants := map[string]want{
			cat.Messages.Name:   {6, "delete", "7200000"},
			cat.Sessions.Name:   {5, "delete", "-1"},
			cat.Presence.Name:   {3, "compact", "-1"},
			cat.Deliveries.Name: {4, "delete", "5400000"},
			cat.Quotas.Name:     {int(cat.Quotas.Partitions), "compact", "-1"},
		}
		logs := &logCapture{}
		clients := []*kafka.Client{
			newKafkaClient(t, kc, kafka.Config{Catalogue: cat, ClientID: "ensure-a"}, slog.New(logs)),
			newKafkaClient(t, kc, kafka.Config{Catalogue: cat, ClientID: "ensure-b"}, slog.New(logs)),
		}
		start := make(chan struct{})
		errc := make(chan error, len(clients))
		for _, c := range clients {
			go func() {
				<-start
				errc <- c.EnsureTopics(ctx)
			}()
		}
		close(start)
		for range clients {
			if err := <-errc; err != nil {
				t.Fatalf("round %d: concurrent EnsureTopics: %v", round, err)
			}
		}
		names := slices.Collect(maps.Keys(wants))
		slices.Sort(names)
		facts := describeTopics(t, ctx, adm, names...)
		for _, n := range names {
			f, w := facts[n], wants[n]
			if f.partitions != w.partitions || f.policy != w.policy || f.retentionMS != w.retentionMS {
				t.Errorf("round %d: %s has %d partitions, cleanup.policy %q, retention.ms %q; want %d, %q, %q",
					round, n, f.partitions, f.policy, f.retentionMS, w.partitions, w.policy, w.retentionMS)
			}
			if !slices.Equal(f.replication, slices.Repeat([]int{1}, w.partitions)) {
				t.Errorf("round %d: %s replicas per partition %v, want 1 each", round, n, f.replication)
			}
			// Set on the topic, not inherited from the broker.
			for k, src := range f.sources {
				if src != "DYNAMIC_TOPIC_CONFIG" {
					t.Errorf("round %d: %s %s comes from %s, want DYNAMIC_TOPIC_CONFIG", round, n, k, src)
				}
			}
		}
		if got := logs.count("kafka topic created"); got != len(names) {
			t.Errorf("round %d: %d creations logged by the two clients, want %d (one per topic)", round, got, len(names))
		}

		// Again, with records in the topics: nothing changes, nothing
		// is recreated.
		c := clients[0]
		if err := c.ProduceSync(ctx, &kafka.Record{Topic: cat.Deliveries.Name, Partition: 3, Value: []byte("kept")}); err != nil {
			t.Fatal(err)
		}
		if err := c.EnsureTopics(ctx); err != nil {
			t.Fatalf("round %d: EnsureTopics again: %v", round, err)
		}
		if again := describeTopics(t, ctx, adm, names...); !maps.EqualFunc(again, facts, func(a, b topicFacts) bool {
			return a.id == b.id && a.partitions == b.partitions && a.policy == b.policy && a.retentionMS == b.retentionMS
		}) {
			t.Errorf("round %d: EnsureTopics again changed the topics:\nbefore %+v\nafter  %+v", round, facts, again)
		}
		ends, err := c.EndOffsets(ctx, cat.Deliveries.Name)
		if err != nil {
			t.Fatal(err)
		}
		if ends[3] != 1 {
			t.Errorf("round %d: after EnsureTopics again, deliveries/3 ends at %d, want 1", round, ends[3])
		}
		if got := logs.count("kafka topic created"); got != len(names) {
			t.Errorf("round %d: %d creations logged after EnsureTopics again, want still %d", round, got, len(names))
		}
	}

	// The configuration keys kafka.replication_factor and kafka.retention
	// (here as flags) reach the topics: the brokers' default replication
	// (1 on this one-node cluster) and the retention on the event topics,
	// the compacted topic without a time limit.
	cfg, err := config.Load("shoal", []string{"--kafka-partitions", "2", "--kafka-replication-factor", "-1", "--kafka-retention", "36h"},
		func(string) (string, bool) { return "", false }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cat := renameTopics(t, cfg.Kafka.Catalogue())
	logs := &logCapture{}
	if err := newKafkaClient(t, kc, kafka.Config{Catalogue: cat}, slog.New(logs)).EnsureTopics(ctx); err != nil {
		t.Fatalf("EnsureTopics with the configured catalogue: %v", err)
	}
	names := []string{cat.Messages.Name, cat.Sessions.Name, cat.Presence.Name, cat.Deliveries.Name}
	facts := describeTopics(t, ctx, adm, names...)
	for _, n := range names {
		f := facts[n]
		wantPolicy, wantRetention := "delete", "129600000"
		if n == cat.Presence.Name {
			wantPolicy, wantRetention = "compact", "-1"
		}
		if f.partitions != 2 || f.policy != wantPolicy || f.retentionMS != wantRetention || !slices.Equal(f.replication, []int{1, 1}) {
			t.Errorf("configured %s: %d partitions, replicas %v, cleanup.policy %q, retention.ms %q; want 2, [1 1], %q, %q",
				n, f.partitions, f.replication, f.policy, f.retentionMS, wantPolicy, wantRetention)
		}
	}
	// Started again with another retention: the topics are kept as they
	// are, and each event topic's difference is a warning naming the
	// topic and both values.
	cfg.Kafka.Retention = 48 * time.Hour
	other := cfg.Kafka.Catalogue()
	for _, p := range [][2]*kafka.TopicSpec{{&other.Messages, &cat.Messages}, {&other.Sessions, &cat.Sessions}, {&other.Presence, &cat.Presence}, {&other.Deliveries, &cat.Deliveries}} {
		p[0].Name = p[1].Name
	}
	logs = &logCapture{}
	if err := newKafkaClient(t, kc, kafka.Config{Catalogue: other}, slog.New(logs)).EnsureTopics(ctx); err != nil {
		t.Fatalf("EnsureTopics with another retention: %v", err)
	}
	for _, n := range names {
		all := logs.find("kafka topic retention differs", "topic="+n+" ")
		if n == cat.Presence.Name {
			if len(all) != 0 {
				t.Errorf("%s (compacted): retention warnings %q, want none", n, all)
			}
			continue
		}
		got := logs.find("WARN kafka topic retention differs", "topic="+n+" ", "retention_ms=129600000", "configured_ms=172800000")
		if len(got) != 1 || len(all) != 1 {
			t.Errorf("%s: retention messages %q, want one warning naming 129600000 and 172800000", n, all)
		}
	}
	if again := describeTopics(t, ctx, adm, names...); !maps.EqualFunc(again, facts, func(a, b topicFacts) bool {
		return a.id == b.id && a.retentionMS == b.retentionMS && a.policy == b.policy
	}) {
		t.Errorf("EnsureTopics with another retention changed the topics:\nbefore %+v\nafter  %+v", facts, again)
	}

	// A replication factor the cluster cannot give is refused, naming
	// the topic.
	cat = testCatalogue(t, 2)
	cat.Sessions.Replication = 3
	c := newKafkaClient(t, kc, kafka.Config{Catalogue: cat}, nil)
	err = c.EnsureTopics(ctx)
	if !errors.Is(err, kerr.InvalidReplicationFactor) || !strings.Contains(err.Error(), "ensure topic "+cat.Sessions.Name) {
		t.Errorf("EnsureTopics with replication 3 on one broker: %v, want INVALID_REPLICATION_FACTOR naming %s", err, cat.Sessions.Name)
	}
}

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

// readLog reads topic from the start up to its end offsets with a plain
// franz-go consumer, independent of the code under test. ends nil means
// the end offsets now.
func readLog(t *testing.T, ctx context.Context, kc kafkaServer, topic string, ends map[int32]int64) []*kgo.Record {
	t.Helper()
	_, adm := newAdmin(t, kc)
	if ends == nil {
		listed, err := adm.ListEndOffsets(ctx, topic)
		if err != nil || listed.Error() != nil {
			t.Fatalf("end offsets of %s: %v %v", topic, err, listed.Error())
		}
		ends = map[int32]int64{}
		listed.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	}
	want := 0
	parts := map[int32]kgo.Offset{}
	for p, end := range ends {
		want += int(end)
		parts[p] = kgo.NewOffset().AtStart()
	}
	cl, _ := newAdmin(t, kc, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}))
	var out []*kgo.Record
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %s: %d of %d records: %v", topic, len(out), want, err)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Logf("read %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < ends[r.Partition] {
				out = append(out, r)
			}
		})
	}
	return out
}

// groupLog is a consumer group's shared view store (the next offset of
// each partition, written by whichever member handles it) and a record of
// who owned what, to check the guarantees of ConsumeConfig in group mode.
type groupLog struct {
	mu         sync.Mutex
	next       map[int32]int64  // the next offset each partition is to be handled at
	owner      map[int32]string // member that owns the partition, per the callbacks
	handled    map[string]int   // records per member
	starts     map[string]int   // Start calls per member
	violations []string
}

func newGroupLog() *groupLog {
	return &groupLog{next: map[int32]int64{}, owner: map[int32]string{}, handled: map[string]int{}, starts: map[string]int{}}
}

func (g *groupLog) violate(format string, args ...any) {
	if len(g.violations) < 50 {
		g.violations = append(g.violations, fmt.Sprintf(format, args...))
	}
}

// config returns the ConsumeConfig of member name: Start resumes at the
// stored next offset, the callbacks keep the ownership map, and the
// handler checks that every record is the next one of its partition
// (none skipped, none repeated) and stores the new next offset before it
// returns, as Shoal's services store their offsets with their views.
func (g *groupLog) config(topic, group, name string) (kafka.ConsumeConfig, func(context.Context, kafka.Batch) error) {
	cfg := kafka.ConsumeConfig{
		Topic: topic,
		Group: group,
		Start: func(p int32) int64 {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.starts[name]++
			if g.owner[p] != name {
				g.violate("%s: Start(%d) while %q owns it", name, p, g.owner[p])
			}
			if n, ok := g.next[p]; ok {
				return n
			}
			return kafka.StartAtBeginning
		},
		OnAssigned: func(_ context.Context, ps []int32) {
			g.mu.Lock()
			defer g.mu.Unlock()
			for _, p := range ps {
				if o := g.owner[p]; o != "" {
					g.violate("%s: assigned %d while %s owns it", name, p, o)
				}
				g.owner[p] = name
			}
		},
		OnRevoked: func(_ context.Context, ps []int32) {
			g.mu.Lock()
			defer g.mu.Unlock()
			for _, p := range ps {
				if o := g.owner[p]; o != name {
					g.violate("%s: revoked %d, owned by %q", name, p, o)
				}
				delete(g.owner, p)
			}
		},
	}
	handle := func(_ context.Context, b kafka.Batch) error {
		g.mu.Lock()
		defer g.mu.Unlock()
		if o := g.owner[b.Partition]; o != name {
			g.violate("%s: batch of %d, owned by %q", name, b.Partition, o)
		}
		for _, r := range b.Records {
			if want := g.next[b.Partition]; r.Offset != want {
				g.violate("%s: partition %d: handled offset %d, next to handle was %d", name, b.Partition, r.Offset, want)
			}
			g.next[b.Partition] = r.Offset + 1
		}
		g.handled[name] += len(b.Records)
		return nil
	}
	return cfg, handle
}

func (g *groupLog) owned(name string) []int32 {
	g.mu.Lock()
	defer g.mu.Unlock()
	var ps []int32
	for p, o := range g.owner {
		if o == name {
			ps = append(ps, p)
		}
	}
	slices.Sort(ps)
	return ps
}

// caughtUp reports whether every partition has been handled up to ends.
func (g *groupLog) caughtUp(ends map[int32]int64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for p, end := range ends {
		if g.next[p] != end {
			return false
		}
	}
	return true
}

// member runs Consume for one group member until its context ends.
type member struct {
	name   string
	cancel context.CancelFunc
	errc   chan error
}

func startMember(ctx context.Context, c *kafka.Client, g *groupLog, topic, group, name string) *member {
	mctx, cancel := context.WithCancel(ctx)
	m := &member{name: name, cancel: cancel, errc: make(chan error, 1)}
	cfg, handle := g.config(topic, group, name)
	go func() { m.errc <- c.Consume(mctx, cfg, handle) }()
	return m
}

// stop makes the member leave the group and waits until Consume returned.
func (m *member) stop(t *testing.T) {
	t.Helper()
	m.cancel()
	select {
	case err := <-m.errc:
		if err != nil {
			t.Errorf("member %s: Consume: %v", m.name, err)
		}
	case <-time.After(kafkaTestTimeout):
		t.Fatalf("member %s: Consume did not return", m.name)
	}
}

// producer keeps producing numbered records to every partition of a topic,
// with Produce and callbacks, until stopped or max records.
type producer struct {
	c      *kafka.Client
	topic  string
	parts  int32
	max    int
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	outcomes []outcome // by sequence number
	acked    atomic.Int64
	failed   atomic.Int64
	called   atomic.Int64 // done callbacks run
}

type outcome struct {
	done      bool
	err       error
	partition int32
	offset    int64
}

// startProducer starts producing; every pace it produces burst records.
// Produce waits for buffer room at most roomWait, then fails the record.
func startProducer(ctx context.Context, c *kafka.Client, topic string, parts int32, max, burst int, pace, roomWait time.Duration) *producer {
	pctx, cancel := context.WithCancel(ctx)
	pr := &producer{c: c, topic: topic, parts: parts, max: max, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(pr.done)
		tick := time.NewTicker(pace)
		defer tick.Stop()
		for seq := 0; seq < max; {
			select {
			case <-pctx.Done():
				return
			case <-tick.C:
			}
			for end := min(seq+burst, max); seq < end && pctx.Err() == nil; seq++ {
				pr.mu.Lock()
				pr.outcomes = append(pr.outcomes, outcome{})
				pr.mu.Unlock()
				r := &kafka.Record{Topic: topic, Partition: int32(seq) % parts, Value: []byte(strconv.Itoa(seq))}
				// Not pctx: stopping the producer must not fail
				// the record being produced.
				rctx, rcancel := context.WithTimeout(context.Background(), roomWait)
				c.Produce(rctx, r, pr.callback(seq))
				rcancel()
			}
		}
	}()
	return pr
}

func (pr *producer) callback(seq int) func(*kafka.Record, error) {
	return func(r *kafka.Record, err error) {
		pr.mu.Lock()
		o := &pr.outcomes[seq]
		if o.done {
			pr.mu.Unlock()
			panic(fmt.Sprintf("record %d: done called twice", seq))
		}
		*o = outcome{done: true, err: err, partition: r.Partition, offset: r.Offset}
		pr.mu.Unlock()
		if err != nil {
			pr.failed.Add(1)
		} else {
			pr.acked.Add(1)
		}
		pr.called.Add(1)
	}
}

// stop stops producing and waits for the outcome of every record given to
// Produce.
func (pr *producer) stop(t *testing.T, ctx context.Context) []outcome {
	t.Helper()
	pr.cancel()
	<-pr.done
	if err := pr.c.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	for seq, o := range pr.outcomes {
		if !o.done {
			t.Fatalf("record %d of %d: no outcome after Flush", seq, len(pr.outcomes))
		}
	}
	return slices.Clone(pr.outcomes)
}

// Two members of a group divide the partitions, each partition owned by
// exactly one; when one leaves, the other takes all its partitions and
// every record is handled exactly once.
//
// ConsumeConfig's contract makes that exact, not at-least-once: OnRevoked
// runs on the old owner after the last batch of the partition it handed
// out, before the group gives the partition to another member (the
// cooperative protocol revokes in one rebalance and assigns in the next);
// Start runs on the new owner after OnAssigned and returns the offset the
// old owner stored. Records fetched but not handed out are dropped at the
// revocation and fetched again by the new owner from that offset. A
// record can be handled twice only when the handler's work and its stored
// offset are not atomic and a member dies between the two, or a member
// that stops heartbeating is expelled while still handling (Kafka fences
// nothing without committed offsets); neither happens here.
func TestKafkaConsumerGroup(t *testing.T) {
	kc := kafkaCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), kafkaTestTimeout)
	defer cancel()
	const parts = 8
	cat := testCatalogue(t, parts)
	c := newKafkaClient(t, kc, kafka.Config{Catalogue: cat}, nil)
	if err := c.EnsureTopics(ctx); err != nil {
		t.Fatal(err)
	}
	topic, group := cat.Deliveries.Name, cat.Deliveries.Name+".group"

	// Records are written before, during and after the handover.
	pr := startProducer(ctx, c, topic, parts, 1_000_000, 40, 5*time.Millisecond, kafkaTestTimeout)
	g := newGroupLog()
	a := startMember(ctx, c, g, topic, group, "a")
	eventually.Before(t, ctx, "a owns every partition", func() bool { return len(g.owned("a")) == parts })
	eventually.Before(t, ctx, "a handles records", func() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.handled["a"] > 0 })

	b := startMember(ctx, c, g, topic, group, "b")
	eventually.Before(t, ctx, "a and b share the partitions", func() bool {
		pa, pb := g.owned("a"), g.owned("b")
		return len(pa) > 0 && len(pb) > 0 && len(pa)+len(pb) == parts
	})
	pa, pb := g.owned("a"), g.owned("b")
	t.Logf("shared: a owns %v, b owns %v", pa, pb)
	eventually.Before(t, ctx, "b handles records", func() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.handled["b"] > 0 })

	handover := time.Now()
	a.stop(t)
	if ps := g.owned("a"); len(ps) != 0 {
		t.Errorf("a still owns %v after leaving", ps)
	}
	eventually.Before(t, ctx, "b owns every partition", func() bool { return len(g.owned("b")) == parts })
	t.Logf("b owned every partition %s after a began to leave", time.Since(handover).Round(time.Millisecond))
	atHandover := pr.acked.Load()
	eventually.Before(t, ctx, "more records after the handover", func() bool { return pr.acked.Load() > atHandover+2000 })

	outcomes := pr.stop(t, ctx)
	for seq, o := range outcomes {
		if o.err != nil {
			t.Fatalf("record %d: %v", seq, o.err)
		}
	}
	ends, err := c.EndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, e := range ends {
		total += e
	}
	if total != int64(len(outcomes)) {
		t.Fatalf("end offsets %v add up to %d, %d records were acknowledged", ends, total, len(outcomes))
	}
	eventually.Before(t, ctx, "b catches up with the end offsets", func() bool { return g.caughtUp(ends) })
	b.stop(t)

	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.violations) > 0 {
		t.Errorf("violations:\n%s", strings.Join(g.violations, "\n"))
	}
	if len(g.owner) != 0 {
		t.Errorf("partitions still owned after both left: %v", g.owner)
	}
	// Every record handled once: the handler checked each offset was the
	// next of its partition, and the counts add up.
	if n := g.handled["a"] + g.handled["b"]; int64(n) != total {
		t.Errorf("handled %d records (a %d, b %d), produced %d", n, g.handled["a"], g.handled["b"], total)
	}
	t.Logf("%d records: a handled %d, b %d; Start called %d times on a, %d on b", total, g.handled["a"], g.handled["b"], g.starts["a"], g.starts["b"])
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
