package sessionsvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// maxBackoffFactor caps the retry backoff at this multiple of
// Config.RetryBackoff.
const maxBackoffFactor = 32

// Service is the session service: it consumes shoal.sessions and answers
// connects, takes sessions over and ends them (see the package
// documentation). Create it with New and run it with Run.
type Service struct {
	cfg    Config
	client *kafka.Client
	log    *slog.Logger
	store  Store
	m      *machine
	// sessionsPartitions is the partition count of shoal.sessions.
	sessionsPartitions int32

	ready    atomic.Bool
	progress atomic.Bool // a batch succeeded since the last failure

	mu    sync.Mutex
	parts []*partition // the loaded partitions, by number; nil while (re)loading
}

// New returns a session service that reads shoal.sessions through client
// and keeps its state in store. clock gives the time of produced events and
// of the sessions' connect and disconnect; nil means time.Now. The client's
// catalogue must have the four topics (EnsureTopics creates them).
func New(cfg Config, client *kafka.Client, store Store, log *slog.Logger, clock func() time.Time) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("new session service: %w", err)
	}
	switch {
	case client == nil:
		return nil, errors.New("new session service: nil kafka client")
	case store == nil:
		return nil, errors.New("new session service: nil store")
	case log == nil:
		return nil, errors.New("new session service: nil logger")
	}
	if clock == nil {
		clock = time.Now
	}
	counts := make(map[string]int32, 4)
	for _, topic := range []string{kafka.TopicSessions, kafka.TopicMessages, kafka.TopicDeliveries, kafka.TopicPresence} {
		n := client.Partitions(topic)
		if n < 1 {
			return nil, fmt.Errorf("new session service: topic %s is not in the kafka catalogue", topic)
		}
		counts[topic] = n
	}
	epoch := rand.Uint64()
	for epoch == 0 {
		epoch = rand.Uint64()
	}
	log = log.With("role", "session")
	return &Service{
		cfg:                cfg,
		client:             client,
		log:                log,
		store:              store,
		sessionsPartitions: counts[kafka.TopicSessions],
		m: &machine{
			messagesPartitions:   counts[kafka.TopicMessages],
			deliveriesPartitions: counts[kafka.TopicDeliveries],
			epoch:                epoch,
			seq:                  new(atomic.Uint64),
			now:                  clock,
			log:                  log,
			maxInbox:             cfg.MaxInbox,
			inboxDropped:         new(atomic.Int64),
			gatewayTimeout:       cfg.GatewayTimeout,
		},
	}, nil
}

// InboxDropped is the number of messages dropped since start because a
// session's inbox was full (session.max_inbox).
func (s *Service) InboxDropped() int64 { return s.m.inboxDropped.Load() }

// Ready reports whether the service has loaded its state and is consuming.
func (s *Service) Ready() bool { return s.ready.Load() }

// Run loads the state of every partition of shoal.sessions from the store
// and consumes them from the stored offsets until ctx is done, then returns
// nil. When a batch fails (a produce or store error) it logs the error,
// waits (Config.RetryBackoff, doubling while failures repeat), reloads the
// state from the store and consumes again: outputs of the failed batch may
// be produced twice, state changes are never half-applied.
func (s *Service) Run(ctx context.Context) error {
	ticks := make(chan struct{})
	go func() { defer close(ticks); s.tickLoop(ctx) }()
	defer func() { <-ticks }()
	backoff := s.cfg.RetryBackoff
	for ctx.Err() == nil {
		s.failed(ctx, s.runOnce(ctx), &backoff)
	}
	return nil
}

// tickLoop writes a SessionTick to every partition the service owns each
// Config.ExpiryCheck: the partitions' clock for session expiry, on the log
// so that a replay takes the same decisions.
func (s *Service) tickLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.ExpiryCheck)
	defer t.Stop()
	key := []byte("\x00tick") // no tenant/client key starts with NUL
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !s.Ready() {
			continue
		}
		now := s.m.now()
		rs := make([]*kafka.Record, 0, s.sessionsPartitions)
		for p := range s.sessionsPartitions {
			rs = append(rs, kafka.NewRecord(kafka.TopicSessions, key, p, &eventspb.Envelope{
				TimestampUs: now.UnixMicro(),
				Event:       &eventspb.Envelope_SessionTick{SessionTick: &eventspb.SessionTick{}},
			}))
		}
		if err := s.client.ProduceSync(ctx, rs...); err != nil && ctx.Err() == nil {
			s.log.Warn("write session ticks", "err", err)
		}
	}
}

