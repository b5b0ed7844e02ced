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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shoal-mqtt/shoal/compose/config"
	"github.com/shoal-mqtt/shoal/integration/servers"
	"github.com/shoal-mqtt/shoal/internal/localserver/realkafka"
	"github.com/shoal-mqtt/shoal/internal/testutil/testlog"
	"github.com/shoal-mqtt/shoal/kafka"
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
