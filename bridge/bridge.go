package bridge

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/shoal-mqtt/shoal/internal/obs"
	"github.com/shoal-mqtt/shoal/kafka"
)

// Options are what a Bridge needs besides its mappings and its Kafka.
type Options struct {
	// InstanceID names this bridge among the deployment's: its producer's
	// transactional id is derived from it, so that a restarted instance
	// fences the transaction its previous run left open at once (a new id
	// leaves it to the transaction timeout). Stable across restarts: the
	// pod's name in Kubernetes. Empty means "0" (shoal all, one instance).
	InstanceID string
	// Group is the out direction's consumer group; empty means
	// DefaultOutGroup.
	Group string
	// FreshProducers gives the transactional producers an id of their own
	// at every start (the instance's, and a random run id), for a Kafka
	// that does not end a crashed producer's transaction with a marker:
	// the embedded backbone, after a kill, aborts it without one, and
	// read_committed clients then skip that producer id's later records
	// until they see its abort marker, which never comes. On Kafka the id
	// stays the instance's, so that a restart fences at once.
	FreshProducers bool
	// Telemetry is where the bridge's instruments go (noop when empty).
	Telemetry obs.Providers
	// Authorizer applies the ACL to what the in mappings publish; nil
	// allows every topic of a mapping's tenant.
	Authorizer Authorizer
	// LagInterval is how often the mappings' lag is measured; 0 means
	// DefaultLagInterval.
	LagInterval time.Duration
	// Target is the client of the cluster of the mappings' Kafka topics
	// (bridges.kafka.brokers), nil for Shoal's own. On another cluster the
	// consumed offsets are kept beside the records, in OffsetsTopic
	// (kafka/across.go): the transactions stay exactly once.
	Target *kafka.Client
}

// OffsetsTopic keeps, on the cluster a direction writes to, the offsets it
// consumed on the other, when the mappings' topics are on a cluster of
// their own (Options.Target): compacted, in the transactions of the
// records they cover.
const OffsetsTopic = "shoal.bridge.offsets"

// DefaultOutGroup is the consumer group of the out direction: its
// instances share the partitions of shoal.messages.
const DefaultOutGroup = "shoal-bridge-out"

// StateTopic is the compacted topic of the out direction's state: the
// packet identifiers of QoS 2 messages of persistent sessions that it
// bridged and their clients have not released (state.go).
const StateTopic = "shoal.bridge"

// Bridge is the Kafka data bridge role: it writes the messages of its out
// mappings to Kafka topics, exactly once for read_committed consumers,
// and (in.go) publishes the records of its in mappings' topics. It is
// complete when New returns; Run runs it.
type Bridge struct {
	client   *kafka.Client
	log      *slog.Logger
	clock    func() time.Time
	opts     Options
	mappings atomic.Pointer[Mappings]
	met      *metrics
	tracer   trace.Tracer

	messages string // shoal.messages' name in the client's catalogue

	// epoch and seq make the ids of the messages the in mappings publish,
	// as a gateway's: epoch random per start.
	epoch uint64
	seq   atomic.Uint64

	// txnSuffix ends the transactional ids: the instance's, and
	// runSuffix, the run's with Options.FreshProducers.
	txnSuffix, runSuffix string

	// The out direction's handler state: touched only by it (Transact
	// never calls it concurrently), and by its callbacks.
	out outState

	// reloaded wakes Run when Reload stored new mappings; runners are
	// the directions Run runs (run.go), for Ready.
	reloaded chan struct{}
	runners  atomic.Pointer[[]*runner]

	// ensured holds the Kafka topics known to exist (EnsureTopic).
	ensureMu sync.Mutex
	ensured  map[string]bool
}

// New makes the bridge of mappings on client.
func New(m *Mappings, client *kafka.Client, log *slog.Logger, clock func() time.Time, opts Options) (*Bridge, error) {
	if m == nil {
		return nil, errors.New("new bridge: no mappings")
	}
	if opts.InstanceID == "" {
		opts.InstanceID = "0"
	}
	if opts.Group == "" {
		opts.Group = DefaultOutGroup
	}
	if opts.LagInterval <= 0 {
		opts.LagInterval = DefaultLagInterval
	}
	opts.Telemetry = opts.Telemetry.WithDefaults()
	met, err := newMetrics(opts.Telemetry)
	if err != nil {
		return nil, fmt.Errorf("new bridge: %w", err)
	}
	b := &Bridge{
		client: client, log: log.With("role", "bridge"), clock: clock, opts: opts, met: met,
		tracer:   opts.Telemetry.Tracer.Tracer(obs.Scope),
		messages: client.Catalogue().Messages.Name, ensured: make(map[string]bool),
		reloaded: make(chan struct{}, 1),
	}
	var e [8]byte
	if _, err := rand.Read(e[:]); err != nil {
		return nil, fmt.Errorf("new bridge: epoch: %w", err)
	}
	b.epoch = binary.BigEndian.Uint64(e[:])
	b.txnSuffix = opts.InstanceID
	if opts.FreshProducers {
		b.runSuffix = fmt.Sprintf("-%016x", b.epoch)
		b.txnSuffix += b.runSuffix
	}
	b.mappings.Store(m)
	b.out.init()
	return b, nil
}

