package routersvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoal-mqtt/shoal/internal/obs"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
	"go.opentelemetry.io/otel/trace"
)

// Router is the router role: it owns shards of shoal.messages (explicitly
// or through a consumer group), applies their records, produces the
// deliveries to shoal.deliveries and, once they are durable, stores the
// shards' mutations and offsets; alongside it reads shoal.presence into
// its Presence.
type Router struct {
	cfg      Config
	client   *kafka.Client
	store    Store
	log      *slog.Logger
	clock    func() time.Time
	presence *Presence

	topics kafka.Catalogue // the client's: names and partition counts
	// tel is what the router reports through (WithTelemetry).
	tel obs.Providers
	met *routerMetrics // its instruments (metrics.go); nil: none
	// retainedQuota bounds the tenants' retained messages in every shard
	// (quota.go); nil: no bound. Set before Run.
	retainedQuota *RetainedQuota
	// handoff is the gateway of the process (WithHandoff);
	// nil: none.
	handoff Handoff
	// express is the client the express path produces through
	// (WithExpress, express.go); nil: no express path.
	express *kafka.Client
	// producer is the client every record the router makes is produced
	// through: client, or express when there is an express path.
	producer *kafka.Client

	mu     sync.Mutex
	shards map[int32]*Shard // owned now; guarded by mu

	shardsReady   atomic.Bool
	presenceReady atomic.Bool
	presenceRead  chan struct{} // closed when presenceReady becomes true
	// presenceNext is the next offset of each shoal.presence partition
	// the presence consumer will read: every record below it is in
	// r.presence. watchPresence compares it with the end offsets.
	presenceNext []atomic.Int64

	// The pipeline from the messages handler to the committer (see
	// handleMessages): polls in order, at most cfg.MaxPollsInFlight.
	work          chan *pollWork
	slots         chan struct{} // a token per poll in flight
	committerDone chan struct{} // closed when the committer has stopped
	commitErr     error         // why it stopped; read after committerDone

	pool  kafka.RecordPool // produced records, recycled once acknowledged
	works sync.Pool        // of *pollWork, recycled by the committer

	outMu sync.Mutex
	outs  []*Output // free, for the handler; the committer returns them

	// Used by the messages handler only (Consume calls it one at a time).
	dec kafka.PublishDecoder

	// Used by the committer only.
	unstored map[int32]int64     // offsets applied but not stored yet
	storedAt map[int32]time.Time // when each shard's offset was last stored

	// Used by the presence handler only.
	penv *eventspb.Envelope
}

// New returns a router. client is the process's Kafka client (its
// catalogue names the topics), store the view store, clock the clock used
// for message expiry and timestamps.
func New(cfg Config, client *kafka.Client, store Store, log *slog.Logger, clock func() time.Time, opts ...Option) (*Router, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("router config: %w", err)
	}
	if client == nil || store == nil || log == nil || clock == nil {
		return nil, errors.New("router: client, store, log and clock are required")
	}
	cat := client.Catalogue()
	r := &Router{
		tel:           obs.Providers{}.WithDefaults(),
		cfg:           cfg,
		client:        client,
		producer:      client,
		store:         store,
		log:           log.With("role", "router"),
		clock:         clock,
		presence:      NewPresence(),
		topics:        cat,
		shards:        make(map[int32]*Shard),
		presenceRead:  make(chan struct{}),
		presenceNext:  make([]atomic.Int64, cat.Presence.Partitions),
		work:          make(chan *pollWork, cfg.MaxPollsInFlight+1),
		slots:         make(chan struct{}, cfg.MaxPollsInFlight),
		committerDone: make(chan struct{}),
		unstored:      make(map[int32]int64),
		storedAt:      make(map[int32]time.Time),
		penv:          &eventspb.Envelope{},
	}
	if cfg.Group == "" {
		n := cat.Messages.Partitions
		if len(r.cfg.Partitions) == 0 {
			for p := range n {
				r.cfg.Partitions = append(r.cfg.Partitions, p)
			}
		}
		for i, p := range r.cfg.Partitions {
			if p >= n {
				return nil, fmt.Errorf("router config: router.partitions[%d]: %s has partitions [0, %d), not %d", i, cat.Messages.Name, n, p)
			}
		}
	}
	for _, o := range opts {
		o(r)
	}
	return r, nil
}

