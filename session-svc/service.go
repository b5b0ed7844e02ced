package sessionsvc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoal-mqtt/shoal/internal/obs"
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
	// topics is the client's catalogue: the names and partition counts of
	// the topics the service reads and writes.
	topics kafka.Catalogue
	// tel is what the service reports through (WithTelemetry).
	tel obs.Providers
	// sessionsPartitions is the partition count of shoal.sessions.
	sessionsPartitions int32

	ready    atomic.Bool
	progress atomic.Bool // a batch succeeded since the last failure

	mu    sync.Mutex
	parts []*partition // by partition number: nil while (re)loading or not owned

	// answers, when set (WithAnswers), is given each answer to a Connect
	// before it is produced.
	answers Answers

	// recs recycles the records write produces: a CONNECT's Presence and
	// answer were two new records of about 700 bytes each, a third of
	// the garbage a connect left in the service.
	recs kafka.RecordPool

	// wakeCh tells the tick loop that a partition's next wake-up may have
	// moved sooner (capacity 1: a signal pending is enough).
	wakeCh chan struct{}
}

// New returns a session service that reads shoal.sessions through client
// and keeps its state in store. clock gives the time of produced events and
// of the sessions' connect and disconnect; nil means time.Now. The client's
// catalogue names the topics and their partitions (EnsureTopics creates
// them).
func New(cfg Config, client *kafka.Client, store Store, log *slog.Logger, clock func() time.Time, opts ...Option) (*Service, error) {
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
	topics := client.Catalogue()
	epoch := rand.Uint64()
	for epoch == 0 {
		epoch = rand.Uint64()
	}
	log = log.With("role", "session")
	s := &Service{
		tel:                obs.Providers{}.WithDefaults(),
		wakeCh:             make(chan struct{}, 1),
		cfg:                cfg,
		client:             client,
		log:                log,
		store:              store,
		topics:             topics,
		sessionsPartitions: topics.Sessions.Partitions,
		m:                  newMachine(cfg, topics, epoch, clock, log).withStore(cfg, store, topics.Sessions.Partitions),
	}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// withStore fits m to store: the ended sessions each partition keeps in
// memory (session.ended_cache, resolved for store, shared by the
// partitions parts), and, unless its reads are local, a filter of the
// clients stored.
func (m *machine) withStore(cfg Config, store Store, parts int32) *machine {
	if total := endedCache(cfg, store); total > 0 && parts > 0 {
		m.endedPerPartition = (total + int(parts) - 1) / int(parts)
	}
	m.filterIDs = !localReads(store)
	return m
}

// newMachine returns the machine of a service (or a Rebuild) configured
// by cfg on the topics of cat.
func newMachine(cfg Config, cat kafka.Catalogue, epoch uint64, clock func() time.Time, log *slog.Logger) *machine {
	return &machine{
		messagesPartitions:   cat.Messages.Partitions,
		deliveriesPartitions: cat.Deliveries.Partitions,
		epoch:                epoch,
		seq:                  new(atomic.Uint64),
		now:                  clock,
		log:                  log,
		maxInbox:             cfg.MaxInbox,
		inboxDropped:         new(atomic.Int64),
		gatewayTimeout:       cfg.GatewayTimeout,
	}
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

// wakeGap is the shortest time between two SessionTicks the service writes
// to one partition for its deadlines: each tick scans the partition's
// sessions, so deadlines close together share a tick (one due within
// wakeGap of the previous tick waits up to wakeGap), and a tick not yet
// consumed is written again at most this often.
const wakeGap = 100 * time.Millisecond

// tickLoop writes the SessionTicks, the partitions' clock for session
// expiry and will delay, on the log so that a replay takes the same
// decisions: to every partition the service owns each Config.ExpiryCheck
// (the gateways' liveness is judged at those), and to a partition as soon
// as its earliest pending deadline (partition.wakeUs: a delayed will due,
// a session expiring) has passed, so that a will is not published up to a
// period late (MQTT-3.1.3-9).
func (s *Service) tickLoop(ctx context.Context) {
	period := time.NewTicker(s.cfg.ExpiryCheck)
	defer period.Stop()
	wake := time.NewTimer(s.cfg.ExpiryCheck)
	wake.Stop()
	defer wake.Stop()
	lastUs := make(map[int32]int64) // the newest tick written to each partition
	for {
		every := false
		select {
		case <-ctx.Done():
			return
		case <-period.C:
			every = true
		case <-s.wakeCh:
		case <-wake.C:
		}
		if !s.Ready() {
			continue // becoming ready wakes the loop
		}
		now := s.m.now()
		plans := s.tickPlans(lastUs)
		due, _ := dueTicks(now.UnixMicro(), wakeGap.Microseconds(), plans)
		if every {
			due = due[:0]
			for _, pl := range plans {
				due = append(due, pl.id)
			}
		}
		s.writeTicks(ctx, due, now)
		for _, id := range due {
			lastUs[id] = now.UnixMicro()
		}
		// The write took a round trip: wait from the time it ended.
		now = s.m.now()
		switch due, nextUs := dueTicks(now.UnixMicro(), wakeGap.Microseconds(), s.tickPlans(lastUs)); {
		case len(due) > 0:
			wake.Reset(0)
		case nextUs != 0:
			wake.Reset(time.Duration(nextUs-now.UnixMicro()) * time.Microsecond)
		default:
			wake.Stop()
		}
	}
}

// tickPlan is what the tick loop knows of one owned partition.
type tickPlan struct {
	id     int32
	wakeUs int64 // partition.wakeUs: its earliest pending deadline, 0 none
	lastUs int64 // the newest tick written to it, 0 none
}

// tickPlans returns the tick plans of the partitions owned now.
func (s *Service) tickPlans(lastUs map[int32]int64) []tickPlan {
	s.mu.Lock()
	parts := slices.Clone(s.parts)
	s.mu.Unlock()
	var plans []tickPlan
	for id, p := range parts {
		if p != nil {
			plans = append(plans, tickPlan{id: int32(id), wakeUs: p.wakeAt(), lastUs: lastUs[int32(id)]})
		}
	}
	return plans
}

// dueTicks returns the partitions a tick is due for at nowUs, and when
// (unix microseconds) the next partition comes due, 0 when none has a
// deadline pending. A partition is due at its deadline, or gapUs after
// the newest tick written to it when that is later.
func dueTicks(nowUs, gapUs int64, plans []tickPlan) (due []int32, nextUs int64) {
	for _, pl := range plans {
		if pl.wakeUs == 0 {
			continue
		}
		at := pl.wakeUs
		if pl.lastUs != 0 {
			at = max(at, pl.lastUs+gapUs)
		}
		if at <= nowUs {
			due = append(due, pl.id)
		} else {
			nextUs = earliest(nextUs, at)
		}
	}
	return due, nextUs
}

// writeTicks writes a SessionTick stamped now to each of the partitions.
func (s *Service) writeTicks(ctx context.Context, ids []int32, now time.Time) {
	if len(ids) == 0 {
		return
	}
	key := []byte("\x00tick") // no tenant/client key starts with NUL
	rs := make([]*kafka.Record, 0, len(ids))
	for _, id := range ids {
		rs = append(rs, kafka.NewRecord(s.topics.Sessions.Name, key, id, &eventspb.Envelope{
			TimestampUs: now.UnixMicro(),
			Event:       &eventspb.Envelope_SessionTick{SessionTick: &eventspb.SessionTick{}},
		}))
	}
	if err := s.client.ProduceSync(ctx, rs...); err != nil && ctx.Err() == nil {
		s.log.Warn("write session ticks", "partitions", len(ids), "err", err)
	}
}

// wake tells the tick loop that a partition's deadlines changed.
func (s *Service) wake() {
	select {
	case s.wakeCh <- struct{}{}:
	default:
	}
}

// setReady marks the service ready and has the tick loop look at the
// deadlines of the partitions it loaded.
func (s *Service) setReady() {
	s.ready.Store(true)
	s.wake()
}

// loadPart loads partition id from the store; it wakes the tick loop
// when a commit brings its next deadline forward.
func (s *Service) loadPart(ctx context.Context, id int32) (*partition, error) {
	p, err := loadPartition(ctx, id, s.m, s.store)
	if err != nil {
		return nil, err
	}
	p.onWake = s.wake
	return p, nil
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
	s.log.ErrorContext(ctx, "session service failed; reloading its state and consuming again", "err", err, "backoff", *backoff)
	t := time.NewTimer(*backoff)
	select {
	case <-ctx.Done():
		t.Stop()
	case <-t.C:
	}
	*backoff = min(*backoff*2, maxBackoffFactor*s.cfg.RetryBackoff)
}

// runOnce consumes shoal.sessions once: by explicit assignment of every
// partition, each loaded first, or (Config.Group) as a member of a consumer
// group, loading each partition as it is assigned and dropping it when it
// is revoked.
func (s *Service) runOnce(ctx context.Context) error {
	s.setParts(make([]*partition, s.sessionsPartitions))
	cc := kafka.ConsumeConfig{
		Topic: s.topics.Sessions.Name,
		Group: s.cfg.Group,
		Start: func(id int32) int64 {
			if p := s.part(id); p != nil {
				if off := p.nextOffset(); off > 0 {
					return off
				}
			}
			return kafka.StartAtBeginning
		},
		// handle copies what it keeps (kafka.DecodeEnvelopeCopy) and
		// handlePoll waits for every partition before returning: no record
		// outlives a poll.
		Reuse: true,
		// In shoal all the gateway's session events come through the
		// local delivery path, without a fetch (explicit partitions only).
		Local: true,
	}
	if s.cfg.Group == "" {
		for id := range s.sessionsPartitions {
			p, err := s.loadPart(ctx, id)
			if err != nil {
				return err
			}
			s.setPart(id, p)
			cc.Partitions = append(cc.Partitions, id)
		}
		s.log.Info("session state loaded", "partitions", len(cc.Partitions), "sessions", s.sessionCount())
		cc.OnAssigned = func(context.Context, []int32) { s.setReady() }
	} else {
		cc.OnAssigned = func(ctx context.Context, ids []int32) {
			for _, id := range ids {
				p, err := s.loadPart(ctx, id)
				if err != nil {
					// Its batches fail the consumer, which reloads.
					s.log.Error("load assigned partition", "partition", id, "err", err)
					continue
				}
				s.setPart(id, p)
			}
			s.wake()
			s.log.Info("partitions assigned", "partitions", ids, "sessions", s.sessionCount())
		}
		cc.OnRevoked = func(_ context.Context, ids []int32) {
			for _, id := range ids {
				s.setPart(id, nil)
			}
			s.log.Info("partitions revoked", "partitions", ids)
		}
		// A member may be assigned nothing: it serves once it consumes.
		s.setReady()
	}
	err := s.client.ConsumePolls(ctx, cc, s.handlePoll)
	return err // the errors name the topic, partition and offset
}

// handlePoll processes a poll's batches, each partition on a goroutine of
// its own: partitions share no state, and each waits for its produce round
// trips and its store commit, which then overlap instead of adding up (a
// burst of connects spread over the partitions costs about one partition's
// time). It returns every partition's error, joined.
func (s *Service) handlePoll(ctx context.Context, bs []kafka.Batch) error {
	errs := make([]error, len(bs))
	var wg sync.WaitGroup
	for i, b := range bs {
		p := s.part(b.Partition)
		if p == nil {
			errs[i] = fmt.Errorf("batch of partition %d, which is not loaded", b.Partition)
			continue
		}
		run := func() {
			if err := s.handle(ctx, p, b); err != nil {
				errs[i] = fmt.Errorf("partition %d at offset %d: %w", b.Partition, b.Records[0].Offset, err)
			}
		}
		if len(bs) == 1 {
			run()
			break
		}
		wg.Go(run)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	s.progress.Store(true)
	return nil
}

// handle decodes a batch and processes it.
func (s *Service) handle(ctx context.Context, p *partition, b kafka.Batch) error {
	return p.process(ctx, decodeBatch(b, s.log), s.write)
}

// decodeBatch decodes a batch's records for partition.process.
func decodeBatch(b kafka.Batch, log *slog.Logger) []record {
	recs := make([]record, len(b.Records))
	for i, r := range b.Records {
		recs[i].offset = r.Offset
		// Decoded with copies, not kafka.DecodeEnvelope's aliasing: the
		// sessions keep strings of these records for as long as they live,
		// which must not pin whole fetch responses.
		env := new(eventspb.Envelope)
		if err := kafka.DecodeEnvelopeCopy(r, env); err != nil {
			log.WarnContext(traceContext(r.Header(kafka.HeaderTraceparent)), "undecodable record skipped", "topic", r.Topic, "partition", r.Partition,
				"offset", r.Offset, "err", err)
			continue
		}
		recs[i].env = env
		recs[i].trace = bytes.Clone(r.Header(kafka.HeaderTraceparent))
		recs[i].ctx = r.Context
	}
	return recs
}

// Answers takes the session service's answers to Connect requests before
// they are produced: in `shoal all`, the gateway of the process.
type Answers interface {
	// Answer is given the answer res to a Connect of the gateway on
	// slot, a copy it may keep, once everything the answer must follow
	// is durable: the takeover's kick and removals, then the presence.
	Answer(slot int32, res *eventspb.ConnectResult)
}

// write produces outs and waits until Kafka has them all (acks=all). The
// answers among them go to s.answers first: a batch writes its outputs
// stage by stage (partition.process), so when the answers' stage is
// written every output they follow is durable.
func (s *Service) write(ctx context.Context, outs []output) error {
	if s.answers != nil {
		for _, o := range outs {
			if res := o.env.GetConnectResult(); res != nil && o.stage == stageAnswer && o.dest == toDeliveries {
				s.answers.Answer(o.partition, res.CloneVT())
			}
		}
	}
	rs := make([]*kafka.Record, len(outs))
	for i, o := range outs {
		rs[i] = s.record(o)
	}
	if err := s.client.ProduceSync(ctx, rs...); err != nil {
		return err // some may be in flight still: let them go
	}
	for _, r := range rs {
		s.recs.Put(r)
	}
	return nil
}

// record turns an output into a Kafka record, continuing the trace of the
// record that caused it.
func (s *Service) record(o output) *kafka.Record {
	r := s.newRecord(o)
	if o.trace != nil {
		r.AddTraceChild(o.trace)
	}
	r.Context = o.ctx
	return r
}

func (s *Service) newRecord(o output) *kafka.Record {
	r := s.recs.Get()
	switch o.dest {
	case toDeliveries:
		r.Fill(s.topics.Deliveries.Name, o.key, o.partition, o.env)
	case toPresence:
		r.Fill(s.topics.Presence.Name, o.key, kafka.PartitionByKey, o.env)
		if o.env == nil {
			r.Value = nil // a tombstone (machine.presenceGone)
		}
	default: // toMessages: o.partition is a partition (broadcast) or byKey
		p := o.partition
		if p == byKey {
			p = kafka.PartitionByKey
		}
		r.Fill(s.topics.Messages.Name, o.key, p, o.env)
	}
	return r
}

// Snapshot returns a copy of the committed session of a client, and whether
// there is one (a client that was ever seen keeps a record, Active or not:
// a dormant one is read from the store).
func (s *Service) Snapshot(tenant, clientID string) (*Session, bool) {
	k := clientKey{tenant, clientID}
	p := kafka.PartitionForKey(k.recordKey(), s.sessionsPartitions)
	part := s.part(p)
	if part == nil {
		return nil, false
	}
	sess, ok, err := part.record(context.Background(), k)
	if err != nil {
		s.log.Warn("read of a dormant session failed", "partition", p, "tenant", tenant, "client", clientID, "err", err)
	}
	return sess, ok
}

func (s *Service) setParts(parts []*partition) {
	s.mu.Lock()
	s.parts = parts
	s.mu.Unlock()
}

func (s *Service) setPart(id int32, p *partition) {
	s.mu.Lock()
	if int(id) < len(s.parts) {
		s.parts[id] = p
	}
	s.mu.Unlock()
}

// part returns partition id's state while it is loaded and owned.
func (s *Service) part(id int32) *partition {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id < 0 || int(id) >= len(s.parts) {
		return nil
	}
	return s.parts[id]
}

func (s *Service) sessionCount() int {
	s.mu.Lock()
	parts := slices.Clone(s.parts)
	s.mu.Unlock()
	n := 0
	for _, p := range parts {
		if p == nil {
			continue
		}
		p.mu.Lock()
		n += len(p.sessions)
		p.mu.Unlock()
	}
	return n
}
