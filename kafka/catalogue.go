package kafka

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// The names of Shoal's topics in the default catalogue. The roles take the
// names from their client's catalogue (Client.Catalogue), the one place
// that says which topics a process talks through, never from these.
const (
	// TopicMessages carries publishes and subscription changes, keyed by
	// tenant/topic; each partition is one router shard.
	TopicMessages = "shoal.messages"
	// TopicSessions carries connects, disconnects and session
	// subscriptions, keyed by tenant/client.
	TopicSessions = "shoal.sessions"
	// TopicPresence is the compacted record of where each client is
	// connected, keyed by tenant/client.
	TopicPresence = "shoal.presence"
	// TopicDeliveries carries connect results, kicks and deliveries; the
	// partition is the slot of the gateway they are for.
	TopicDeliveries = "shoal.deliveries"
	// TopicQuotas is the compacted record of what each gateway holds of
	// each tenant with limits, keyed by tenant/gateway id: the gateways
	// of a distributed deployment count the tenants' quotas across the
	// pool from it.
	TopicQuotas = "shoal.quotas"
)

// The default catalogue's settings, which are also the configuration's
// defaults (kafka.partitions, kafka.replication_factor, kafka.retention,
// kafka.retention_bytes).
const (
	// DefaultPartitions is the partition count of every topic.
	DefaultPartitions int32 = 16
	// DefaultReplication is -1, which leaves the replication factor of
	// the topics Shoal creates to the brokers' default.replication.factor
	// (KIP-464): 3 on a production cluster, 1 on a one-node development
	// cluster and on the embedded backbone.
	DefaultReplication int16 = -1
	// DefaultRetention is how long the event topics keep records: long
	// enough to replay any hour of the last week.
	DefaultRetention = 7 * 24 * time.Hour
	// DefaultEmbeddedRetentionBytes is how many bytes each partition of an
	// event topic keeps at most (retention.bytes) on the embedded backbone,
	// where the log shares its machine, often its disk, with the broker:
	// the 48 event partitions of the default catalogue (16 each of
	// messages, sessions and deliveries) then keep at most 48 × (20 + 1)
	// MiB, about 1 GiB, with the embedded broker's 1 MiB segments
	// (EmbeddedSegmentBytes; a segment is deleted whole). The default
	// catalogue, and Kafka, bound the event topics by time only.
	DefaultEmbeddedRetentionBytes int64 = 20 << 20
	// EmbeddedRetentionBudget is how many bytes each event topic keeps at
	// most on the embedded backbone when kafka.retention_bytes is not set:
	// DefaultEmbeddedRetentionBytes per partition of DefaultPartitions,
	// split over the topic's partitions whatever their count
	// (TopicSpec.RetentionBytesTotal), so that a topic with fewer
	// partitions keeps as much of the log, in time, as one with more.
	EmbeddedRetentionBudget = DefaultEmbeddedRetentionBytes * int64(DefaultPartitions)
	// DefaultQuotaPartitions is the partition count of shoal.quotas,
	// whatever kafka.partitions says: every gateway reads all of them, and
	// the topic holds one small record per tenant and gateway.
	DefaultQuotaPartitions int32 = 4
	// QuotaSegment and QuotaSegmentBytes roll the segments of
	// shoal.quotas early (Kafka compacts only rolled segments): the topic
	// is rewritten every second or so and read from its start by every
	// gateway that starts, so it should stay near one record per key.
	QuotaSegment      = 10 * time.Minute
	QuotaSegmentBytes = 8 << 20
)

// EmbeddedPartitions is the partition count of the event topics of a new
// data directory of the embedded backbone when kafka.partitions is not set,
// on a machine of procs CPUs (GOMAXPROCS): twice the CPUs, at least 4 and
// at most DefaultPartitions. kfake keeps an index entry per batch of the
// log in memory, and at a moderate rate a partition's batch holds what the
// producer's linger gathered for it: fewer partitions make larger batches,
// less index per byte of log (20–25 % of the log with 16 partitions at
// 10,000 msg/s on 2 CPUs, about half that with 4), and fewer segment
// writes; a machine with more CPUs keeps the partitions its router shards
// run on in parallel. An existing data directory keeps its count
// (Config.AdoptPartitions).
func EmbeddedPartitions(procs int) int32 {
	return int32(min(max(2*procs, 4), int(DefaultPartitions)))
}