// Presence returns the router's presence view.
func (r *Router) Presence() *Presence { return r.presence }

// Ready reports whether the router serves: its shards are loaded and
// shoal.presence has been read at start (see Config.PresenceTimeout).
func (r *Router) Ready() bool {
	return r.shardsReady.Load() && r.presenceReady.Load()
}

// shard returns the shard of partition while this router owns it.
func (r *Router) shard(partition int32) *Shard {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.shards[partition]
}

// Run consumes until ctx is done (then it returns nil) or a consumer fails.
// It is called once.
func (r *Router) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 3)
	go func() { errc <- r.runPresence(ctx) }()
	go func() { errc <- r.watchPresence(ctx) }()
	go func() { errc <- r.runMessages(ctx) }()
	var errs []error
	for range 3 {
		if err := <-errc; err != nil {
			errs = append(errs, err)
			cancel()
		}
	}
	return errors.Join(errs...)
}

// runMessages consumes shoal.messages: explicitly assigned partitions,
// loaded before consuming, or a consumer group's, loaded as assigned.
// Consuming starts once presence is read, so that the first deliveries
// already go where the clients are.
func (r *Router) runMessages(ctx context.Context) error {
	cc := kafka.ConsumeConfig{
		Topic: r.topics.Messages.Name,
		Group: r.cfg.Group,
		Start: r.start,
		Reuse: true, // apply keeps no record, only bytes they refer to
		// In shoal all the gateway's publishes come through the local
		// delivery path, without a fetch (explicit partitions only).
		Local: true,
		// What the express path routed is skipped without its bytes.
		SkipExpressed: true,
	}
	if r.cfg.Group == "" {
		if err := r.loadShards(ctx, r.cfg.Partitions, false); err != nil {
			if ctx.Err() != nil {
				return nil // stopping: the load failed because ctx ended
			}
			return fmt.Errorf("messages: %w", err)
		}
		cc.Partitions = r.cfg.Partitions
	} else {
		cc.OnAssigned = r.assigned
	}
	cc.OnRevoked = r.revoked
	// In group mode the group may assign nothing to this instance: it is
	// ready except while an assignment is being loaded.
	r.shardsReady.Store(true)
	select {
	case <-ctx.Done():
		return nil
	case <-r.presenceRead:
	}
	// The committer outlives ctx by up to drainTimeout, so that what was
	// applied before the stop is stored (OnRevoked waits for it).
	cctx, stopCommitter := context.WithCancel(context.WithoutCancel(ctx))
	defer stopCommitter()
	// A committer that fails stops consuming at once, not at the next
	// poll, which may never come.
	mctx, stopConsuming := context.WithCancel(ctx)
	defer stopConsuming()
	go func() {
		r.commitErr = r.commit(cctx)
		close(r.committerDone)
		stopConsuming()
	}()
	stopDrain := context.AfterFunc(ctx, func() { time.AfterFunc(drainTimeout, stopCommitter) })
	defer stopDrain()
	err := r.client.ConsumePolls(mctx, cc, r.handleMessages)
	close(r.work) // no more polls: the committer ends after the last
	<-r.committerDone
	if cerr := r.commitErr; cerr != nil && !errors.Is(cerr, context.Canceled) && !errors.Is(err, cerr) {
		err = errors.Join(err, cerr)
	}
	if err != nil {
		return fmt.Errorf("messages: %w", err)
	}
	return nil
}

// drainTimeout bounds how long a stopping router keeps producing and
// storing what it applied before the stop; what is left is replayed at the
// next start.
const drainTimeout = 5 * time.Second

// start is where consumption of partition starts: after the shard's
// offset.
func (r *Router) start(partition int32) int64 {
	s := r.shard(partition)
	if s == nil {
		return kafka.StartAtBeginning // handleMessages refuses it
	}
	return s.Offset() + 1
}