// failed handles the end of runOnce before ctx is done: it logs err and
// waits *backoff (or until ctx is done), then doubles *backoff up to its
// cap; a batch that succeeded since the last failure resets it first.
func (s *Service) failed(ctx context.Context, err error, backoff *time.Duration) {
	s.ready.Store(false)
	if ctx.Err() != nil {
		return // stopped: whatever failed, failed because of it
	}
	if s.progress.Swap(false) {
		*backoff = s.cfg.RetryBackoff
	}
	if err == nil {
		err = errors.New("consumer stopped")
	}
	s.log.Error("session service failed; reloading its state and consuming again", "err", err, "backoff", *backoff)
	t := time.NewTimer(*backoff)
	select {
	case <-ctx.Done():
		t.Stop()
	case <-t.C:
	}
	*backoff = min(*backoff*2, maxBackoffFactor*s.cfg.RetryBackoff)
}

// runOnce loads every partition and consumes them by explicit assignment.
// Group mode (Config.Group) would load a partition in OnAssigned and drop it
// in OnRevoked instead; the per-partition state already allows it.
func (s *Service) runOnce(ctx context.Context) error {
	s.setParts(nil)
	parts := make([]*partition, s.sessionsPartitions)
	ids := make([]int32, s.sessionsPartitions)
	for i := range parts {
		id := int32(i)
		p, err := loadPartition(ctx, id, s.m, s.store)
		if err != nil {
			return err
		}
		parts[i], ids[i] = p, id
	}
	s.setParts(parts)
	s.log.Info("session state loaded", "partitions", len(parts), "sessions", s.sessionCount())

	err := s.client.Consume(ctx, kafka.ConsumeConfig{
		Topic:      kafka.TopicSessions,
		Partitions: ids,
		Start: func(p int32) int64 {
			if off := parts[p].nextOffset(); off > 0 {
				return off
			}
			return kafka.StartAtBeginning
		},
		OnAssigned: func(context.Context, []int32) { s.ready.Store(true) },
	}, func(ctx context.Context, b kafka.Batch) error {
		if b.Partition < 0 || int(b.Partition) >= len(parts) {
			return fmt.Errorf("batch of unknown partition %d", b.Partition)
		}
		if err := s.handle(ctx, parts[b.Partition], b); err != nil {
			return err
		}
		s.progress.Store(true)
		return nil
	})
	return err // Consume's errors name the topic, partition and offset
}

// handle decodes a batch and processes it.
func (s *Service) handle(ctx context.Context, p *partition, b kafka.Batch) error {
	recs := make([]record, len(b.Records))
	for i, r := range b.Records {
		recs[i].offset = r.Offset
		// Decoded with copies, not kafka.DecodeEnvelope's aliasing: the
		// sessions keep strings of these records for as long as they live,
		// which must not pin whole fetch responses.
		env := new(eventspb.Envelope)
		if err := env.UnmarshalVT(r.Value); err != nil {
			s.log.Warn("undecodable record skipped", "topic", r.Topic, "partition", r.Partition,
				"offset", r.Offset, "err", err)
			continue
		}
		recs[i].env = env
	}
	return p.process(ctx, recs, s.write)
}

// write produces outs and waits until Kafka has them all (acks=all).
func (s *Service) write(ctx context.Context, outs []output) error {
	rs := make([]*kafka.Record, len(outs))
	for i, o := range outs {
		rs[i] = s.record(o)
	}
	return s.client.ProduceSync(ctx, rs...)
}

// record turns an output into a Kafka record.
func (s *Service) record(o output) *kafka.Record {
	switch o.dest {
	case toDeliveries:
		return kafka.NewRecord(kafka.TopicDeliveries, o.key, o.partition, o.env)
	case toPresence:
		return kafka.NewRecord(kafka.TopicPresence, o.key, kafka.PartitionByKey, o.env)
	default: // toMessages: o.partition is a partition (broadcast) or byKey
		p := o.partition
		if p == byKey {
			p = kafka.PartitionByKey
		}
		return kafka.NewRecord(kafka.TopicMessages, o.key, p, o.env)
	}
}

// Snapshot returns a copy of the committed session of a client, and whether
// there is one (a client that was ever seen keeps a record, Active or not).
func (s *Service) Snapshot(tenant, clientID string) (*Session, bool) {
	k := clientKey{tenant, clientID}
	p := kafka.PartitionForKey(k.recordKey(), s.sessionsPartitions)
	s.mu.Lock()
	parts := s.parts
	s.mu.Unlock()
	if int(p) >= len(parts) {
		return nil, false
	}
	return parts[p].snapshot(k)
}

func (s *Service) setParts(parts []*partition) {
	s.mu.Lock()
	s.parts = parts
	s.mu.Unlock()
}

func (s *Service) sessionCount() int {
	s.mu.Lock()
	parts := s.parts
	s.mu.Unlock()
	n := 0
	for _, p := range parts {
		p.mu.Lock()
		n += len(p.sessions)
		p.mu.Unlock()
	}
	return n
}
