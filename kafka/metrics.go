package kafka

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/shoal-mqtt/shoal/internal/obs"
)

// The client's instruments (Config.Telemetry's meter): produce latency
// and failures per topic, measured in the promise of every record, and the
// lag of every consumer Consume runs, per partition. Recording allocates
// nothing: the attribute options of a topic are made once, those of a
// partition when it is first fetched.

// maxMetricTopics bounds the topics with series of their own; records of
// further topics (outside the catalogue: tests, tools) count under
// topic="_other".
const maxMetricTopics = 64

// clientMetrics are a Client's instruments.
type clientMetrics struct {
	duration metric.Float64Histogram
	errors   metric.Int64Counter
	skipped  metric.Int64Counter // records consumers passed over (Client.skipped)
	reg      metric.Registration // the consumer lag callback

	// topics maps a topic to its attribute options: read without a lock,
	// replaced (copied) when a topic is added.
	topics   atomic.Pointer[map[string]*topicOptions]
	topicsMu sync.Mutex

	mu        sync.Mutex
	consumers map[*consumerLag]struct{}
}

// topicOptions are the attribute options of one topic's series.
type topicOptions struct {
	record []metric.RecordOption
	add    []metric.AddOption
}

func newTopicOptions(topic string) *topicOptions {
	set := attribute.NewSet(attribute.String("topic", topic))
	return &topicOptions{
		record: []metric.RecordOption{metric.WithAttributeSet(set)},
		add:    []metric.AddOption{metric.WithAttributeSet(set)},
	}
}

// newClientMetrics makes the instruments on p's meter, with the options of
// cat's topics.
func newClientMetrics(p obs.Providers, cat Catalogue) (*clientMetrics, error) {
	p = p.WithDefaults()
	m := p.Meter.Meter(obs.Scope)
	cm := &clientMetrics{consumers: make(map[*consumerLag]struct{})}
	topics := make(map[string]*topicOptions)
	for _, spec := range cat.All() {
		topics[spec.Name] = newTopicOptions(spec.Name)
	}
	cm.topics.Store(&topics)
	var errs [5]error
	cm.duration, errs[0] = m.Float64Histogram("shoal.kafka.produce.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from a record given to the producer to its acknowledgement by the brokers (acks=all), per topic."),
		metric.WithExplicitBucketBoundaries(obs.LatencyBuckets...))
	cm.errors, errs[1] = m.Int64Counter("shoal.kafka.produce.errors", metric.WithUnit("{record}"),
		metric.WithDescription("Records the producer failed to write (refused, not retriable, or the client closed), per topic."))
	if errs[1] == nil {
		for _, o := range topics { // the catalogue's series from the start, at 0
			cm.errors.Add(context.Background(), 0, o.add...)
		}
	}
	cm.skipped, errs[4] = m.Int64Counter("shoal.kafka.consumer.skipped", metric.WithUnit("{record}"),
		metric.WithDescription("Records a consumer passed over because the log had deleted them (retention.ms or retention.bytes) before it read them, per topic: a role that lagged or was stopped for longer than the log keeps."))
	if errs[4] == nil {
		for _, o := range topics {
			cm.skipped.Add(context.Background(), 0, o.add...)
		}
	}
	var lag metric.Int64ObservableGauge
	lag, errs[2] = m.Int64ObservableGauge("shoal.kafka.consumer.lag", metric.WithUnit("{record}"),
		metric.WithDescription("Records of a partition not consumed yet: its high watermark less the next offset to consume, as of the last fetch, per topic, partition and consumer group."))
	if errs[2] == nil {
		cm.reg, errs[3] = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
			cm.observeLag(o, lag)
			return nil
		}, lag)
	}
	return cm, errors.Join(errs[:]...)
}

// options returns the attribute options of topic's series, making them
// for a topic outside the catalogue.
func (m *clientMetrics) options(topic string) *topicOptions {
	if o := (*m.topics.Load())[topic]; o != nil {
		return o
	}
	m.topicsMu.Lock()
	defer m.topicsMu.Unlock()
	old := *m.topics.Load()
	if o := old[topic]; o != nil {
		return o
	}
	if len(old) >= maxMetricTopics {
		if o := old[obs.OtherTenant]; o != nil {
			return o
		}
		topic = obs.OtherTenant // "_other": not a valid topic name
	}
	topics := make(map[string]*topicOptions, len(old)+1)
	for k, v := range old {
		topics[k] = v
	}
	o := newTopicOptions(topic)
	topics[topic] = o
	m.topics.Store(&topics)
	return o
}

// skip counts n records of topic that a consumer passed over.
func (m *clientMetrics) skip(topic string, n int64) {
	if m == nil || m.skipped == nil {
		return
	}
	m.skipped.Add(context.Background(), n, m.options(topic).add...)
}

// produced records the outcome of one record of topic given to the
// producer at start.
func (m *clientMetrics) produced(topic string, start time.Time, err error) {
	if m == nil {
		return
	}
	o := m.options(topic)
	if err != nil {
		m.errors.Add(context.Background(), 1, o.add...)
		return
	}
	m.duration.Record(context.Background(), time.Since(start).Seconds(), o.record...)
}

// consumerLag is the lag of one Consume call's partitions.
type consumerLag struct {
	topic, group string

	mu    sync.Mutex
	parts map[int32]*partitionLag
}

