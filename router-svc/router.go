package routersvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
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

	messages, presenceTopic, deliveries string
	deliveryParts                       int32

	mu     sync.Mutex
	shards map[int32]*Shard // owned now; guarded by mu

	shardsReady   atomic.Bool
	presenceReady atomic.Bool
	presenceRead  chan struct{} // closed when presenceReady becomes true
	lastPresence  atomic.Int64  // time.Now().UnixNano() of the last presence batch

	// Used by the messages handler only (Consume calls it one at a time).
	outs   map[int32]*Output // per partition, reused from poll to poll
	env    *eventspb.Envelope
	recs   []*kafka.Record  // to produce for the poll
	pool   kafka.RecordPool // records of earlier polls, acknowledged
	writes []ShardMutations

	// Used by the presence handler only.
	penv *eventspb.Envelope
}

// New returns a router. client is the process's Kafka client (its
// catalogue names the topics), store the view store, clock the clock used
// for message expiry and timestamps.
func New(cfg Config, client *kafka.Client, store Store, log *slog.Logger, clock func() time.Time) (*Router, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("router config: %w", err)
	}
	if client == nil || store == nil || log == nil || clock == nil {
		return nil, errors.New("router: client, store, log and clock are required")
	}
	cat := client.Catalogue()
	r := &Router{
		cfg:           cfg,
		client:        client,
		store:         store,
		log:           log.With("role", "router"),
		clock:         clock,
		presence:      NewPresence(),
		messages:      cat.Messages.Name,
		presenceTopic: cat.Presence.Name,
		deliveries:    cat.Deliveries.Name,
		deliveryParts: cat.Deliveries.Partitions,
		shards:        make(map[int32]*Shard),
		presenceRead:  make(chan struct{}),
		outs:          make(map[int32]*Output),
		env:           &eventspb.Envelope{},
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
				return nil, fmt.Errorf("router config: router.partitions[%d]: %s has partitions [0, %d), not %d", i, r.messages, n, p)
			}
		}
	}
	return r, nil
}

// Presence returns the router's presence view.
func (r *Router) Presence() *Presence { return r.presence }

// Ready reports whether the router serves: its shards are loaded and
// shoal.presence has been read at start (see Config.PresenceQuiet).
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

// runPresence reads every partition of shoal.presence from the beginning
// into r.presence.
func (r *Router) runPresence(ctx context.Context) error {
	n := r.client.Partitions(r.presenceTopic)
	parts := make([]int32, n)
	for i := range parts {
		parts[i] = int32(i)
	}
	err := r.client.Consume(ctx, kafka.ConsumeConfig{Topic: r.presenceTopic, Partitions: parts}, r.handlePresence)
	if err != nil {
		return fmt.Errorf("presence: %w", err)
	}
	return nil
}

func (r *Router) handlePresence(_ context.Context, b kafka.Batch) error {
	for _, rec := range b.Records {
		if len(rec.Value) == 0 {
			r.presence.deleteRecordKey(rec.Key) // a tombstone
			continue
		}
		if err := kafka.DecodeEnvelope(rec, r.penv); err != nil {
			r.log.Warn("skipping undecodable presence record", "partition", b.Partition, "offset", rec.Offset, "err", err)
			continue
		}
		p := r.penv.GetPresence()
		if p == nil {
			r.log.Warn("skipping presence record without presence", "partition", b.Partition, "offset", rec.Offset, "type", kafka.EnvelopeType(r.penv))
			continue
		}
		r.presence.Update(r.penv.Tenant, r.penv.ClientId, p)
	}
	r.lastPresence.Store(time.Now().UnixNano())
	return nil
}

// watchPresence marks presence as read once no presence batch has arrived
// for PresenceQuiet, or after PresenceTimeout. It measures real time: this
// is an operational timer, not the state's clock.
func (r *Router) watchPresence(ctx context.Context) error {
	start := time.Now()
	r.lastPresence.Store(start.UnixNano())
	tick := time.NewTicker(max(r.cfg.PresenceQuiet/4, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-tick.C:
			quiet := now.Sub(time.Unix(0, r.lastPresence.Load()))
			switch {
			case quiet >= r.cfg.PresenceQuiet:
				r.log.Info("presence read", "clients", r.presence.Len(), "took", now.Sub(start).Round(time.Millisecond))
			case now.Sub(start) >= r.cfg.PresenceTimeout:
				r.log.Warn("presence still arriving after the timeout; ready anyway", "clients", r.presence.Len(), "timeout", r.cfg.PresenceTimeout)
			default:
				continue
			}
			r.presenceReady.Store(true)
			close(r.presenceRead)
			return nil
		}
	}
}

