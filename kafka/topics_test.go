package kafka

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mqtt/shoal/internal/testutil/testlog"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// topicConfig reads one configuration value of a topic from the broker.
func topicConfig(t *testing.T, adm *kadm.Client, topic, key string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("configs of %s: %v %v", topic, err, rc.Err)
	}
	for _, c := range rc.Configs {
		if c.Key == key {
			return c.MaybeValue()
		}
	}
	t.Fatalf("topic %s has no %s", topic, key)
	return ""
}

// A catalogue with the brokers' default replication (-1) and its own
// retention creates its topics with them; the compacted topics keep no time
// or size limit, even when their spec asks for one.
func TestEnsureTopicsReplicationAndRetention(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	cat := DefaultCatalogue()
	for _, s := range []*TopicSpec{&cat.Messages, &cat.Sessions, &cat.Presence, &cat.Deliveries, &cat.Quotas} {
		s.Partitions, s.Replication = 3, -1
		s.RetentionBytes = 1 << 20
		if !s.Compacted {
			s.Retention = 36 * time.Hour
		}
	}
	c := newTestClient(t, e, Config{Catalogue: cat})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	topics, err := c.adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range cat.All() {
		d := topics[s.Name]
		if len(d.Partitions) != 3 {
			t.Errorf("%s has %d partitions, want 3", s.Name, len(d.Partitions))
		}
		for _, p := range d.Partitions {
			if len(p.Replicas) != 1 {
				t.Errorf("%s/%d has %d replicas, want the one broker's default 1", s.Name, p.Partition, len(p.Replicas))
			}
		}
		wantRetention, wantBytes, wantPolicy := "129600000", "1048576", "delete"
		if s.Compacted {
			wantRetention, wantBytes, wantPolicy = "-1", "-1", "compact"
		}
		if got := topicConfig(t, c.adm, s.Name, "retention.ms"); got != wantRetention {
			t.Errorf("%s retention.ms = %s, want %s", s.Name, got, wantRetention)
		}
		if got := topicConfig(t, c.adm, s.Name, "retention.bytes"); got != wantBytes {
			t.Errorf("%s retention.bytes = %s, want %s", s.Name, got, wantBytes)
		}
		if got := topicConfig(t, c.adm, s.Name, "cleanup.policy"); got != wantPolicy {
			t.Errorf("%s cleanup.policy = %s, want %s", s.Name, got, wantPolicy)
		}
	}
	// shoal.quotas rolls its segments early, so that compaction keeps it
	// small.
	if got := topicConfig(t, c.adm, TopicQuotas, "segment.ms"); got != "600000" {
		t.Errorf("%s segment.ms = %s, want 600000", TopicQuotas, got)
	}
	if got := topicConfig(t, c.adm, TopicQuotas, "segment.bytes"); got != "8388608" {
		t.Errorf("%s segment.bytes = %s, want 8388608", TopicQuotas, got)
	}
}