// TopicSpec describes one topic of the catalogue: how EnsureTopics creates
// it and how the producer picks partitions for it.
type TopicSpec struct {
	// Name is the Kafka topic name.
	Name string
	// Partitions is the number of partitions. For a keyed topic it is part
	// of the key → partition mapping, so it must not change once records
	// exist.
	Partitions int32
	// Replication is the replication factor; -1 leaves it to the broker's
	// default.
	Replication int16
	// Compacted selects cleanup.policy=compact (the newest record per key is
	// kept forever) instead of delete.
	Compacted bool
	// Retention is how long records are kept (retention.ms); 0 keeps them
	// without a time limit. It does not apply to compacted topics.
	Retention time.Duration
	// RetentionBytes is how many bytes each partition keeps at most
	// (retention.bytes: the oldest segments are deleted, whole, beyond
	// it); 0 or -1 keeps them without a size limit. It does not apply to
	// compacted topics, which are created with retention.bytes -1 so that
	// no broker default deletes their state.
	RetentionBytes int64
	// RetentionBytesTotal, when > 0, bounds the topic's size as a whole:
	// each partition keeps RetentionBytesTotal / Partitions bytes
	// (retention.bytes), and RetentionBytes is not used. It follows the
	// partition count, also one adopted from an existing topic
	// (Config.AdoptPartitions).
	RetentionBytesTotal int64
	// Segment and SegmentBytes roll a partition's active segment after
	// this time or size (segment.ms, segment.bytes); 0 leaves it to the
	// brokers (a week, a GiB). A compacted topic is compacted only up to
	// its active segment.
	Segment      time.Duration
	SegmentBytes int64
	// Keyed says how the producer picks a record's partition: true hashes
	// the key with murmur2 exactly like Kafka's default partitioner
	// (PartitionForKey) when Record.Partition is PartitionByKey, and
	// takes Record.Partition when it is ≥ 0 (a broadcast to every
	// partition); false always takes Record.Partition (deliveries: the
	// gateway slot).
	Keyed bool
	// MaxMessageBytes is the largest record batch the topic accepts
	// (max.message.bytes), set when the topic is created and raised on an
	// existing topic that accepts less; 0 leaves it to the brokers'
	// message.max.bytes (1 MiB by default). The producer's batches are
	// bounded by the catalogue's largest (Catalogue.MaxMessageBytes).
	MaxMessageBytes int32
	// Doc says what the topic carries, for ARCHITECTURE.md and operators.
	Doc string
}

// RecordHeadroom is what a record of the log may carry besides the MQTT
// packet it comes from: the envelope (client id, tenant, gateway, message
// id, timestamps), trace context, and a delivery's targets, at most
// router.max_targets_per_delivery of them (DefaultMaxTargets: a thousand
// targets with client ids of 500 bytes take half of it).
const RecordHeadroom = 1 << 20

// MaxMessageBytesFor is the max.message.bytes of the topics of a broker
// whose gateways accept MQTT packets of up to maxPacket bytes: a PUBLISH or
// a will of that size, wrapped in its event, fits in one record, also as a
// delivery or in an inbox.
func MaxMessageBytesFor(maxPacket uint32) int32 {
	return int32(min(int64(maxPacket)+RecordHeadroom, math.MaxInt32))
}

// SetMaxMessageBytes sets every topic's MaxMessageBytes to n.
func (c *Catalogue) SetMaxMessageBytes(n int32) {
	for _, s := range c.specs() {
		s.MaxMessageBytes = n
	}
}

// MaxMessageBytes is the largest MaxMessageBytes of the catalogue's topics,
// 0 when none sets one.
func (c Catalogue) MaxMessageBytes() int32 {
	var n int32
	for _, s := range c.All() {
		n = max(n, s.MaxMessageBytes)
	}
	return n
}

// Catalogue is the set of topics Shoal's roles talk through.
type Catalogue struct {
	Messages   TopicSpec
	Sessions   TopicSpec
	Presence   TopicSpec
	Deliveries TopicSpec
	Quotas     TopicSpec
}