// load loads the shard of partition from the store and makes it owned.
func (r *Router) load(ctx context.Context, partition int32) error {
	began := time.Now()
	s, err := OpenShard(ctx, r.store, partition, r.presence, r.clock)
	if err != nil {
		return err
	}
	s.SetMaxTargets(r.cfg.MaxTargetsPerDelivery)
	s.SetSharedStrategy(r.cfg.SharedStrategy)
	s.SetRetainedQuota(r.retainedQuota)
	s.setMetrics(r.met)
	r.mu.Lock()
	r.shards[partition] = s
	r.mu.Unlock()
	r.log.Debug("shard loaded", "partition", partition, "offset", s.Offset(),
		"subscriptions", s.Subscriptions(), "retained", s.RetainedCount(), "took", time.Since(began).Round(time.Millisecond))
	return nil
}

// shardLoaders bounds the shards loaded at once. A partition routes
// nothing until its shard is loaded, so a router that starts, or takes
// partitions over when another joins or leaves, pauses them for as long
// as their loads take; a load is mostly waiting on the store's reads, so
// several at once shorten the pause (docs/capacity.md, "Elasticity").
const shardLoaders = 4

// loadShards loads the shards of partitions, shardLoaders at a time. With
// retry each load retries a failing store until it answers or ctx ends;
// without, the loads' errors are returned.
func (r *Router) loadShards(ctx context.Context, partitions []int32, retry bool) error {
	sem := make(chan struct{}, shardLoaders)
	errs := make([]error, len(partitions))
	var wg sync.WaitGroup
	for i, p := range partitions {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			errs[i] = ctx.Err()
			continue
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			load := func() error { return r.load(ctx, p) }
			if retry {
				errs[i] = r.retry(ctx, "load shard", p, load)
			} else {
				errs[i] = load()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// assigned loads the shards of partitions given to this instance by the
// group, retrying a failing store until it answers or ctx ends.
func (r *Router) assigned(ctx context.Context, partitions []int32) {
	r.shardsReady.Store(false)
	if err := r.loadShards(ctx, partitions, true); err != nil {
		return // ctx ended; handleMessages refuses unloaded partitions
	}
	r.shardsReady.Store(true)
}

// revoked drops the shards of partitions taken away, once everything the
// handler applied before is durable and stored, with the partitions'
// newest offsets: the next owner starts where this one stopped, and no
// late write of this one can follow the next owner's. Only a committer
// that has stopped (a fatal error, or the drain at a stop ran out) leaves
// something unstored, which the next owner replays.
func (r *Router) revoked(_ context.Context, partitions []int32) {
	w := &pollWork{flush: partitions, flushed: make(chan struct{})}
	select {
	case r.work <- w:
		select {
		case <-w.flushed:
		case <-r.committerDone:
		}
	case <-r.committerDone:
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range partitions {
		r.met.addShard(r.shards[p], -1)
		delete(r.shards, p)
	}
	r.log.Info("shards revoked", "partitions", partitions)
}

// pollWork is what the handler hands the committer for one poll, or a
// flush request from revoked.
type pollWork struct {
	produced []*kafka.Pending // the poll's deliveries, a Pending per shard that made some
	recs     []*kafka.Record  // recycled once produced
	changed  []ShardMutations // shards whose state changed: stored at once
	outs     []*Output        // holding changed's mutations: recycled once stored
	moved    []shardOffset    // shards whose offset alone moved

	flush   []int32       // revoked partitions: store their offsets, forget them
	flushed chan struct{} // closed once flush is done
}

// shardOffset is the newest offset applied to a shard.
type shardOffset struct {
	partition int32
	offset    int64
}

// handleMessages applies a poll's batches (one per partition) to their
// shards, starts producing every delivery they made at once, and hands the
// poll to the committer, which waits until the deliveries are durable and
// then stores each changed shard's mutations and offset in one atomic
// write (all shards in one commit where the store can). The handler does
// not wait for either: it returns for the next poll while up to
// router.max_polls_in_flight polls are in flight, so a record waits for
// one produce round trip and no store write, and the consumer fetches
// while Kafka and the store work (franz-go buffers one fetch at a time:
// a handler that waited made every record wait for about two of its
// polls). Producing in poll order keeps the deliveries in order; storing
// in poll order keeps every stored state and offset behind the durable
// deliveries (ARCHITECTURE.md, invariant 3). A store write that fails is
// retried; a produce that fails for good stops the router (see commit).
func (r *Router) handleMessages(ctx context.Context, bs []kafka.Batch) error {
	select {
	case r.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-r.committerDone:
		return r.committerStopped()
	}
	w := r.takeWork()
	n := 0
	for _, b := range bs {
		n += len(b.Records)
	}
	handNow := n <= handoffMaxPoll
	for _, b := range bs {
		s := r.shard(b.Partition)
		if s == nil {
			<-r.slots
			return fmt.Errorf("partition %d is not loaded", b.Partition)
		}
		out := r.takeOutput()
		var moved bool
		// The shard's records are produced before its lock goes: the
		// express path (express.go) hands over and produces under the
		// same lock, so the slot gets every shard's records in the order
		// they were handed over, which the gateway's late records rely on.
		s.mu.Lock()
		from := len(w.recs)
		w.recs, moved = r.apply(s, out, b, w.recs, handNow)
		if len(w.recs) > from {
			p, err := r.producer.ProduceAll(ctx, w.recs[from:]...)
			if err != nil {
				s.mu.Unlock()
				<-r.slots
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return fmt.Errorf("produce deliveries: %w", err)
			}
			w.produced = append(w.produced, p)
		}
		s.mu.Unlock()
		switch {
		case out.Mutations.Len() > 0:
			w.changed = append(w.changed, ShardMutations{Partition: b.Partition, Mutations: &out.Mutations})
			w.outs = append(w.outs, out)
			continue
		case moved:
			w.moved = append(w.moved, shardOffset{b.Partition, s.Offset()})
		}
		r.putOutput(out)
	}
	if len(w.produced) == 0 && len(w.changed) == 0 && len(w.moved) == 0 {
		r.putWork(w)
		<-r.slots
		return nil
	}
	select {
	case r.work <- w: // room for every poll holding a slot and a flush
		return nil
	case <-r.committerDone:
		return r.committerStopped()
	}
}

// takeWork returns an empty pollWork.
func (r *Router) takeWork() *pollWork {
	if w, ok := r.works.Get().(*pollWork); ok {
		return w
	}
	return &pollWork{}
}

// putWork empties w, keeping its slices, for takeWork.
func (r *Router) putWork(w *pollWork) {
	clear(w.recs)
	clear(w.changed)
	clear(w.outs)
	clear(w.produced)
	*w = pollWork{produced: w.produced[:0], recs: w.recs[:0], changed: w.changed[:0], outs: w.outs[:0], moved: w.moved[:0]}
	r.works.Put(w)
}

// committerStopped is the handler's error once the committer has stopped.
func (r *Router) committerStopped() error {
	if r.commitErr != nil {
		return r.commitErr
	}
	return errors.New("router committer stopped")
}

// takeOutput returns an empty Output for one partition of a poll.
func (r *Router) takeOutput() *Output {
	r.outMu.Lock()
	defer r.outMu.Unlock()
	if n := len(r.outs); n > 0 {
		out := r.outs[n-1]
		r.outs[n-1] = nil
		r.outs = r.outs[:n-1]
		out.Reset()
		return out
	}
	return NewOutput()
}

// Trim lets go of the free Outputs, each of which keeps the envelopes and
// targets its largest recent polls needed, bounded by what the last ones
// used (keepFree): an idle router has no last polls, so what a burst grew
// would stay. The broker calls it once a burst is over
// (compose/broker/memory.go); the next polls start small ones. Safe at any
// time.
func (r *Router) Trim() {
	r.outMu.Lock()
	clear(r.outs)
	r.outs = nil
	r.outMu.Unlock()
}

// putOutput makes out available again; nothing may refer to its
// mutations any more (its deliveries are marshalled into records).
func (r *Router) putOutput(out *Output) {
	r.outMu.Lock()
	r.outs = append(r.outs, out)
	r.outMu.Unlock()
}

// commit handles the handler's polls in order until the work channel is
// closed (nil) or ctx ends (its error). A poll's deliveries are waited
// for, then its changed shards are stored, with the offsets due (the
// shards whose offset alone moved and has not been stored for
// router.offset_interval, this poll's or earlier ones'). A store write
// that fails is retried until it succeeds. A produce that fails stops the
// committer with the error, which stops the router: franz-go retries
// every retriable error without limit, so a failed record was refused for
// good (too large, not authorised, the topic is gone), and stopping
// leaves the shards' stored offsets before it, so a restart replays it.
func (r *Router) commit(ctx context.Context) error {
	for w := range r.work {
		if w.flushed != nil {
			err := r.flushOffsets(ctx, w.flush)
			close(w.flushed)
			if err != nil {
				return err
			}
			continue
		}
		err := r.commitPoll(ctx, w)
		<-r.slots
		if err != nil {
			return err
		}
		r.putWork(w)
	}
	return nil
}

func (r *Router) commitPoll(ctx context.Context, w *pollWork) error {
	for i, p := range w.produced {
		if err := p.Wait(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("produce deliveries: %w", err)
		}
		p.Release()
		w.produced[i] = nil
	}
	if len(w.produced) > 0 {
		for _, rec := range w.recs {
			r.pool.Put(rec)
		}
		w.produced = w.produced[:0]
	}
	writes := slices.Clip(w.changed) // appending must not write into w
	for _, m := range w.changed {
		delete(r.unstored, m.Partition) // its offset goes with its state
	}
	for _, m := range w.moved {
		r.unstored[m.partition] = m.offset
	}
	now := time.Now() // an operational timer, not the state's clock
	for p, off := range r.unstored {
		if now.Sub(r.storedAt[p]) >= r.cfg.OffsetInterval {
			writes = append(writes, ShardMutations{Partition: p, Mutations: &Mutations{Offset: off}})
		}
	}
	if len(writes) > 0 {
		if err := r.storeShards(ctx, writes); err != nil {
			return err
		}
		for _, m := range writes {
			r.storedAt[m.Partition] = now
			if off, ok := r.unstored[m.Partition]; ok && off <= m.Mutations.Offset {
				delete(r.unstored, m.Partition)
			}
		}
	}
	for _, out := range w.outs {
		r.putOutput(out)
	}
	return nil
}

// flushOffsets stores the unstored offsets of partitions and forgets the
// partitions (they are revoked).
func (r *Router) flushOffsets(ctx context.Context, partitions []int32) error {
	var writes []ShardMutations
	for _, p := range partitions {
		if off, ok := r.unstored[p]; ok {
			writes = append(writes, ShardMutations{Partition: p, Mutations: &Mutations{Offset: off}})
		}
		delete(r.unstored, p)
		delete(r.storedAt, p)
	}
	if len(writes) == 0 {
		return nil
	}
	return r.storeShards(ctx, writes)
}

// storeShards writes ms, retrying until it succeeds or ctx ends.
func (r *Router) storeShards(ctx context.Context, ms []ShardMutations) error {
	return r.retry(ctx, "store shards", ms[0].Partition, func() error {
		if sa, ok := r.store.(ShardsApplier); ok {
			return sa.ApplyShards(ctx, ms)
		}
		for _, w := range ms {
			if err := r.store.ApplyShard(ctx, w.Partition, w.Mutations); err != nil {
				return err
			}
		}
		return nil
	})
}

// apply applies b to s, collecting the shard's deliveries and mutations in
// out, and appends the records to produce to recs. It reports whether the
// shard's offset moved.
func (r *Router) apply(s *Shard, out *Output, b kafka.Batch, recs []*kafka.Record, handNow bool) ([]*kafka.Record, bool) {
	s.ExpireRetained(out)
	before := s.Offset()
	for _, rec := range b.Records {
		if rec.Offset <= s.Offset() {
			continue // applied before a restart or a reassignment
		}
		if rec.Expressed() {
			s.Skip(rec.Offset, out) // routed before it was produced (express.go)
			continue
		}
		first := len(out.Deliveries)
		env, err := r.dec.Decode(rec)
		if err != nil {
			r.log.WarnContext(recordContext(rec), "skipping undecodable record", "partition", b.Partition, "offset", rec.Offset, "err", err)
			s.Skip(rec.Offset, out)
			continue
		}
		var sctx context.Context
		var span trace.Span
		if r.tel.Tracing {
			sctx, span = r.routeSpan(rec, env)
		}
		if err := s.Apply(env, rec.Offset, out); err != nil {
			r.log.WarnContext(recordContext(rec), "skipping record", "partition", b.Partition, "offset", rec.Offset, "err", err)
		}
		// Marshal now: the deliveries refer to env, which the next
		// record reuses. Each record continues the publish's trace.
		out.SetSource(first, b.Partition, rec.Offset)
		parent := rec.Header(kafka.HeaderTraceparent)
		from := len(recs)
		recs = r.deliveryRecords(rec, out.Deliveries[first:], recs, handNow)
		if parent != nil {
			for _, out := range recs[from:] {
				out.AddTraceChild(parent)
			}
		}
		if span != nil {
			endRouteSpan(sctx, span, out.Deliveries[first:], recs[from:])
		}
		r.met.routed(s, len(recs)-from)
	}
	return recs, s.Offset() != before
}

// deliveryRecords appends to recs the records of ds, the deliveries made
// for src, a record of shoal.messages: delivery records for slots, each
// handed to the process's gateway first (handNow: to be written at once),
// and InboxAppend records for the QoS 1/2 targets of persistent sessions.
func (r *Router) deliveryRecords(src *kafka.Record, ds []Delivery, recs []*kafka.Record, handNow bool) []*kafka.Record {
	for _, d := range ds {
		if d.Inbox {
			// QoS 1/2 targets to their sessions' inboxes; the QoS 0
			// targets stay in the delivery.
			recs = appendInbox(recs, r.topics.Sessions.Name, d.Envelope)
			if d.Slot == InboxSlot || len(d.Envelope.GetDelivery().GetTargets()) == 0 {
				continue
			}
		}
		if d.Slot < 0 || d.Slot >= r.topics.Deliveries.Partitions {
			r.log.WarnContext(recordContext(src), "dropping delivery to a slot outside shoal.deliveries", "partition", src.Partition, "offset", src.Offset, "slot", d.Slot, "slots", r.topics.Deliveries.Partitions)
			continue
		}
		rec := r.pool.Get()
		rec.Fill(r.topics.Deliveries.Name, nil, d.Slot, d.Envelope)
		r.handOff(rec, handNow)
		recs = append(recs, rec)
	}
	return recs
}

// retry calls f until it succeeds, backing off between attempts, or ctx
// ends (then it returns ctx's error).
func (r *Router) retry(ctx context.Context, what string, partition int32, f func() error) error {
	backoff := r.cfg.RetryBackoff
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil {
			return nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		r.log.ErrorContext(ctx, what+" failed, retrying", "partition", partition, "attempt", attempt, "retry_in", backoff, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, r.cfg.MaxRetryBackoff)
	}
}

// appendInbox appends one InboxAppend record to the sessions topic per QoS
// 1/2 target of an Inbox delivery and leaves the delivery with its QoS 0
// targets (which are not queued for offline sessions).
func appendInbox(recs []*kafka.Record, sessions string, env *eventspb.Envelope) []*kafka.Record {
	d := env.GetDelivery()
	kept := d.Targets[:0]
	for _, t := range d.GetTargets() {
		if t.GetQos() == 0 {
			kept = append(kept, t)
			continue
		}
		recs = append(recs, kafka.NewRecord(sessions, kafka.Key(env.Tenant, t.ClientId), kafka.PartitionByKey, &eventspb.Envelope{
			Tenant:      env.Tenant,
			ClientId:    t.ClientId,
			TimestampUs: env.TimestampUs,
			MessageId:   env.MessageId,
			Event: &eventspb.Envelope_InboxAppend{InboxAppend: &eventspb.InboxAppend{
				Message: d.Message,
				Target: &eventspb.Target{Qos: t.Qos, Retain: t.Retain, SubscriptionIds: t.SubscriptionIds,
					Dup: t.Dup, ShareGroup: t.ShareGroup, ShareFilter: t.ShareFilter},
				Source:      d.Source,
				PublishedUs: d.PublishedUs,
			}},
		}))
	}
	clear(d.Targets[len(kept):])
	d.Targets = kept
	return recs
}
