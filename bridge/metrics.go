package bridge

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/shoal-mqtt/shoal/internal/obs"
)

// The bridge's instruments: records and bytes bridged per mapping and
// direction, records skipped and failures by cause. Made once by New.

// Causes of a skipped record or a failure (the cause attribute).
const (
	causeDecode      = "decode"        // a record of the log that does not decode
	causeRepeat      = "repeat"        // a QoS 2 message its client sent again
	causeBadTopic    = "invalid_topic" // the template rendered no valid topic name
	causeLoop        = "loop"          // a message an in mapping published, back to its topic
	causeCreateTopic = "create_topic"  // a target topic could not be made (retried)
	causeDenied      = "denied"        // the ACL denies an in mapping's topic
	causeHeader      = "header"        // a record header that does not parse (the rest is published)
	causeTooLarge    = "too_large"     // a record larger than shoal.messages takes
)

type metrics struct {
	// lag is what each mapping has yet to read, by mapping and direction
	// (lag.go), observed by the shoal.bridge.lag gauge.
	lagMu sync.Mutex
	lag   map[[2]string]int64

	records metric.Int64Counter
	bytes   metric.Int64Counter
	skips   metric.Int64Counter
	errs    metric.Int64Counter

	// warned is when each mapping last logged a warning (warnEvery).
	mu     sync.Mutex
	warned map[string]time.Time
}

func newMetrics(p obs.Providers) (*metrics, error) {
	m := p.Meter.Meter(obs.Scope)
	met := &metrics{warned: make(map[string]time.Time), lag: make(map[[2]string]int64)}
	var errs [6]error
	met.records, errs[0] = m.Int64Counter("shoal.bridge.records", metric.WithUnit("{record}"),
		metric.WithDescription("Records the Kafka bridge wrote, per mapping and direction (out: MQTT to Kafka; in: Kafka to MQTT)."))
	met.bytes, errs[1] = m.Int64Counter("shoal.bridge.bytes", metric.WithUnit("By"),
		metric.WithDescription("Payload bytes the Kafka bridge wrote, per mapping and direction."))
	met.skips, errs[2] = m.Int64Counter("shoal.bridge.skipped", metric.WithUnit("{record}"),
		metric.WithDescription("Messages or records the Kafka bridge did not bridge, per mapping and cause (repeat, invalid_topic, loop)."))
	met.errs, errs[3] = m.Int64Counter("shoal.bridge.errors", metric.WithUnit("{error}"),
		metric.WithDescription("Failures of the Kafka bridge, per mapping and cause (decode, create_topic); the records are bridged once the cause is gone, except decode."))
	var lag metric.Int64ObservableGauge
	lag, errs[4] = m.Int64ObservableGauge("shoal.bridge.lag", metric.WithUnit("{record}"),
		metric.WithDescription("Records a mapping has yet to read: of shoal.messages for the out mappings (one consumer group for all of them), of its Kafka topic for an in mapping; refreshed every few seconds."))
	if errs[4] == nil {
		_, errs[5] = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
			met.lagMu.Lock()
			defer met.lagMu.Unlock()
			for k, n := range met.lag {
				o.ObserveInt64(lag, n, metric.WithAttributeSet(attribute.NewSet(attribute.String("mapping", k[0]), attribute.String("direction", k[1]))))
			}
			return nil
		}, lag)
	}
	return met, errors.Join(errs[:]...)
}

// setLag records what mapping (of direction dir) has yet to read.
func (m *metrics) setLag(mapping, dir string, n int64) {
	m.lagMu.Lock()
	m.lag[[2]string{mapping, dir}] = n
	m.lagMu.Unlock()
}

// keepLag forgets the lag of the mappings m does not have (a reload
// removed them).
func (m *metrics) keepLag(ms *Mappings) {
	m.lagMu.Lock()
	defer m.lagMu.Unlock()
	for k := range m.lag {
		if (k[1] == "out" && !slices.ContainsFunc(ms.Out, func(o Out) bool { return o.Name == k[0] })) ||
			(k[1] == "in" && ms.inByName(k[0]) == nil) {
			delete(m.lag, k)
		}
	}
}

func attrs(mapping, dir string) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("mapping", mapping), attribute.String("direction", dir)))
}

// tally counts one poll's records and bytes per mapping: the counters
// are added to once per poll and mapping (flush), where an Add per record,
// with its attribute set, cost a quarter of the bridge's CPU.
type tally map[string][2]int64

func (t tally) add(mapping string, n int) {
	v := t[mapping]
	v[0]++
	v[1] += int64(n)
	t[mapping] = v
}

// flush adds t to the counters of direction dir and empties it.
func (m *metrics) flush(ctx context.Context, dir string, t tally) {
	for mapping, v := range t {
		a := attrs(mapping, dir)
		m.records.Add(ctx, v[0], a)
		m.bytes.Add(ctx, v[1], a)
	}
	clear(t)
}

func (m *metrics) skipped(ctx context.Context, mapping, cause string) {
	m.skips.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(attribute.String("mapping", mapping), attribute.String("cause", cause))))
}

func (m *metrics) failed(ctx context.Context, mapping, cause string) {
	m.errs.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(attribute.String("mapping", mapping), attribute.String("cause", cause))))
}

// warnInterval is how often one mapping logs a warning at most.
const warnInterval = time.Minute

// warnEvery logs a warning of mapping at most once per warnInterval.
func (b *Bridge) warnEvery(mapping, msg string, args ...any) {
	m := b.met
	now := b.clock()
	m.mu.Lock()
	last, ok := m.warned[mapping]
	if ok && now.Sub(last) < warnInterval {
		m.mu.Unlock()
		return
	}
	m.warned[mapping] = now
	m.mu.Unlock()
	b.log.Warn(msg, args...)
}