// DefaultCatalogue returns the catalogue Shoal runs with unless configured
// otherwise: DefaultPartitions per topic, the brokers' replication
// (DefaultReplication), the event topics kept for DefaultRetention, presence
// compacted without a time limit.
func DefaultCatalogue() Catalogue {
	return Catalogue{
		Messages: TopicSpec{
			Name: TopicMessages, Partitions: DefaultPartitions, Replication: DefaultReplication,
			Retention: DefaultRetention, Keyed: true,
			Doc: "Publish and SubscriptionChange, key tenant/topic; produced by gateways, consumed by routers (one shard per partition)",
		},
		Sessions: TopicSpec{
			Name: TopicSessions, Partitions: DefaultPartitions, Replication: DefaultReplication,
			Retention: DefaultRetention, Keyed: true,
			Doc: "Connect, Disconnect and SessionSubscriptions, key tenant/client; produced by gateways, consumed by the session service",
		},
		Presence: TopicSpec{
			Name: TopicPresence, Partitions: DefaultPartitions, Replication: DefaultReplication,
			Compacted: true, Keyed: true,
			Doc: "Presence (where a client is connected, with its generation), key tenant/client, compacted; produced by the session service, consumed by routers",
		},
		Deliveries: TopicSpec{
			Name: TopicDeliveries, Partitions: DefaultPartitions, Replication: DefaultReplication,
			Retention: DefaultRetention, Keyed: false,
			Doc: "ConnectResult, Kick and Delivery, partition = gateway slot; produced by the session service and routers, consumed by the gateway owning the slot",
		},
		Quotas: TopicSpec{
			Name: TopicQuotas, Partitions: DefaultQuotaPartitions, Replication: DefaultReplication,
			Compacted: true, Keyed: true, Segment: QuotaSegment, SegmentBytes: QuotaSegmentBytes,
			Doc: "QuotaReport (what a gateway holds of a tenant with limits) or a tombstone, key tenant/gateway id, compacted; produced and consumed by the gateways of a distributed deployment",
		},
	}
}

// All returns the catalogue's topics in a fixed order: messages, sessions,
// presence, deliveries, quotas.
func (c Catalogue) All() []TopicSpec {
	return []TopicSpec{c.Messages, c.Sessions, c.Presence, c.Deliveries, c.Quotas}
}

// names returns the catalogue's topic names, in All's order.
func (c Catalogue) names() []string {
	all := c.All()
	names := make([]string, len(all))
	for i, s := range all {
		names[i] = s.Name
	}
	return names
}

// specs returns pointers to the catalogue's specs, in All's order.
func (c *Catalogue) specs() []*TopicSpec {
	return []*TopicSpec{&c.Messages, &c.Sessions, &c.Presence, &c.Deliveries, &c.Quotas}
}

// Spec returns the spec of the named topic and whether the catalogue has it.
func (c Catalogue) Spec(topic string) (TopicSpec, bool) {
	switch topic {
	case c.Messages.Name:
		return c.Messages, true
	case c.Sessions.Name:
		return c.Sessions, true
	case c.Presence.Name:
		return c.Presence, true
	case c.Deliveries.Name:
		return c.Deliveries, true
	case c.Quotas.Name:
		return c.Quotas, true
	}
	return TopicSpec{}, false
}

// isZero reports whether no topic of the catalogue is set, in which case the
// client uses DefaultCatalogue.
func (c Catalogue) isZero() bool {
	return c == Catalogue{}
}

// Validate checks every topic of the catalogue and returns one error per bad
// field, each naming it (kafka.catalogue.messages.partitions: must be ≥ 1).
func (c Catalogue) Validate() error {
	var errs []error
	fields := []struct {
		key  string
		spec TopicSpec
	}{
		{"messages", c.Messages},
		{"sessions", c.Sessions},
		{"presence", c.Presence},
		{"deliveries", c.Deliveries},
		{"quotas", c.Quotas},
	}
	seen := make(map[string]string, len(fields))
	for _, f := range fields {
		errs = append(errs, f.spec.validate("kafka.catalogue."+f.key))
		if f.spec.Name == "" {
			continue
		}
		if other, dup := seen[f.spec.Name]; dup {
			errs = append(errs, fmt.Errorf("kafka.catalogue.%s.name: %q is also the name of kafka.catalogue.%s", f.key, f.spec.Name, other))
		}
		seen[f.spec.Name] = f.key
	}
	return errors.Join(errs...)
}