// partitionLag is one partition's: next is the next offset to consume (-1
// until known), lag the high watermark less next at the last fetch; want
// is the offset the next fetched record should have (-1: any), the
// consumer's start until it has fetched a record.
type partitionLag struct {
	next, lag, want int64
	opt             metric.ObserveOption
}

// consumer starts tracking the lag of a consumer of topic (in group, if
// not empty) until forget.
func (m *clientMetrics) consumer(topic, group string) *consumerLag {
	if m == nil {
		return nil
	}
	l := &consumerLag{topic: topic, group: group, parts: make(map[int32]*partitionLag)}
	m.mu.Lock()
	m.consumers[l] = struct{}{}
	m.mu.Unlock()
	return l
}

// forget stops tracking l: its series disappear.
func (m *clientMetrics) forget(l *consumerLag) {
	if m == nil || l == nil {
		return
	}
	m.mu.Lock()
	delete(m.consumers, l)
	m.mu.Unlock()
}

// expect notes where a consumer starts reading partition (an offset, or
// a negative Start* constant: anywhere), so that fetched can tell the
// records it passed over.
func (l *consumerLag) expect(partition int32, next int64) {
	if l == nil {
		return
	}
	l.mu.Lock()
	p := l.partition(partition)
	p.want = max(next, -1)
	l.mu.Unlock()
}

// fetched takes the lag of a fetched partition: a fetch with records
// moves the next offset past its last record; any fetch without an error
// gives the partition's high watermark. A partition never fetched with
// records has no known next offset, hence no series yet. It returns the
// offsets the consumer passed over, [from, from+n), when the fetch's
// first record is past the one expected: franz-go restarts a consumer
// whose offset the log no longer holds at the log's start.
func (l *consumerLag) fetched(fp kgo.FetchTopicPartition) (from, n int64) {
	if l == nil || fp.Err != nil {
		return 0, 0
	}
	l.mu.Lock()
	p := l.partition(fp.Partition)
	if k := len(fp.Records); k > 0 {
		if first := fp.Records[0].Offset; p.want >= 0 && first > p.want {
			from, n = p.want, first-p.want
		}
		p.next = fp.Records[k-1].Offset + 1
		p.want = p.next
	}
	if p.next >= 0 {
		p.lag = max(fp.HighWatermark-p.next, 0)
	}
	l.mu.Unlock()
	return from, n
}

// at takes the position of a local consumer (feed.go), which is at the
// log's end once it has handed out a record: its lag is 0.
func (l *consumerLag) at(partition int32, next int64) {
	if l == nil {
		return
	}
	l.mu.Lock()
	p := l.partition(partition)
	p.next, p.lag, p.want = next, 0, next
	l.mu.Unlock()
}

// partition returns partition's entry, adding it; l.mu is held.
func (l *consumerLag) partition(partition int32) *partitionLag {
	if p := l.parts[partition]; p != nil {
		return p
	}
	attrs := []attribute.KeyValue{attribute.String("topic", l.topic), attribute.Int("partition", int(partition))}
	if l.group != "" {
		attrs = append(attrs, attribute.String("group", l.group))
	}
	p := &partitionLag{next: -1, want: -1, opt: metric.WithAttributeSet(attribute.NewSet(attrs...))}
	l.parts[partition] = p
	return p
}

// revoke drops the series of partitions taken away from the consumer.
func (l *consumerLag) revoke(partitions []int32) {
	if l == nil {
		return
	}
	l.mu.Lock()
	for _, p := range partitions {
		delete(l.parts, p)
	}
	l.mu.Unlock()
}

// observeLag observes the lag of every partition of every consumer whose
// next offset is known.
func (m *clientMetrics) observeLag(o metric.Observer, lag metric.Int64ObservableGauge) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for l := range m.consumers {
		l.mu.Lock()
		for _, p := range l.parts {
			if p.next >= 0 {
				o.ObserveInt64(lag, p.lag, p.opt)
			}
		}
		l.mu.Unlock()
	}
}

// close unregisters the lag callback.
func (m *clientMetrics) close() {
	if m != nil && m.reg != nil {
		_ = m.reg.Unregister()
	}
}

// ConsumerLag is the lag of a client's consumers of one topic in one
// group ("" for a consumer of assigned partitions): the records not
// consumed yet, summed over the partitions whose next offset is known.
type ConsumerLag struct {
	Topic, Group string
	Partitions   int
	Lag          int64
}

// Lags returns the lag of every consumer the client runs, by topic and
// group, sorted; what the shoal.kafka.consumer.lag series hold, summed
// over partitions (the admin API's /v1/stats, the console's overview).
func (c *Client) Lags() []ConsumerLag {
	m := c.met
	if m == nil {
		return nil
	}
	sums := make(map[[2]string]*ConsumerLag)
	m.mu.Lock()
	for l := range m.consumers {
		l.mu.Lock()
		for _, p := range l.parts {
			if p.next < 0 {
				continue
			}
			k := [2]string{l.topic, l.group}
			s := sums[k]
			if s == nil {
				s = &ConsumerLag{Topic: l.topic, Group: l.group}
				sums[k] = s
			}
			s.Partitions++
			s.Lag += p.lag
		}
		l.mu.Unlock()
	}
	m.mu.Unlock()
	out := make([]ConsumerLag, 0, len(sums))
	for _, s := range sums {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b ConsumerLag) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Group, b.Group))
	})
	return out
}
