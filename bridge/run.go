package bridge

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// runner is one direction Run runs: the out direction (in nil), or one in
// mapping. Run alone changes it, but for ready, which the direction sets.
type runner struct {
	key    string // "out", or "in/" and the in mapping's name
	in     *In
	cancel context.CancelFunc
	done   chan struct{} // closed when the direction returned; err is set then
	err    error
	ready  atomic.Bool
	// initial says that the runner was started with the bridge: its
	// failure fails the start. One started by a reload is logged and
	// started again after a backoff.
	initial bool
}

// restartBackoff is how long a direction that failed after the start
// (a topic a reload named cannot be made) waits before it is tried again.
const restartBackoff = 10 * time.Second

// Reload makes m the bridge's mappings: the out direction's next poll
// uses them (it starts when m is the first to have out mappings); an in
// mapping that is new or changed starts (again), one that is gone stops,
// after its poll in progress is committed or aborted. m was compiled
// (Config.Compile), so it is valid.
func (b *Bridge) Reload(m *Mappings) {
	if m == nil {
		return
	}
	b.mappings.Store(m)
	select {
	case b.reloaded <- struct{}{}:
	default: // Run has a reload to apply already; it reads the latest
	}
}

// Ready reports whether every direction of the bridge has its topics and
// is joining or in its consumer group; with no mapping, true.
func (b *Bridge) Ready() bool {
	rs := b.runners.Load()
	if rs == nil {
		return false
	}
	for _, r := range *rs {
		if !r.ready.Load() {
			return false
		}
	}
	return true
}

// Run bridges until ctx ends, then returns nil; an error is one the
// bridge cannot start with (a topic it needs cannot be made).
func (b *Bridge) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m := b.mappings.Load()
	b.log.Info("kafka bridge started", "out", len(m.Out), "in", len(m.In), "instance", b.opts.InstanceID)
	go b.watchLag(ctx)
	running := map[string]*runner{}
	ended := make(chan *runner)
	var retry <-chan time.Time
	start := func(key string, in *In, initial bool) {
		rctx, rcancel := context.WithCancel(ctx)
		r := &runner{key: key, in: in, cancel: rcancel, done: make(chan struct{}), initial: initial}
		running[key] = r
		go func() {
			ready := func() { r.ready.Store(true) }
			if in == nil {
				r.err = b.runOut(rctx, ready)
			} else {
				r.err = b.runIn(rctx, in, ready)
			}
			close(r.done)
			select {
			case ended <- r:
			case <-ctx.Done():
			}
		}()
	}
	stop := func(r *runner) {
		delete(running, r.key)
		r.cancel()
		<-r.done
	}
	// apply makes the runners those of m. An in mapping that changed is
	// stopped before it starts again: its transactional id and group
	// membership are the same.
	apply := func(m *Mappings, initial bool) {
		if len(m.Out) > 0 && running["out"] == nil {
			start("out", nil, initial)
		}
		want := make(map[string]*In, len(m.In))
		for i := range m.In {
			want[inKey(m.In[i].Name)] = &m.In[i]
		}
		for key, r := range running {
			if r.in == nil {
				continue
			}
			if w := want[key]; w == nil || !w.same(r.in) {
				b.log.Info("kafka bridge: in mapping stopped", "mapping", r.in.Name, "changed", w != nil)
				stop(r)
			}
		}
		for key, in := range want {
			if running[key] == nil {
				start(key, in, initial)
			}
		}
		rs := make([]*runner, 0, len(running))
		for _, r := range running {
			rs = append(rs, r)
		}
		b.runners.Store(&rs)
	}
	apply(m, true)
	defer func() {
		for _, r := range running {
			stop(r)
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-b.reloaded:
			m := b.mappings.Load()
			b.log.Info("kafka bridge: mappings reloaded", "out", len(m.Out), "in", len(m.In))
			apply(m, false)
		case <-retry:
			retry = nil
			apply(b.mappings.Load(), false)
		case r := <-ended:
			if running[r.key] != r {
				continue // stopped by a reload
			}
			delete(running, r.key)
			err := r.err
			if err == nil {
				err = ctx.Err()
			}
			if r.initial && !r.ready.Load() {
				return fmt.Errorf("bridge: %s: %w", r.describe(), err)
			}
			b.log.Error("kafka bridge direction stopped; started again after a backoff", "direction", r.describe(), "err", err, "backoff", restartBackoff)
			if retry == nil {
				retry = time.After(restartBackoff)
			}
			rs := make([]*runner, 0, len(running))
			for _, r := range running {
				rs = append(rs, r)
			}
			b.runners.Store(&rs)
		}
	}
}

// describe names the runner in an error: "out mappings", "in mapping X".
func (r *runner) describe() string {
	if r.in == nil {
		return "out mappings"
	}
	return "in mapping " + r.in.Name
}

// inKey is the runners' key of the in mapping name.
func inKey(name string) string { return "in/" + name }

// same reports whether in and o are the same mapping, setting by setting.
func (in *In) same(o *In) bool {
	return in.Name == o.Name && in.Tenant == o.Tenant && in.KafkaTopic == o.KafkaTopic &&
		in.MQTTTopic.String() == o.MQTTTopic.String() && in.QoS == o.QoS && in.DeadLetterTopic == o.DeadLetterTopic
}
