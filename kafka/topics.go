package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// partitionBytes is how many bytes each partition keeps at most: the
// topic's RetentionBytesTotal split over its partitions, else
// RetentionBytes; 0 or -1 for no bound.
func (s TopicSpec) partitionBytes() int64 {
	if s.RetentionBytesTotal > 0 && s.Partitions > 0 {
		return max(1, s.RetentionBytesTotal/int64(s.Partitions))
	}
	return s.RetentionBytes
}

// topicConfigs returns the topic-level configuration EnsureTopics creates a
// topic with.
func (s TopicSpec) topicConfigs() map[string]*string {
	policy, retention, retentionBytes := "delete", "-1", "-1"
	if s.Compacted {
		policy = "compact"
	}
	if s.Retention > 0 {
		retention = strconv.FormatInt(s.Retention.Milliseconds(), 10)
	}
	// A compacted topic keeps -1 whatever its spec says: deleting by size
	// would lose the newest state of the keys in its oldest segments (Kafka
	// ignores retention.bytes under cleanup.policy=compact, kfake does not).
	if rb := s.partitionBytes(); rb > 0 && !s.Compacted {
		retentionBytes = strconv.FormatInt(rb, 10)
	}
	cfg := map[string]*string{
		"cleanup.policy":  kadm.StringPtr(policy),
		"retention.ms":    kadm.StringPtr(retention),
		"retention.bytes": kadm.StringPtr(retentionBytes),
	}
	if s.Segment > 0 {
		cfg["segment.ms"] = kadm.StringPtr(strconv.FormatInt(s.Segment.Milliseconds(), 10))
	}
	if s.SegmentBytes > 0 {
		cfg["segment.bytes"] = kadm.StringPtr(strconv.FormatInt(s.SegmentBytes, 10))
	}
	if s.MaxMessageBytes > 0 {
		cfg["max.message.bytes"] = kadm.StringPtr(strconv.Itoa(int(s.MaxMessageBytes)))
	}
	if s.Replication >= 3 {
		// With acks=all, a write is then on at least two replicas
		// before it is acknowledged (the broker default is one).
		cfg["min.insync.replicas"] = kadm.StringPtr("2")
	}
	return cfg
}

// EnsureTopics creates the catalogue's topics that do not exist, with their
// partitions, replication, cleanup.policy, retention.ms and retention.bytes
// (and
// min.insync.replicas=2 when the replication is 3 or more, segment.ms,
// segment.bytes and max.message.bytes when the spec sets them), and checks
// those that exist. It is idempotent and safe to run from several processes
// at once. An existing topic fails the check when it has fewer partitions
// than the catalogue says (records would go to partitions that do not
// exist; an unkeyed topic, the deliveries', is grown instead: growTopic),
// when a keyed topic has more (PartitionForKey would disagree with
// the producer), or when its cleanup.policy differs. A max.message.bytes
// below the spec's is raised (raiseMaxMessageBytes). A different retention
// (by time or size),
// replication, or more partitions on an unkeyed topic are logged as
// warnings naming the topic and both values, and left as they are:
// operators may have tuned them (kafka-configs --alter changes them).
// With Replication -1 the brokers choose; a topic that got fewer than 3
// replicas on a cluster of 3 or more brokers is warned about.
func (c *Client) EnsureTopics(ctx context.Context) error {
	return c.EnsureSpecs(ctx, c.cfg.Catalogue.All()...)
}