// Topics that exist with another retention, or an unkeyed one with more
// partitions, are accepted and left alone, each difference logged as a
// warning that names the topic and both values.
func TestEnsureTopicsWarnsOnDifferences(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var logs testlog.Buffer
	c, err := NewClient(ctx, e.ClientConfig(Config{}), slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.adm.CreateTopic(ctx, 16, 1, map[string]*string{"retention.ms": kadm.StringPtr("3600000"), "retention.bytes": kadm.StringPtr("1048576")}, TopicMessages); err != nil {
		t.Fatal(err)
	}
	if _, err := c.adm.CreateTopic(ctx, 20, 1, nil, TopicDeliveries); err != nil {
		t.Fatal(err)
	}
	if err := c.EnsureTopics(ctx); err != nil {
		t.Fatalf("EnsureTopics refused topics that differ only in retention and unkeyed partitions: %v", err)
	}
	ret := logs.Lines("kafka topic retention differs")
	if len(ret) != 1 || !strings.Contains(ret[0], "level=WARN") || !strings.Contains(ret[0], "topic="+TopicMessages) ||
		!strings.Contains(ret[0], "retention_ms=3600000") || !strings.Contains(ret[0], "configured_ms=604800000") {
		t.Errorf("retention warnings %q, want one WARN naming %s, 3600000 and 604800000", ret, TopicMessages)
	}
	size := logs.Lines("kafka topic retention by size differs")
	if len(size) != 1 || !strings.Contains(size[0], "level=WARN") || !strings.Contains(size[0], "topic="+TopicMessages) ||
		!strings.Contains(size[0], "retention_bytes=1048576") || !strings.Contains(size[0], "configured_bytes=-1") {
		t.Errorf("retention.bytes warnings %q, want one WARN naming %s, 1048576 and -1", size, TopicMessages)
	}
	parts := logs.Lines("more partitions than configured")
	if len(parts) != 1 || !strings.Contains(parts[0], "level=WARN") || !strings.Contains(parts[0], "topic="+TopicDeliveries) ||
		!strings.Contains(parts[0], "partitions=20") || !strings.Contains(parts[0], "configured=16") {
		t.Errorf("partition warnings %q, want one WARN naming %s, 20 and 16", parts, TopicDeliveries)
	}
	// Left as they were.
	if got := topicConfig(t, c.adm, TopicMessages, "retention.ms"); got != "3600000" {
		t.Errorf("%s retention.ms = %s after EnsureTopics, want 3600000 (unchanged)", TopicMessages, got)
	}
	if got := topicConfig(t, c.adm, TopicMessages, "retention.bytes"); got != "1048576" {
		t.Errorf("%s retention.bytes = %s after EnsureTopics, want 1048576 (unchanged)", TopicMessages, got)
	}
}

// TestAdoptPartitions: with AdoptPartitions a client takes the partition
// count of the catalogue's topics that exist (a data directory made with
// another default) and EnsureTopics accepts them, each partition's size
// bound following from the topic's RetentionBytesTotal; without it the
// different count is refused, as before. New topics get the catalogue's
// count, and their bound is the total split over it.
func TestAdoptPartitions(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	budget := func(cat Catalogue, n int32) Catalogue {
		for _, s := range cat.specs() {
			if s.Name == TopicQuotas {
				continue
			}
			s.Partitions, s.RetentionBytes = n, 0
			if !s.Compacted {
				s.RetentionBytesTotal = 16 << 20
			}
		}
		return cat
	}
	old := newTestClient(t, e, Config{Catalogue: budget(DefaultCatalogue(), 8)})
	if got := topicConfig(t, old.adm, TopicMessages, "retention.bytes"); got != "2097152" {
		t.Fatalf("%s retention.bytes = %s, want 16 MiB / 8", TopicMessages, got)
	}

	c := newTestClient(t, e, Config{Catalogue: budget(DefaultCatalogue(), 4), AdoptPartitions: true})
	for _, s := range c.Catalogue().All() {
		want := int32(8)
		if s.Name == TopicQuotas {
			want = DefaultQuotaPartitions
		}
		if s.Partitions != want {
			t.Errorf("adopted catalogue: %s has %d partitions, want the topic's %d", s.Name, s.Partitions, want)
		}
		if n := c.Partitions(s.Name); n != want {
			t.Errorf("Partitions(%s) = %d, want %d", s.Name, n, want)
		}
	}
	if got := c.Catalogue().Messages.topicConfigs()["retention.bytes"]; *got != "2097152" {
		t.Errorf("adopted %s: retention.bytes %s, want the topic's 16 MiB / 8", TopicMessages, *got)
	}

	cfg := e.ClientConfig(Config{Catalogue: budget(DefaultCatalogue(), 4)})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	strict, err := NewClient(ctx, cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer strict.Close()
	if err := strict.EnsureTopics(ctx); err == nil || !strings.Contains(err.Error(), "8 partitions") {
		t.Errorf("EnsureTopics without AdoptPartitions on 8-partition topics, catalogue 4: %v, want the count refused", err)
	}

	fresh := startEmbedded(t, t.TempDir())
	n := newTestClient(t, fresh, Config{Catalogue: budget(DefaultCatalogue(), 4), AdoptPartitions: true})
	if got := n.Catalogue().Messages.Partitions; got != 4 {
		t.Errorf("a new topic under AdoptPartitions: %d partitions, want the catalogue's 4", got)
	}
	if got := topicConfig(t, n.adm, TopicMessages, "retention.bytes"); got != "4194304" {
		t.Errorf("a new %s: retention.bytes = %s, want 16 MiB / 4", TopicMessages, got)
	}
	if got := topicConfig(t, n.adm, TopicPresence, "retention.bytes"); got != "-1" {
		t.Errorf("the compacted %s: retention.bytes = %s, want -1", TopicPresence, got)
	}
}

// TestMaxMessageBytes: the topics take a record of the largest MQTT packet
// the gateways accept, with its event around it: new topics are created
// with max.message.bytes, an existing topic that accepts less is raised,
// and a Publish with a payload of the whole 1 MiB packet is written and
// read back (franz-go's default batch bound refused one just under it).
func TestMaxMessageBytes(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	boot, err := NewClient(ctx, e.ClientConfig(Config{}), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer boot.Close()
	if _, err := boot.adm.CreateTopic(ctx, 16, 1, map[string]*string{"max.message.bytes": kadm.StringPtr("1048588")}, TopicMessages); err != nil {
		t.Fatal(err)
	}
	cat := DefaultCatalogue()
	want := MaxMessageBytesFor(1 << 20)
	cat.SetMaxMessageBytes(want)
	c := newTestClient(t, e, Config{Catalogue: cat})
	for _, s := range cat.All() {
		if got := topicConfig(t, c.adm, s.Name, "max.message.bytes"); got != strconv.Itoa(int(want)) {
			t.Errorf("%s max.message.bytes = %s, want %d", s.Name, got, want)
		}
	}

	payload := bytes.Repeat([]byte{7}, 1<<20)
	env := &eventspb.Envelope{Tenant: "t", ClientId: "t-big", Event: &eventspb.Envelope_Publish{Publish: &eventspb.Publish{
		Message: &eventspb.Message{Topic: "big", Payload: payload, Qos: 1},
	}}}
	if err := c.ProduceSync(ctx, NewRecord(TopicMessages, []byte("t/big"), PartitionByKey, env)); err != nil {
		t.Fatalf("produce a Publish of a 1 MiB payload: %v", err)
	}
	part := PartitionForKey([]byte("t/big"), c.Partitions(TopicMessages))
	recs := consumeN(t, c, ConsumeConfig{Topic: TopicMessages, Partitions: []int32{part}}, 1)
	got := new(eventspb.Envelope)
	if err := DecodeEnvelope(recs[0], got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.GetPublish().GetMessage().GetPayload(), payload) {
		t.Fatalf("read back a payload of %d bytes, want the 1 MiB written", len(got.GetPublish().GetMessage().GetPayload()))
	}
}

// On a cluster of several brokers a topic just created reaches them one by
// one: the broker that answers DescribeConfigs may not know it yet, and
// EnsureTopics asks again instead of failing the role's start.
func TestEnsureTopicsWaitsForConfigsOfNewTopics(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	var refused atomic.Int32
	cluster.ControlKey(int16(kmsg.DescribeConfigs), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if refused.Load() >= 3 {
			return nil, nil, false
		}
		refused.Add(1)
		r, ok := req.(*kmsg.DescribeConfigsRequest)
		if !ok {
			return nil, nil, false
		}
		resp, ok := r.ResponseKind().(*kmsg.DescribeConfigsResponse)
		if !ok {
			return nil, nil, false
		}
		for _, rr := range r.Resources {
			res := kmsg.NewDescribeConfigsResponseResource()
			res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
			res.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Resources = append(resp.Resources, res)
		}
		return resp, nil, true
	})
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	c := clientOn(t, ctx, cluster)
	if err := c.EnsureTopics(ctx); err != nil {
		t.Fatalf("EnsureTopics while the brokers learn of the new topics: %v", err)
	}
	if n := refused.Load(); n != 3 {
		t.Errorf("DescribeConfigs refused %d times, want 3 (the test did not exercise the wait)", n)
	}
}

// TestReachableWhileOneBrokerAnswers: Reachable asks every broker at once,
// so brokers that do not answer (frozen: their ApiVersions never
// answered) do not hide the one that does; with none answering it fails
// within its context.
func TestReachableWhileOneBrokerAnswers(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	c := clientOn(t, ctx, cluster)
	if err := c.EnsureTopics(ctx); err != nil { // learns every broker
		t.Fatal(err)
	}
	thaw := make(chan struct{})
	var answering atomic.Int32 // the node that answers; -1: none
	cluster.ControlKey(int16(kmsg.ApiVersions), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if cluster.CurrentNode() != answering.Load() {
			cluster.SleepControl(func() { <-thaw })
		}
		return nil, nil, false
	})
	defer close(thaw)
	probe := func() (time.Duration, error) {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		began := time.Now()
		err := c.Reachable(pctx)
		return time.Since(began), err
	}
	if took, err := probe(); err != nil {
		t.Errorf("one broker of 3 answering: %v (after %s)", err, took)
	}
	answering.Store(-1)
	if took, err := probe(); err == nil {
		t.Errorf("no broker answering: Reachable returned nil after %s", took)
	}
}

// TestConfigTimeoutsNameTheirKeys: a group session or request timeout
// below a second is refused, naming its key; 0 takes the default.
func TestConfigTimeoutsNameTheirKeys(t *testing.T) {
	for _, tc := range []struct {
		cfg Config
		key string
	}{
		{Config{Brokers: []string{"b:9092"}, GroupSessionTimeout: 500 * time.Millisecond}, "kafka.group_session_timeout"},
		{Config{Brokers: []string{"b:9092"}, RequestTimeout: 500 * time.Millisecond}, "kafka.request_timeout"},
	} {
		if err := tc.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("Validate: %v, want an error naming %s", err, tc.key)
		}
	}
	if got := (Config{}).withDefaults().RequestTimeout; got != DefaultRequestTimeout {
		t.Errorf("default request timeout %s, want %s", got, DefaultRequestTimeout)
	}
}