// runMessages consumes shoal.messages: explicitly assigned partitions,
// loaded before consuming, or a consumer group's, loaded as assigned.
// Consuming starts once presence is read, so that the first deliveries
// already go where the clients are.
func (r *Router) runMessages(ctx context.Context) error {
	cc := kafka.ConsumeConfig{
		Topic: r.messages,
		Group: r.cfg.Group,
		Start: r.start,
	}
	if r.cfg.Group == "" {
		for _, p := range r.cfg.Partitions {
			if err := r.load(ctx, p); err != nil {
				if ctx.Err() != nil {
					return nil //nolint:nilerr // stopping: the load failed because ctx ended
				}
				return fmt.Errorf("messages: %w", err)
			}
		}
		cc.Partitions = r.cfg.Partitions
	} else {
		cc.OnAssigned = r.assigned
		cc.OnRevoked = r.revoked
	}
	// In group mode the group may assign nothing to this instance: it is
	// ready except while an assignment is being loaded.
	r.shardsReady.Store(true)
	select {
	case <-ctx.Done():
		return nil
	case <-r.presenceRead:
	}
	if err := r.client.ConsumePolls(ctx, cc, r.handleMessages); err != nil {
		return fmt.Errorf("messages: %w", err)
	}
	return nil
}

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
	r.mu.Lock()
	r.shards[partition] = s
	r.mu.Unlock()
	r.log.Debug("shard loaded", "partition", partition, "offset", s.Offset(),
		"subscriptions", s.Subscriptions(), "retained", s.RetainedCount(), "took", time.Since(began).Round(time.Millisecond))
	return nil
}

// assigned loads the shards of partitions given to this instance by the
// group, retrying a failing store until it answers or ctx ends.
func (r *Router) assigned(ctx context.Context, partitions []int32) {
	r.shardsReady.Store(false)
	for _, p := range partitions {
		err := r.retry(ctx, "load shard", p, func() error { return r.load(ctx, p) })
		if err != nil {
			return // ctx ended; handleMessages refuses unloaded partitions
		}
	}
	r.shardsReady.Store(true)
}

// revoked drops the shards of partitions taken away. Each batch was
// stored before the next was consumed, so nothing is lost.
func (r *Router) revoked(_ context.Context, partitions []int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range partitions {
		delete(r.shards, p)
	}
	r.log.Info("shards revoked", "partitions", partitions)
}

// handleMessages applies a poll's batches (one per partition) to their
// shards, produces every delivery they made at once and waits until all
// are durable, then stores each changed shard's mutations and offset in one
// atomic write (all shards in one commit where the store can). One produce
// round trip and one store commit per poll, not per partition, is what
// keeps the latency and the cost per message low when many partitions
// carry a few records each. A failing produce or store is retried: the
// shards' memory is ahead of the store until the write succeeds, and a
// crash meanwhile replays the poll (deliveries at least once).
func (r *Router) handleMessages(ctx context.Context, bs []kafka.Batch) error {
	clear(r.recs)
	r.recs = r.recs[:0]
	clear(r.writes)
	r.writes = r.writes[:0]
	for _, b := range bs {
		s := r.shard(b.Partition)
		if s == nil {
			return fmt.Errorf("partition %d is not loaded", b.Partition)
		}
		out := r.outs[b.Partition]
		if out == nil {
			out = NewOutput()
			r.outs[b.Partition] = out
		}
		out.Reset()
		if r.apply(s, out, b) {
			r.writes = append(r.writes, ShardMutations{Partition: b.Partition, Mutations: &out.Mutations})
		}
	}
	if len(r.recs) > 0 {
		err := r.retry(ctx, "produce deliveries", bs[0].Partition, func() error { return r.client.ProduceSync(ctx, r.recs...) })
		if err != nil {
			return err // the records may still be in flight: not pooled
		}
		for _, rec := range r.recs {
			r.pool.Put(rec)
		}
	}
	if len(r.writes) == 0 {
		return nil
	}
	return r.retry(ctx, "store shards", r.writes[0].Partition, func() error {
		if sa, ok := r.store.(ShardsApplier); ok {
			return sa.ApplyShards(ctx, r.writes)
		}
		for _, w := range r.writes {
			if err := r.store.ApplyShard(ctx, w.Partition, w.Mutations); err != nil {
				return err
			}
		}
		return nil
	})
}

