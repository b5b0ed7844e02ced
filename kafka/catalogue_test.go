package kafka

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestDefaultCatalogue(t *testing.T) {
	cat := DefaultCatalogue()
	if err := cat.Validate(); err != nil {
		t.Fatalf("DefaultCatalogue().Validate() = %v", err)
	}
	want := []struct {
		name      string
		keyed     bool
		compacted bool
		retention time.Duration
	}{
		{TopicMessages, true, false, 7 * 24 * time.Hour},
		{TopicSessions, true, false, 7 * 24 * time.Hour},
		{TopicPresence, true, true, 0},
		{TopicDeliveries, false, false, 7 * 24 * time.Hour},
		{TopicQuotas, true, true, 0},
	}
	all := cat.All()
	if len(all) != len(want) {
		t.Fatalf("All() has %d topics, want %d", len(all), len(want))
	}
	for i, w := range want {
		s := all[i]
		partitions := int32(16)
		if w.name == TopicQuotas {
			partitions = 4
		}
		if s.Name != w.name || s.Keyed != w.keyed || s.Compacted != w.compacted || s.Retention != w.retention ||
			s.Partitions != partitions || s.Replication != -1 || s.Doc == "" {
			t.Errorf("All()[%d] = %+v, want name %s keyed %v compacted %v retention %s, %d partitions, the brokers' replication (-1), a doc",
				i, s, w.name, w.keyed, w.compacted, w.retention, partitions)
		}
		if got, ok := cat.Spec(w.name); !ok || got != s {
			t.Errorf("Spec(%q) = %+v, %v", w.name, got, ok)
		}
	}
	if _, ok := cat.Spec("nope"); ok {
		t.Error(`Spec("nope") found a topic`)
	}
	cfgs := cat.Presence.topicConfigs()
	if *cfgs["cleanup.policy"] != "compact" || *cfgs["retention.ms"] != "-1" {
		t.Errorf("presence configs: cleanup.policy %s retention.ms %s", *cfgs["cleanup.policy"], *cfgs["retention.ms"])
	}
	if _, ok := cfgs["segment.ms"]; ok {
		t.Error("presence configs set segment.ms: the brokers' default was meant")
	}
	cfgs = cat.Quotas.topicConfigs()
	if *cfgs["cleanup.policy"] != "compact" || *cfgs["segment.ms"] != "600000" || *cfgs["segment.bytes"] != "8388608" {
		t.Errorf("quotas configs: cleanup.policy %s segment.ms %s segment.bytes %s", *cfgs["cleanup.policy"], *cfgs["segment.ms"], *cfgs["segment.bytes"])
	}
	cfgs = cat.Messages.topicConfigs()
	if *cfgs["cleanup.policy"] != "delete" || *cfgs["retention.ms"] != "604800000" || *cfgs["retention.bytes"] != "-1" {
		t.Errorf("messages configs: cleanup.policy %s retention.ms %s retention.bytes %s", *cfgs["cleanup.policy"], *cfgs["retention.ms"], *cfgs["retention.bytes"])
	}
}

func TestCatalogueValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Catalogue)
		want   []string // substrings of the error, one per bad field
	}{
		{"zero partitions", func(c *Catalogue) { c.Messages.Partitions = 0 },
			[]string{"kafka.catalogue.messages.partitions: must be ≥ 1"}},
		{"negative partitions", func(c *Catalogue) { c.Deliveries.Partitions = -3 },
			[]string{"kafka.catalogue.deliveries.partitions: must be ≥ 1"}},
		{"zero replication", func(c *Catalogue) { c.Sessions.Replication = 0 },
			[]string{"kafka.catalogue.sessions.replication: must be ≥ 1"}},
		{"broker default replication", func(c *Catalogue) { c.Sessions.Replication = -1 }, nil},
		{"negative retention", func(c *Catalogue) { c.Messages.Retention = -time.Second },
			[]string{"kafka.catalogue.messages.retention: must be ≥ 0"}},
		{"sub-millisecond retention", func(c *Catalogue) { c.Messages.Retention = time.Microsecond },
			[]string{"kafka.catalogue.messages.retention: must be at least 1ms"}},
		{"retention bytes below -1", func(c *Catalogue) { c.Deliveries.RetentionBytes = -2 },
			[]string{"kafka.catalogue.deliveries.retention_bytes: must be -1 or 0 (no size limit) or a number of bytes per partition, is -2"}},
		{"empty name", func(c *Catalogue) { c.Presence.Name = "" },
			[]string{"kafka.catalogue.presence.name: must not be empty"}},
		{"bad character", func(c *Catalogue) { c.Presence.Name = "shoal/presence" },
			[]string{"kafka.catalogue.presence.name:", "only ASCII letters"}},
		{"dot", func(c *Catalogue) { c.Presence.Name = ".." },
			[]string{"kafka.catalogue.presence.name:"}},
		{"too long", func(c *Catalogue) { c.Presence.Name = strings.Repeat("a", 250) },
			[]string{"kafka.catalogue.presence.name: must be at most 249"}},
		{"duplicate name", func(c *Catalogue) { c.Deliveries.Name = TopicMessages },
			[]string{"kafka.catalogue.deliveries.name:", "also the name of kafka.catalogue.messages"}},
		{"negative segment", func(c *Catalogue) { c.Quotas.Segment = -time.Second },
			[]string{"kafka.catalogue.quotas.segment: segment.ms must be 0 or at least 1ms"}},
		{"negative segment bytes", func(c *Catalogue) { c.Quotas.SegmentBytes = -1 },
			[]string{"kafka.catalogue.quotas.segment: segment.bytes must be ≥ 0"}},
		{"several", func(c *Catalogue) { c.Messages.Partitions = 0; c.Sessions.Replication = 0 },
			[]string{"kafka.catalogue.messages.partitions", "kafka.catalogue.sessions.replication"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cat := DefaultCatalogue()
			tt.modify(&cat)
			err := cat.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want an error with %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	good := Config{Brokers: []string{"127.0.0.1:9092"}}
	if err := good.Validate(); err != nil {
		t.Fatalf("Validate() = %v", err)
	}
	tests := []struct {
		name   string
		modify func(*Config)
		want   string
	}{
		{"no brokers", func(c *Config) { c.Brokers = nil }, "kafka.brokers: at least one broker"},
		{"empty broker", func(c *Config) { c.Brokers = []string{""} }, "kafka.brokers[0]: must not be empty"},
		{"negative linger", func(c *Config) { c.Linger = -time.Millisecond }, "kafka.linger: must be ≥ 0"},
		{"negative buffer", func(c *Config) { c.MaxBufferedRecords = -1 }, "kafka.max_buffered_records: must be ≥ 0"},
		{"compression", func(c *Config) { c.Compression = "gzip" }, "kafka.compression:"},
		{"catalogue", func(c *Config) { c.Catalogue = DefaultCatalogue(); c.Catalogue.Messages.Partitions = 0 },
			"kafka.catalogue.messages.partitions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := good
			tt.modify(&cfg)
			if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// Kafka's own test vectors (UtilsTest.testMurmur2 in Apache Kafka).
func TestMurmur2KafkaVectors(t *testing.T) {
	vectors := []struct {
		in   string
		want int32
	}{
		{"21", -973932308},
		{"foobar", -790332482},
		{"a-little-bit-long-string", -985981536},
		{"a-little-bit-longer-string", -1486304829},
		{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
		{"abc", 479470107},
	}
	for _, v := range vectors {
		if got := int32(murmur2([]byte(v.in))); got != v.want {
			t.Errorf("murmur2(%q) = %d, want %d", v.in, got, v.want)
		}
	}
}

// PartitionForKey agrees with franz-go's Kafka-compatible key partitioner for
// many keys and partition counts.
func TestPartitionForKeyMatchesFranzGo(t *testing.T) {
	ref := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		key := make([]byte, rng.IntN(40))
		for j := range key {
			key[j] = byte(rng.Uint32())
		}
		n := 1 + rng.IntN(64)
		if i%4 == 0 {
			n = 16
		}
		want := ref.Partition(&kgo.Record{Key: key}, n)
		if got := PartitionForKey(key, int32(n)); int(got) != want {
			t.Fatalf("PartitionForKey(%x, %d) = %d, franz-go says %d", key, n, got, want)
		}
	}
	if got := PartitionForKey(nil, 16); got != PartitionForKey([]byte{}, 16) {
		t.Errorf("nil and empty keys differ: %d", got)
	}
}

func BenchmarkPartitionForKey(b *testing.B) {
	key := []byte("tenant-a/sensors/building-7/floor-3/temperature")
	b.ReportAllocs()
	for b.Loop() {
		PartitionForKey(key, 16)
	}
}
