package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	routersvc "github.com/shoal-mqtt/shoal/router-svc"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// sim is the simulated router: one shard per partition, each with its
// Output, sharing one Presence as a router's shards do. The Presence stays
// empty: every client then counts as online at the route of its
// subscription, so a publish matching a filter makes a delivery, as in
// BenchmarkShardPublish with presence=none.
type sim struct {
	opt    options
	shape  *shape
	shards []*routersvc.Shard
	outs   []*routersvc.Output
	offs   []int64 // the offset of the last record applied to each shard
	w      io.Writer
	res    *result
}

// subOptions returns the options of a subscription: the index ceiling
// subscribes at QoS 1. A shard copies them, so a batch shares one.
func subOptions() *eventspb.SubscriptionOptions { return &eventspb.SubscriptionOptions{Qos: 1} }

// fresh replaces the shards with empty ones.
func (x *sim) fresh() {
	presence := routersvc.NewPresence()
	n := x.opt.Partitions
	x.shards, x.outs, x.offs = make([]*routersvc.Shard, n), make([]*routersvc.Output, n), make([]int64, n)
	for p := range n {
		x.shards[p] = routersvc.NewShard(int32(p), presence, time.Now)
		x.outs[p] = routersvc.NewOutput()
	}
}

// subscriptions returns the subscriptions the shards hold.
func (x *sim) subscriptions() int {
	n := 0
	for _, s := range x.shards {
		n += s.Subscriptions()
	}
	return n
}

// simulate runs the phases one after another (doc.go).
func simulate(ctx context.Context, opt options, w io.Writer) (*result, error) {
	x := &sim{opt: opt, shape: newShape(opt), w: w,
		res: &result{machine: machineInfo(opt.args), Flags: opt, LiveHeapBytes: map[string]uint64{}}}
	began := now()
	x.fresh()
	x.res.LiveHeapBytes["empty"] = liveHeap()
	steps := []struct {
		name string
		do   func(context.Context, *phase, *span) error
	}{
		{"match-empty-one", x.matchOne},
		{"match-empty-outside", x.matchOutside},
		{"load-concrete", x.loadConcrete},
		{"load-wildcard", x.loadWildcard},
		{"match-full-one", x.matchOne},
		{"match-full-outside", x.matchOutside},
		{"drop", nil},
		{"apply-concrete", x.applyConcrete},
		{"apply-wildcard", x.applyWildcard},
	}
	for _, st := range steps {
		if st.do == nil {
			// The loaded index goes before the live path builds its
			// own, so that the process never holds both.
			x.shards, x.outs = nil, nil
			x.fresh()
			x.res.LiveHeapBytes["dropped"] = liveHeap()
			continue
		}
		if err := x.phase(ctx, st.name, st.do); err != nil {
			return nil, fmt.Errorf("%s: %w", st.name, err)
		}
	}
	end := now()
	x.res.WallS, x.res.CPUS = end.at.Sub(began.at).Seconds(), (end.cpu - began.cpu).Seconds()
	x.res.PeakRSSBytes = peakRSS()
	x.res.LoadAvg[1] = loadAvg()
	fmt.Fprintf(w, "done in %.1f s, %.1f CPU-s; peak RSS %.2f GiB\n", x.res.WallS, x.res.CPUS, float64(x.res.PeakRSSBytes)/(1<<30))
	return x.res, nil
}

// phase runs do, which measures its shard calls in sp, and records the
// phase's figures.
func (x *sim) phase(ctx context.Context, name string, do func(context.Context, *phase, *span) error) error {
	p := phase{Name: name, HeapBefore: liveHeap()}
	var sp span
	m0 := now()
	if err := do(ctx, &p, &sp); err != nil {
		return err
	}
	m1 := now()
	p.HeapAfter = liveHeap()
	p.finish(m0, m1, sp)
	if p.index {
		x.res.LiveHeapBytes[name] = p.HeapAfter
	}
	x.res.Phases = append(x.res.Phases, p)
	fmt.Fprintln(x.w, p.line())
	return nil
}