// clientOn connects a client to a kfake cluster until the test ends.
func clientOn(t *testing.T, ctx context.Context, cluster *kfake.Cluster) *Client {
	t.Helper()
	c, err := NewClient(ctx, Config{Brokers: cluster.ListenAddrs()}, testlog.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestEnsureTopicsGrowsTheDeliveriesTopic: an unkeyed topic with fewer
// partitions than its spec (shoal.deliveries, for more gateway slots) is
// grown, by two clients at once too; a keyed one is still refused, since
// its keys would move.
func TestEnsureTopicsGrowsTheDeliveriesTopic(t *testing.T) {
	e := startEmbedded(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cat := DefaultCatalogue()
	cat.Deliveries.Partitions = 2
	newTestClient(t, e, Config{Catalogue: cat}) // creates the catalogue's topics
	cat.Deliveries.Partitions = 6
	var logs testlog.Buffer
	clients := make([]*Client, 2)
	for i := range clients {
		c, err := NewClient(ctx, e.ClientConfig(Config{Catalogue: cat}), slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients[i] = c
	}
	errs := make(chan error, len(clients))
	for _, c := range clients {
		go func() { errs <- c.EnsureTopics(ctx) }()
	}
	for range clients {
		if err := <-errs; err != nil {
			t.Fatalf("EnsureTopics with shoal.deliveries at 2 partitions and a catalogue of 6: %v, want it grown", err)
		}
	}
	details, _, err := clients[0].describeTopics(ctx, []string{TopicDeliveries})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(details[TopicDeliveries].replicas); n != 6 {
		t.Fatalf("%s has %d partitions, want 6", TopicDeliveries, n)
	}
	if grown := logs.Lines("kafka topic grown"); len(grown) < 1 || !strings.Contains(grown[0], "was=2") {
		t.Errorf("grown lines %q, want one naming the count it had", grown)
	}

	cat.Messages.Partitions = 32
	c := newTestClient(t, e, Config{})
	c.cfg.Catalogue = cat
	if err := c.EnsureTopics(ctx); err == nil || !strings.Contains(err.Error(), TopicMessages) {
		t.Errorf("EnsureTopics with a keyed topic below its spec: %v, want it refused", err)
	}
}