// runOut runs the out direction until ctx ends; ready is called once its
// topics are there, before it joins its group.
func (b *Bridge) runOut(ctx context.Context, ready func()) error {
	specs := []kafka.TopicSpec{b.stateSpec()}
	if b.across() {
		specs = append(specs, b.offsetsSpec())
	}
	if err := b.users().EnsureSpecs(ctx, specs...); err != nil {
		return err
	}
	// The topics the out mappings name without placeholders must be
	// there: a cluster that cannot create them fails the start.
	for _, o := range b.mappings.Load().Out {
		if name, ok := o.KafkaTopic.Literal(); ok {
			if err := b.ensure(ctx, name); err != nil {
				return fmt.Errorf("out mapping %s: %w", o.Name, err)
			}
		}
	}
	ready()
	return b.client.Transact(ctx, b.transactConfig(kafka.TransactConfig{
		Topic: b.messages, Group: b.opts.Group,
		OnAssigned: b.assigned, OnRevoked: b.revoked, ManualTopics: []string{StateTopic},
	}, b.opts.Target), b.handleOut)
}

// transactConfig completes cfg with the transactional ids, the static
// membership, and the target (nil: the cluster read) and its offsets
// topic. On one cluster the producer's id is the instance's; across two,
// each partition's producer has the partition's (kafka/across.go), so the
// id is the group's.
func (b *Bridge) transactConfig(cfg kafka.TransactConfig, target *kafka.Client) kafka.TransactConfig {
	cfg.InstanceID = cfg.Group + "-" + b.opts.InstanceID
	cfg.TransactionalID = cfg.Group + "-" + b.txnSuffix
	if b.across() {
		cfg.TransactionalID = cfg.Group + b.runSuffix
		cfg.Target, cfg.OffsetsTopic, cfg.OffsetsPartitions = target, OffsetsTopic, b.offsetsSpec().Partitions
	}
	return cfg
}

// across reports whether the mappings' topics are on a cluster of their
// own.
func (b *Bridge) across() bool { return b.opts.Target != nil && b.opts.Target != b.client }

// users is the client of the mappings' Kafka topics.
func (b *Bridge) users() *kafka.Client {
	if b.across() {
		return b.opts.Target
	}
	return b.client
}

// offsetsSpec is OffsetsTopic's spec: as many partitions as
// shoal.messages, as replicated.
func (b *Bridge) offsetsSpec() kafka.TopicSpec {
	return kafka.OffsetsSpec(OffsetsTopic, b.client.Partitions(b.messages), b.client.Catalogue().Messages.Replication)
}

// stateSpec is StateTopic's spec: compacted, one partition per partition
// of shoal.messages (a record's partition is the one whose messages it
// is about), as replicated as shoal.messages.
func (b *Bridge) stateSpec() kafka.TopicSpec {
	msgs := b.client.Catalogue().Messages
	return kafka.TopicSpec{
		Name: StateTopic, Partitions: b.client.Partitions(b.messages), Replication: msgs.Replication,
		Compacted: true, MaxMessageBytes: msgs.MaxMessageBytes,
		Doc: "the Kafka bridge's unreleased QoS 2 packet identifiers, partition = the shoal.messages partition, compacted",
	}
}

// ensure makes sure the Kafka topic name exists, once per name.
func (b *Bridge) ensure(ctx context.Context, name string) error {
	b.ensureMu.Lock()
	ok := b.ensured[name]
	b.ensureMu.Unlock()
	if ok {
		return nil
	}
	if err := b.users().EnsureTopic(ctx, name); err != nil {
		return err
	}
	b.ensureMu.Lock()
	b.ensured[name] = true
	b.ensureMu.Unlock()
	return nil
}