// EnsureSpecs is EnsureTopics for topics of other specs than the
// catalogue's (a role's own: the Kafka bridge's state).
func (c *Client) EnsureSpecs(ctx context.Context, specs ...TopicSpec) error {
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	existing, _, err := c.describeTopics(ctx, names)
	if err != nil {
		return fmt.Errorf("ensure topics: %w", err)
	}
	var errs []error
	for _, s := range specs {
		d := existing[s.Name]
		switch {
		case d.err == nil && !s.Keyed && int32(len(d.replicas)) < s.Partitions:
			if err := c.growTopic(ctx, s, int32(len(d.replicas))); err != nil {
				errs = append(errs, err)
			}
			continue
		case d.err == nil:
			continue
		case !errors.Is(d.err, kerr.UnknownTopicOrPartition):
			errs = append(errs, fmt.Errorf("ensure topic %s: %w", s.Name, d.err))
			continue
		}
		_, err := c.adm.CreateTopic(ctx, s.Partitions, s.Replication, s.topicConfigs(), s.Name)
		switch {
		case err == nil:
			c.log.Info("kafka topic created", "topic", s.Name, "partitions", s.Partitions,
				"replication", s.Replication, "compacted", s.Compacted, "retention", s.Retention,
				"retention_bytes", *s.topicConfigs()["retention.bytes"])
		case errors.Is(err, kerr.TopicAlreadyExists):
			// Created concurrently by another process: checked below.
		default:
			errs = append(errs, fmt.Errorf("ensure topic %s: create: %w", s.Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return c.checkTopics(ctx, specs, names)
}

// growTopic adds partitions to an existing unkeyed topic that has fewer
// than its spec (had): nothing maps a key to its partitions, so more of
// them change nothing already written, and the deliveries topic grows this
// way to take more gateway slots (kafka.deliveries_partitions). Several
// processes may grow it at once: a count already reached is no error. It
// returns once a broker answers with the new count.
func (c *Client) growTopic(ctx context.Context, s TopicSpec, had int32) error {
	resp, err := c.adm.UpdatePartitions(ctx, int(s.Partitions), s.Name)
	if err == nil {
		err = resp.Error()
	}
	if err != nil && !errors.Is(err, kerr.InvalidPartitions) { // grown concurrently: checked below
		return fmt.Errorf("ensure topic %s: grow from %d to %d partitions: %w; grow it with kafka-topics --alter --partitions %d",
			s.Name, had, s.Partitions, err, s.Partitions)
	}
	for backoff := 20 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		details, _, err := c.describeTopics(ctx, []string{s.Name})
		if err != nil {
			return fmt.Errorf("ensure topic %s: %w", s.Name, err)
		}
		if n := int32(len(details[s.Name].replicas)); n >= s.Partitions {
			if n > had {
				c.log.Info("kafka topic grown", "topic", s.Name, "partitions", n, "was", had)
			}
			return nil
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("ensure topic %s: waiting for its %d partitions: %w", s.Name, s.Partitions, ctx.Err())
		case <-t.C:
		}
	}
}

// topicDetail is what a metadata response says about one topic.
type topicDetail struct {
	err      error
	replicas []int // per partition
}

// describeTopics asks a broker (not franz-go's metadata cache, which may be
// seconds old) about topics; it also returns the number of brokers.
func (c *Client) describeTopics(ctx context.Context, names []string) (map[string]topicDetail, int, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, n := range names {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return nil, 0, fmt.Errorf("describe topics: %w", err)
	}
	out := make(map[string]topicDetail, len(names))
	for _, n := range names {
		out[n] = topicDetail{err: kerr.UnknownTopicOrPartition}
	}
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		d := topicDetail{err: kerr.ErrorForCode(t.ErrorCode)}
		for _, p := range t.Partitions {
			d.replicas = append(d.replicas, len(p.Replicas))
		}
		out[*t.Topic] = d
	}
	return out, len(resp.Brokers), nil
}

// checkTopics waits until the topics are visible (a created topic takes a
// moment to reach every broker) and compares them with their specs.
func (c *Client) checkTopics(ctx context.Context, specs []TopicSpec, names []string) error {
	details, brokers, configs, err := c.waitVisible(ctx, names)
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range specs {
		d := details[s.Name]
		if d.err != nil {
			errs = append(errs, fmt.Errorf("ensure topic %s: %w", s.Name, d.err))
			continue
		}
		n := int32(len(d.replicas))
		switch {
		case n < s.Partitions:
			errs = append(errs, fmt.Errorf("ensure topic %s: it has %d partitions, the catalogue needs %d: add partitions to the topic (kafka-topics --alter --partitions %d) or lower the catalogue's count",
				s.Name, n, s.Partitions, s.Partitions))
		case n > s.Partitions && s.Keyed:
			errs = append(errs, fmt.Errorf("ensure topic %s: it has %d partitions, the catalogue says %d: keys would map to other partitions than PartitionForKey computes; set the catalogue's count to %d",
				s.Name, n, s.Partitions, n))
		case n > s.Partitions:
			c.log.Warn("kafka topic has more partitions than configured; the extra ones are unused",
				"topic", s.Name, "partitions", n, "configured", s.Partitions)
		}
		for p, rf := range d.replicas {
			if s.Replication > 0 && rf != int(s.Replication) {
				c.log.Warn("kafka topic replication differs from the configured one; left as it is",
					"topic", s.Name, "partition", p, "replicas", rf, "configured", s.Replication)
				break
			}
			if s.Replication < 0 && rf < 3 && brokers >= 3 {
				c.log.Warn("kafka topic has fewer than 3 replicas on a cluster of 3 or more brokers (the brokers' default.replication.factor); set kafka.replication_factor",
					"topic", s.Name, "partition", p, "replicas", rf, "brokers", brokers)
				break
			}
		}
		rc, err := configs.On(s.Name, nil)
		if err == nil {
			err = rc.Err
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("ensure topic %s: describe configs: %w", s.Name, err))
			continue
		}
		want := s.topicConfigs()
		for _, cfg := range rc.Configs {
			switch cfg.Key {
			case "cleanup.policy":
				if got := cfg.MaybeValue(); got != *want["cleanup.policy"] {
					errs = append(errs, fmt.Errorf("ensure topic %s: cleanup.policy is %q, the catalogue needs %q", s.Name, got, *want["cleanup.policy"]))
				}
			case "retention.ms":
				if got := cfg.MaybeValue(); got != *want["retention.ms"] {
					c.log.Warn("kafka topic retention differs from the configured one; left as it is",
						"topic", s.Name, "retention_ms", got, "configured_ms", *want["retention.ms"])
				}
			case "retention.bytes":
				if got := cfg.MaybeValue(); got != *want["retention.bytes"] {
					c.log.Warn("kafka topic retention by size differs from the configured one; left as it is",
						"topic", s.Name, "retention_bytes", got, "configured_bytes", *want["retention.bytes"])
				}
			case "max.message.bytes":
				if err := c.raiseMaxMessageBytes(ctx, s, cfg.MaybeValue()); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// waitVisible describes the topics and their configurations until no
// broker asked says it does not know one: on a cluster of several brokers
// a topic just created reaches them one by one, so the broker that answers
// the metadata may know it and the one that answers for its configuration
// not yet. It waits as long as ctx allows.
func (c *Client) waitVisible(ctx context.Context, names []string) (map[string]topicDetail, int, kadm.ResourceConfigs, error) {
	for backoff := 20 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		details, brokers, err := c.describeTopics(ctx, names)
		if err != nil {
			return nil, 0, nil, fmt.Errorf("ensure topics: %w", err)
		}
		missing := ""
		for n, d := range details {
			if errors.Is(d.err, kerr.UnknownTopicOrPartition) || errors.Is(d.err, kerr.LeaderNotAvailable) {
				missing = n
			}
		}
		var configs kadm.ResourceConfigs
		if missing == "" {
			if configs, err = c.adm.DescribeTopicConfigs(ctx, names...); err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
				return nil, 0, nil, fmt.Errorf("ensure topics: describe configs: %w", err)
			}
			if err != nil {
				missing = "a topic"
			}
			for _, rc := range configs {
				if errors.Is(rc.Err, kerr.UnknownTopicOrPartition) {
					missing = rc.Name
				}
			}
		}
		if missing == "" {
			return details, brokers, configs, nil
		}
		c.log.Debug("kafka topic not yet known to every broker; asking again", "topic", missing, "backoff", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, 0, nil, fmt.Errorf("ensure topics: waiting for %s to reach every broker: %w", missing, ctx.Err())
		case <-t.C:
		}
	}
}

// raiseMaxMessageBytes raises the max.message.bytes of an existing topic
// that accepts smaller records than its spec (got is its value): the
// largest packet the gateways accept must fit in a record, or a client's
// publish of that size would fail in the log. A larger value is left alone.
func (c *Client) raiseMaxMessageBytes(ctx context.Context, s TopicSpec, got string) error {
	if s.MaxMessageBytes <= 0 {
		return nil
	}
	n, err := strconv.ParseInt(got, 10, 64)
	if err == nil && n >= int64(s.MaxMessageBytes) {
		return nil
	}
	want := strconv.Itoa(int(s.MaxMessageBytes))
	resp, err := c.adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: &want}}, s.Name)
	if err == nil {
		var r kadm.AlterConfigsResponse
		if r, err = resp.On(s.Name, nil); err == nil {
			err = r.Err
		}
	}
	if err != nil {
		return fmt.Errorf("ensure topic %s: raise max.message.bytes from %s to %s (the largest MQTT packet accepted, gateway.max_packet_size, with its event around it): %w; raise it with kafka-configs --alter --add-config max.message.bytes=%s",
			s.Name, got, want, err, want)
	}
	c.log.Info("kafka topic max.message.bytes raised to fit the largest MQTT packet accepted",
		"topic", s.Name, "max_message_bytes", want, "was", got)
	return nil
}