func (s TopicSpec) validate(prefix string) error {
	var errs []error
	for _, f := range []struct {
		key string
		err error
	}{
		{"name", validTopicName(s.Name)},
		{"partitions", CheckPartitions(s.Partitions)},
		{"replication", CheckReplication(s.Replication)},
		{"retention", CheckRetention(s.Retention)},
		{"retention_bytes", checkRetentionBytes(s.RetentionBytes)},
		{"retention_bytes_total", checkRetentionBytes(s.RetentionBytesTotal)},
		{"segment", checkSegment(s.Segment, s.SegmentBytes)},
	} {
		if f.err != nil {
			errs = append(errs, fmt.Errorf("%s.%s: %w", prefix, f.key, f.err))
		}
	}
	return errors.Join(errs...)
}

// CheckPartitions says why n is not a topic's partition count, nil when it
// is one. The caller names the setting (kafka.partitions).
func CheckPartitions(n int32) error {
	if n < 1 {
		return fmt.Errorf("must be ≥ 1, is %d", n)
	}
	return nil
}

// CheckReplication says why rf is not a replication factor for the topics
// Shoal creates, nil when it is one: ≥ 1, or -1 for the brokers' default.
// The caller names the setting (kafka.replication_factor).
func CheckReplication(rf int16) error {
	if rf < 1 && rf != -1 {
		return fmt.Errorf("must be ≥ 1, or -1 for the brokers' default.replication.factor; is %d", rf)
	}
	return nil
}

// CheckRetention says why d is not a retention for the topics Shoal
// creates, nil when it is one: 0 (no time limit) or at least 1ms, Kafka's
// unit. The caller names the setting (kafka.retention).
func CheckRetention(d time.Duration) error {
	switch {
	case d < 0:
		return fmt.Errorf("must be ≥ 0 (0 keeps records without a time limit), is %s", d)
	case d > 0 && d < time.Millisecond:
		return fmt.Errorf("must be at least 1ms, is %s", d)
	}
	return nil
}

// checkRetentionBytes says why n is not a topic's size bound, nil when it
// is one: -1 or 0 (no size limit) or a number of bytes.
func checkRetentionBytes(n int64) error {
	if n < -1 {
		return fmt.Errorf("must be -1 or 0 (no size limit) or a number of bytes per partition, is %d", n)
	}
	return nil
}

// checkSegment says why a segment setting is not one: both are ≥ 0 (0:
// the brokers' default), a time at least 1ms.
func checkSegment(d time.Duration, size int64) error {
	switch {
	case d < 0 || (d > 0 && d < time.Millisecond):
		return fmt.Errorf("segment.ms must be 0 or at least 1ms, is %s", d)
	case size < 0:
		return fmt.Errorf("segment.bytes must be ≥ 0, is %d", size)
	}
	return nil
}

// validTopicName applies Kafka's rules for topic names.
func validTopicName(name string) error {
	switch {
	case name == "":
		return errors.New("must not be empty")
	case name == "." || name == "..":
		return fmt.Errorf("%q is not allowed", name)
	case len(name) > 249:
		return fmt.Errorf("must be at most 249 characters, is %d", len(name))
	}
	for i := 0; i < len(name); i++ {
		switch b := name[i]; {
		case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9', b == '.', b == '_', b == '-':
		default:
			return fmt.Errorf("%q: only ASCII letters, digits, '.', '_' and '-' are allowed", name)
		}
	}
	return nil
}

// PartitionForKey returns the partition a keyed record with this key goes
// to in a topic with the given number of partitions: murmur2 of the key with
// the sign bit masked, modulo partitions, exactly as Kafka's default
// partitioner (and franz-go's StickyKeyPartitioner) computes it. The client's
// partitioner calls this very function for records of keyed topics with
// Partition PartitionByKey, so a service can compute which shard owns a key
// without producing. partitions must be ≥ 1.
// A nil key hashes like an empty one.
func PartitionForKey(key []byte, partitions int32) int32 {
	return int32(murmur2(key)&0x7fffffff) % partitions
}

// murmur2 is Kafka's Utils.murmur2 (org.apache.kafka.common.utils), the hash
// of its default partitioner.
func murmur2(b []byte) uint32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	h := seed ^ uint32(len(b))
	for len(b) >= 4 {
		k := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
		b = b[4:]
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	switch len(b) {
	case 3:
		h ^= uint32(b[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(b[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(b[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}