// loadConcrete loads the concrete filters, each into the shard of its
// partition, as a restarted router reads its shards' rows from the store.
func (x *sim) loadConcrete(ctx context.Context, p *phase, sp *span) error {
	p.Items, p.Records, p.index = x.opt.Concrete, x.opt.Concrete, true
	b := newLoadBatch(x.opt.Batch)
	err := x.batches(ctx, sp, x.opt.Concrete, func(base, n int) {
		for k := range n {
			tenant, _ := b.fill(x.shape, k, kindConcrete, base+k)
			b.parts[k] = x.shape.partition(tenant, b.subs[k].Filter)
		}
	}, func(n int) error {
		for k := range n {
			if err := x.shards[b.parts[k]].LoadSubscription(b.subs[k]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return x.expect(x.opt.Concrete)
}

// loadWildcard loads the wildcard filters into every shard, as each
// shard's rows hold every wildcard filter.
func (x *sim) loadWildcard(ctx context.Context, p *phase, sp *span) error {
	p.Items, p.Records, p.index = x.opt.Wildcard, x.opt.Wildcard*len(x.shards), true
	b := newLoadBatch(x.opt.Batch)
	err := x.batches(ctx, sp, x.opt.Wildcard, func(base, n int) {
		for k := range n {
			b.fill(x.shape, k, kindWildcard, base+k)
		}
	}, func(n int) error {
		for _, s := range x.shards {
			for k := range n {
				if err := s.LoadSubscription(b.subs[k]); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return x.expect(x.opt.Concrete + x.opt.Wildcard*len(x.shards))
}

// batches runs total items in batches of opt.Batch: prepare makes a batch
// of n, numbered from base, outside the timed span; run hands it to the
// shards inside it.
func (x *sim) batches(ctx context.Context, sp *span, total int, prepare func(base, n int), run func(n int) error) error {
	for base := 0; base < total; base += x.opt.Batch {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(x.opt.Batch, total-base)
		prepare(base, n)
		sp.start()
		err := run(n)
		sp.stop()
		if err != nil {
			return err
		}
	}
	return nil
}

// expect checks that the shards hold n subscriptions.
func (x *sim) expect(n int) error {
	if got := x.subscriptions(); got != n {
		return fmt.Errorf("the shards hold %d subscriptions, want %d", got, n)
	}
	return nil
}

// loadBatch is a batch of stored subscriptions, as the store hands them
// to LoadSubscription, with their partitions.
type loadBatch struct {
	subs  []routersvc.Subscription
	parts []int32
}

func newLoadBatch(n int) *loadBatch {
	b := &loadBatch{subs: make([]routersvc.Subscription, n), parts: make([]int32, n)}
	o := subOptions()
	for k := range b.subs {
		b.subs[k].Options = o
		b.subs[k].Route = &eventspb.Route{Slot: 1, Generation: 1}
	}
	return b
}

// fill makes subscription k of the batch the n-th filter of kind.
func (b *loadBatch) fill(s *shape, k int, kind string, n int) (tenant string, filter string) {
	tenant, client, filter, i := s.filter(kind, n)
	sub := &b.subs[k]
	sub.Tenant, sub.Client, sub.Filter = tenant, client, filter
	sub.Route.Connection = connection(kind, i)
	return tenant, filter
}

// applyConcrete applies opt.Apply concrete filters as SubscriptionChange
// ADDs, each to the shard of its partition, as the router applies the
// gateways' records: a batch of records, then the outputs reset, as after
// the router has stored a batch's mutations.
func (x *sim) applyConcrete(ctx context.Context, p *phase, sp *span) error {
	p.Items, p.Records, p.index = x.opt.Apply, x.opt.Apply, true
	b := newChangeBatch(x.opt.Batch)
	err := x.batches(ctx, sp, x.opt.Apply, func(base, n int) {
		for k := range n {
			tenant, filter := b.fill(x.shape, k, kindConcrete, base+k)
			b.parts[k] = x.shape.partition(tenant, filter)
		}
	}, func(n int) error {
		for k := range n {
			if err := x.apply(b.parts[k], b.envs[k]); err != nil {
				return err
			}
		}
		x.reset()
		return nil
	})
	if err != nil {
		return err
	}
	return x.expect(x.opt.Apply)
}

// applyWildcard applies the wildcard filters' ADDs to every shard, as the
// gateway writes one to every partition.
func (x *sim) applyWildcard(ctx context.Context, p *phase, sp *span) error {
	p.Items, p.Records, p.index = x.opt.Wildcard, x.opt.Wildcard*len(x.shards), true
	b := newChangeBatch(x.opt.Batch)
	err := x.batches(ctx, sp, x.opt.Wildcard, func(base, n int) {
		for k := range n {
			b.fill(x.shape, k, kindWildcard, base+k)
		}
	}, func(n int) error {
		for part := range x.shards {
			for k := range n {
				if err := x.apply(int32(part), b.envs[k]); err != nil {
					return err
				}
			}
		}
		x.reset()
		return nil
	})
	if err != nil {
		return err
	}
	return x.expect(x.opt.Apply + x.opt.Wildcard*len(x.shards))
}

// apply applies env to the shard of part at its next offset.
func (x *sim) apply(part int32, env *eventspb.Envelope) error {
	x.offs[part]++
	return x.shards[part].Apply(env, x.offs[part], x.outs[part])
}

// reset empties every shard's output: the deliveries and mutations of a
// batch refer to its envelopes, which the next batch reuses.
func (x *sim) reset() {
	for _, o := range x.outs {
		o.Reset()
	}
}

// changeBatch is a batch of SubscriptionChange ADDs as the gateway writes
// them for persistent sessions (conn.appendChange), with their partitions.
type changeBatch struct {
	envs  []*eventspb.Envelope
	parts []int32
}

func newChangeBatch(n int) *changeBatch {
	b := &changeBatch{envs: make([]*eventspb.Envelope, n), parts: make([]int32, n)}
	o := subOptions()
	for k := range b.envs {
		b.envs[k] = &eventspb.Envelope{Event: &eventspb.Envelope_SubscriptionChange{SubscriptionChange: &eventspb.SubscriptionChange{
			Op:                eventspb.SubscriptionChange_OP_ADD,
			Options:           o,
			Route:             &eventspb.Route{Slot: 1, Generation: 1},
			PersistentSession: true,
			SessionGeneration: 1,
		}}}
	}
	return b
}

// fill makes record k of the batch the ADD of the n-th filter of kind.
func (b *changeBatch) fill(s *shape, k int, kind string, n int) (tenant string, filter string) {
	tenant, client, filter, i := s.filter(kind, n)
	env := b.envs[k]
	env.Tenant, env.ClientId, env.TimestampUs = tenant, client, time.Now().UnixMicro()
	ch := env.GetSubscriptionChange()
	ch.Filter = filter
	ch.Route.Connection = connection(kind, i)
	return tenant, filter
}

// matchOne publishes to topics that match one concrete filter each,
// picked at random, so that the index is walked where a cache has not
// been: each publish to the shard of its topic's partition.
func (x *sim) matchOne(ctx context.Context, p *phase, sp *span) error {
	rng := rand.New(rand.NewPCG(uint64(x.opt.Seed), 1))
	want := 0
	if x.subscriptions() > 0 {
		want = x.opt.Publishes
	}
	return x.match(ctx, p, sp, want, func(n int) (string, string) {
		tenant, _, filter, _ := x.shape.filter(kindConcrete, rng.IntN(x.opt.Concrete))
		return tenant, filter
	})
}

// matchOutside publishes to topics no filter matches, as the index
// ceiling's match phases do.
func (x *sim) matchOutside(ctx context.Context, p *phase, sp *span) error {
	return x.match(ctx, p, sp, 0, x.shape.outside)
}

// match applies opt.Publishes QoS 0 publishes to topic(n), as
// BenchmarkShardPublish does (the shard's output reset before each), and
// checks that they reached want targets in all.
func (x *sim) match(ctx context.Context, p *phase, sp *span, want int, topic func(n int) (tenant, topic string)) error {
	p.Items, p.Records = x.opt.Publishes, x.opt.Publishes
	b := newPublishBatch(x.opt.Batch)
	err := x.batches(ctx, sp, x.opt.Publishes, func(base, n int) {
		for k := range n {
			tenant, name := topic(base + k)
			b.fill(k, tenant, name, uint64(base+k))
			b.parts[k] = x.shape.partition(tenant, name)
		}
	}, func(n int) error {
		for k := range n {
			part := b.parts[k]
			out := x.outs[part]
			out.Reset()
			if err := x.apply(part, b.envs[k]); err != nil {
				return err
			}
			p.Deliveries += len(out.Deliveries)
			for _, d := range out.Deliveries {
				p.Targets += len(d.Envelope.GetDelivery().GetTargets())
			}
		}
		x.reset()
		return nil
	})
	if err != nil {
		return err
	}
	if p.Targets != want || p.Deliveries != want {
		return fmt.Errorf("%d publishes made %d deliveries to %d targets, want %d: a topic's partition is not its filter's",
			x.opt.Publishes, p.Deliveries, p.Targets, want)
	}
	return nil
}

// publishBatch is a batch of publishes as the gateway writes them, with
// their partitions.
type publishBatch struct {
	envs  []*eventspb.Envelope
	parts []int32
}

// newPublishBatch returns a batch of n publishes sharing one payload of
// 64 bytes: the router never reads it.
func newPublishBatch(n int) *publishBatch {
	b := &publishBatch{envs: make([]*eventspb.Envelope, n), parts: make([]int32, n)}
	payload := make([]byte, 64)
	for k := range b.envs {
		b.envs[k] = &eventspb.Envelope{
			MessageId: &eventspb.MessageID{GatewayEpoch: 1},
			Event: &eventspb.Envelope_Publish{Publish: &eventspb.Publish{
				Message:    &eventspb.Message{Payload: payload},
				Connection: 1 << 40,
			}},
		}
	}
	return b
}

// fill makes publish k of the batch the one numbered seq, to tenant's
// topic, from the tenant's one publisher.
func (b *publishBatch) fill(k int, tenant, topic string, seq uint64) {
	env := b.envs[k]
	env.Tenant, env.ClientId, env.TimestampUs = tenant, tenant+kindOutside+"-p-0", time.Now().UnixMicro()
	env.MessageId.Seq = seq
	env.GetPublish().Message.Topic = topic
}