// EnsureTopic creates the topic name, when it does not exist, with the
// partitions and replication of the catalogue's shoal.messages, its
// max.message.bytes and min.insync.replicas, and the brokers' retention:
// a topic Shoal writes for its users (the Kafka bridge's), whose retention
// is theirs to set. It is idempotent and safe to run from several
// processes at once; an error names the topic (a cluster that does not let
// this client create topics: create it, or grant the right).
func (c *Client) EnsureTopic(ctx context.Context, name string) error {
	details, _, err := c.describeTopics(ctx, []string{name})
	if err != nil {
		return fmt.Errorf("ensure topic %s: %w", name, err)
	}
	switch d := details[name]; {
	case d.err == nil:
		return nil
	case !errors.Is(d.err, kerr.UnknownTopicOrPartition):
		return fmt.Errorf("ensure topic %s: %w", name, d.err)
	}
	spec := c.cfg.Catalogue.Messages
	cfg := map[string]*string{}
	if spec.MaxMessageBytes > 0 {
		cfg["max.message.bytes"] = kadm.StringPtr(strconv.Itoa(int(spec.MaxMessageBytes)))
	}
	if spec.Replication >= 3 {
		cfg["min.insync.replicas"] = kadm.StringPtr("2")
	}
	_, err = c.adm.CreateTopic(ctx, spec.Partitions, spec.Replication, cfg, name)
	switch {
	case err == nil:
		c.log.Info("kafka topic created", "topic", name, "partitions", spec.Partitions, "replication", spec.Replication)
	case errors.Is(err, kerr.TopicAlreadyExists):
	default:
		return fmt.Errorf("ensure topic %s: create: %w", name, err)
	}
	// Created: wait until the brokers know it, as EnsureTopics does.
	for backoff := 20 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		details, _, err := c.describeTopics(ctx, []string{name})
		if err != nil {
			return fmt.Errorf("ensure topic %s: %w", name, err)
		}
		d := details[name]
		if d.err == nil {
			return nil
		}
		if !errors.Is(d.err, kerr.UnknownTopicOrPartition) && !errors.Is(d.err, kerr.LeaderNotAvailable) {
			return fmt.Errorf("ensure topic %s: %w", name, d.err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("ensure topic %s: waiting for it: %w", name, ctx.Err())
		case <-t.C:
		}
	}
}

// GroupLag returns how many records each of groups has yet to read of its
// topics: the end offsets less the committed offsets, summed over the
// partitions (a partition without a commit counts from its start). A group
// that cannot be described or whose offsets cannot be fetched is an error.
func (c *Client) GroupLag(ctx context.Context, groups ...string) (map[string]int64, error) {
	lags, err := c.adm.Lag(ctx, groups...)
	if err != nil {
		return nil, fmt.Errorf("group lag: %w", err)
	}
	out := make(map[string]int64, len(groups))
	var errs []error
	lags.Each(func(l kadm.DescribedGroupLag) {
		if err := l.Error(); err != nil {
			errs = append(errs, fmt.Errorf("group lag of %s: %w", l.Group, err))
			return
		}
		out[l.Group] = l.Lag.Total()
	})
	return out, errors.Join(errs...)
}
