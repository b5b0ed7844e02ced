package replay

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// Sink receives the selected events, one call at a time, in each
// partition's order. It must not keep e or what it refers to after Write
// returns.
type Sink interface {
	Write(e *Event) error
	// Flush writes out what the sink buffers; Run calls it at the end and,
	// when following, whenever the log has nothing new.
	Flush() error
}

// Progress is told how far a read is; Run calls it from one goroutine at
// a time.
type Progress interface {
	// Start is called once with the number of records in the range (-1
	// when following: no end).
	Start(total int64)
	// Add counts records read, selected or not.
	Add(n int64)
	Finish()
}

// Stats is what a Run read.
type Stats struct {
	// Read counts the records read, Selected those written to the sink.
	Read, Selected int64
	// Partitions counts the partitions read: fewer than the topics have
	// when a client or a topic selected its partition.
	Partitions int
}

// ErrNoEvents is Run's error when the range held no selected event (and
// it did not follow the log).
var ErrNoEvents = errors.New("no event in the range matches")

// span is the part of one partition a Run reads: offsets [start, end),
// end -1 when following.
type span struct {
	partition  int32
	start, end int64
}

// Run reads what o selects from the log and writes it to sink, then
// returns; with o.Follow it reads on until ctx ends (then returns nil).
// prog may be nil.
func Run(ctx context.Context, log *kafka.Client, o Options, sink Sink, prog Progress) (Stats, error) {
	if err := o.Validate(); err != nil {
		return Stats{}, err
	}
	cat := log.Catalogue()
	f := newFilter(o, cat)
	type topicPlan struct {
		spec  kafka.TopicSpec
		spans []span
	}
	var plans []topicPlan
	var total int64
	for _, spec := range o.topicSpecs(cat) {
		spans, err := plan(ctx, log, spec, o)
		if err != nil {
			return Stats{}, err
		}
		plans = append(plans, topicPlan{spec, spans})
		for _, s := range spans {
			total += s.end - s.start
		}
	}
	if o.Follow {
		total = -1
	}
	var st Stats
	for _, p := range plans {
		st.Partitions += len(p.spans)
	}
	r := &reader{o: o, f: f, sink: sink, prog: prog, quotas: cat.Quotas.Name}
	if prog != nil {
		prog.Start(total)
		defer prog.Finish()
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.cancel = cancel
	var wg sync.WaitGroup
	errs := make([]error, len(plans))
	for i, p := range plans {
		work := slices.DeleteFunc(slices.Clone(p.spans), func(s span) bool { return s.end >= 0 && s.start >= s.end })
		if len(work) == 0 {
			continue
		}
		r.open.Add(int64(len(work)))
		wg.Go(func() { errs[i] = r.consume(rctx, log, p.spec, work) })
	}
	if r.open.Load() > 0 {
		wg.Wait()
	}
	st.Read, st.Selected = r.read.Load(), r.selected
	if err := errors.Join(append(errs, r.err)...); err != nil {
		return st, err
	}
	if err := sink.Flush(); err != nil {
		return st, fmt.Errorf("write: %w", err)
	}
	if ctx.Err() == nil && st.Selected == 0 && !o.Follow {
		return st, ErrNoEvents
	}
	return st, nil
}

// plan returns the spans of spec's partitions that o selects.
func plan(ctx context.Context, log *kafka.Client, spec kafka.TopicSpec, o Options) ([]span, error) {
	ends, err := log.EndOffsets(ctx, spec.Name)
	if err != nil {
		return nil, err
	}
	n := int32(len(ends))
	parts := slices.Sorted(maps.Keys(ends))
	switch {
	case len(o.Partitions) > 0:
		for _, p := range o.Partitions {
			if _, ok := ends[p]; !ok {
				return nil, fmt.Errorf("--partitions: %s has no partition %d (it has %d)", spec.Name, p, n)
			}
		}
		parts = o.Partitions
	default:
		if p, ok := pushDown(spec, o, n, log.Catalogue()); ok {
			parts = []int32{p}
		}
	}
	starts, err := log.StartOffsets(ctx, spec.Name)
	if err != nil {
		return nil, err
	}
	var from, to map[int32]int64
	if !o.From.IsZero() {
		if from, err = log.OffsetsAt(ctx, spec.Name, o.From); err != nil {
			return nil, err
		}
	}
	if !o.To.IsZero() {
		if to, err = log.OffsetsAt(ctx, spec.Name, o.To.Add(time.Millisecond)); err != nil {
			return nil, err
		}
	}
	spans := make([]span, 0, len(parts))
	for _, p := range parts {
		s := span{partition: p, start: starts[p], end: ends[p]}
		if from != nil {
			s.start = max(s.start, from[p])
		}
		if o.FromOffset >= 0 {
			s.start = max(s.start, o.FromOffset)
		}
		if to != nil {
			s.end = min(s.end, to[p])
		}
		if o.ToOffset >= 0 {
			s.end = min(s.end, o.ToOffset+1)
		}
		if o.Follow {
			s.end = -1
		}
		spans = append(spans, s)
	}
	return spans, nil
}

// pushDown returns the one partition of spec that can hold what o selects,
// when the record key tells: a client's records in sessions and presence
// (key tenant/client), one topic's publishes in messages (key tenant/topic).
func pushDown(spec kafka.TopicSpec, o Options, n int32, cat kafka.Catalogue) (int32, bool) {
	tenant, ok := o.tenant()
	if !ok || !spec.Keyed || n <= 0 {
		return 0, false
	}
	switch spec.Name {
	case cat.Sessions.Name, cat.Presence.Name:
		if o.ClientID != "" {
			return kafka.PartitionForKey(kafka.Key(tenant, o.ClientID), n), true
		}
	case cat.Messages.Name:
		if o.TopicFilter != "" && !strings.ContainsAny(o.TopicFilter, "+#") && !strings.HasPrefix(o.TopicFilter, "$share/") {
			return kafka.PartitionForKey(kafka.Key(tenant, o.TopicFilter), n), true
		}
	}
	return 0, false
}

// reader is one Run's state shared by its topics' consumers.
type reader struct {
	o      Options
	quotas string // shoal.quotas's name: its tombstones' keys name gateways
	f      *filter
	prog   Progress
	cancel context.CancelFunc
	open   atomic.Int64 // partitions not read to their end yet
	read   atomic.Int64

	mu       sync.Mutex // serialises sink, prog, selected and err
	sink     Sink
	selected int64
	err      error
}

// consume reads spec's spans, and ends the run when the last partition of
// every topic reached its end (or the limit was reached).
func (r *reader) consume(ctx context.Context, log *kafka.Client, spec kafka.TopicSpec, spans []span) error {
	start := make(map[int32]int64, len(spans))
	end := make(map[int32]int64, len(spans))
	parts := make([]int32, 0, len(spans))
	for _, s := range spans {
		start[s.partition], end[s.partition] = s.start, s.end
		parts = append(parts, s.partition)
	}
	done := map[int32]bool{}
	env := new(eventspb.Envelope)
	ev := new(Event)
	err := log.Consume(ctx, kafka.ConsumeConfig{
		Topic: spec.Name, Partitions: parts, Reuse: true,
		Start: func(p int32) int64 { return start[p] },
	}, func(ctx context.Context, b kafka.Batch) error {
		e := end[b.Partition]
		var n int64
		for _, rec := range b.Records {
			if e >= 0 && rec.Offset >= e {
				break
			}
			n++
			if !r.f.keep(spec, rec) {
				continue
			}
			if err := decode(rec, env, r.quotas); err != nil {
				return fmt.Errorf("decode %s partition %d offset %d: %w", spec.Name, rec.Partition, rec.Offset, err)
			}
			if !r.f.match(env) {
				continue
			}
			ev.fill(rec, env)
			if err := r.write(ev); err != nil {
				return err
			}
		}
		r.read.Add(n)
		r.mu.Lock()
		if r.prog != nil {
			r.prog.Add(n)
		}
		r.mu.Unlock()
		if last := b.Records[len(b.Records)-1].Offset; e >= 0 && last+1 >= e && !done[b.Partition] {
			done[b.Partition] = true
			if r.open.Add(-1) == 0 {
				r.cancel()
			}
		}
		if e < 0 {
			return r.flushIdle()
		}
		return nil
	})
	if err != nil && !errors.Is(err, errLimit) {
		return fmt.Errorf("read %s: %w", spec.Name, err)
	}
	return nil
}

// errLimit stops a consumer once Options.Limit events were written.
var errLimit = errors.New("limit reached")

func (r *reader) write(ev *Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.o.Limit > 0 && r.selected >= r.o.Limit {
		r.cancel()
		return errLimit
	}
	if err := r.sink.Write(ev); err != nil {
		r.err = fmt.Errorf("write: %w", err)
		r.cancel()
		return r.err
	}
	r.selected++
	if r.o.Limit > 0 && r.selected >= r.o.Limit {
		r.cancel()
	}
	return nil
}

// flushIdle flushes the sink while following, so that a tail shows each
// poll's events at once.
func (r *reader) flushIdle() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sink.Flush()
}