// apply applies b to s, collecting the shard's deliveries and mutations in
// out and the records to produce in r.recs. It reports whether the shard
// changed (its offset or its state), that is, whether it must be stored.
func (r *Router) apply(s *Shard, out *Output, b kafka.Batch) bool {
	s.ExpireRetained(out)
	before := s.Offset()
	for _, rec := range b.Records {
		if rec.Offset <= s.Offset() {
			continue // applied before a restart or a reassignment
		}
		first := len(out.Deliveries)
		if err := kafka.DecodeEnvelope(rec, r.env); err != nil {
			r.log.Warn("skipping undecodable record", "partition", b.Partition, "offset", rec.Offset, "err", err)
			s.Skip(rec.Offset, out)
			continue
		}
		if err := s.Apply(r.env, rec.Offset, out); err != nil {
			r.log.Warn("skipping record", "partition", b.Partition, "offset", rec.Offset, "err", err)
		}
		// Marshal now: the deliveries refer to r.env, which the next
		// record reuses. Each record continues the publish's trace.
		out.SetSource(first, b.Partition, rec.Offset)
		parent := headerValue(rec, kafka.HeaderTraceparent)
		from := len(r.recs)
		for _, d := range out.Deliveries[first:] {
			if d.Inbox {
				// QoS 1/2 targets to their sessions' inboxes; the QoS 0
				// targets stay in the delivery.
				r.recs = appendInbox(r.recs, d.Envelope)
				if d.Slot == InboxSlot || len(d.Envelope.GetDelivery().GetTargets()) == 0 {
					continue
				}
			}
			if d.Slot < 0 || d.Slot >= r.deliveryParts {
				r.log.Warn("dropping delivery to a slot outside shoal.deliveries", "partition", b.Partition, "offset", rec.Offset, "slot", d.Slot, "slots", r.deliveryParts)
				continue
			}
			rec := r.pool.Get()
			rec.Fill(r.deliveries, nil, d.Slot, d.Envelope)
			r.recs = append(r.recs, rec)
		}
		if parent != nil {
			for _, out := range r.recs[from:] {
				out.AddTraceChild(parent)
			}
		}
	}
	return s.Offset() != before || out.Mutations.Len() > 0
}

// headerValue returns the value of rec's header key, nil when it has none.
func headerValue(rec *kafka.Record, key string) []byte {
	for _, h := range rec.Headers {
		if h.Key == key {
			return h.Value
		}
	}
	return nil
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
		r.log.Error(what+" failed, retrying", "partition", partition, "attempt", attempt, "retry_in", backoff, "err", err)
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

// appendInbox appends one InboxAppend record per QoS 1/2 target of an
// Inbox delivery and leaves the delivery with its QoS 0 targets (which are
// not queued for offline sessions).
func appendInbox(recs []*kafka.Record, env *eventspb.Envelope) []*kafka.Record {
	d := env.GetDelivery()
	kept := d.Targets[:0]
	for _, t := range d.GetTargets() {
		if t.GetQos() == 0 {
			kept = append(kept, t)
			continue
		}
		key := make([]byte, 0, len(env.Tenant)+1+len(t.ClientId))
		key = append(append(append(key, env.Tenant...), '/'), t.ClientId...)
		recs = append(recs, kafka.NewRecord(kafka.TopicSessions, key, kafka.PartitionByKey, &eventspb.Envelope{
			Tenant:      env.Tenant,
			ClientId:    t.ClientId,
			TimestampUs: env.TimestampUs,
			MessageId:   env.MessageId,
			Event: &eventspb.Envelope_InboxAppend{InboxAppend: &eventspb.InboxAppend{
				Message: d.Message,
				Target: &eventspb.Target{Qos: t.Qos, Retain: t.Retain, SubscriptionIds: t.SubscriptionIds,
					Dup: t.Dup, ShareGroup: t.ShareGroup, ShareFilter: t.ShareFilter},
				Source: d.Source,
			}},
		}))
	}
	clear(d.Targets[len(kept):])
	d.Targets = kept
	return recs
}
