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

// Sink receives the selected events, one call at a time, in time order
// (Run merges the partitions it reads), so that what happened reads as it
// happened. It must not keep e or what it refers to after
// Write returns.
type Sink interface {
	Write(e *Event) error
	// Flush writes out what the sink buffers; Run calls it at the end and,
	// when following, whenever it waits for the log.
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
// end being where the partition ended when the Run began (a follow reads
// on past it).
type span struct {
	partition  int32
	start, end int64
}

// Run reads what o selects from the log and writes it to sink, then
// returns; with o.Follow it reads on until ctx ends (then returns nil).
// prog may be nil.
//
// Each partition has a reader of its own, which filters and decodes its
// records; the merge writes their events in time order: the earliest next
// event of all partitions first (ties: the topic first in o.Topics's
// order messages, sessions, presence, deliveries, quotas, then the lower
// partition; a partition's events keep their offset order, whatever their
// times). A reader that is mergeBuffer events ahead of the merge waits,
// so memory does not grow with the range. Following, the merge is exact
// up to the end the log had when Run began; beyond it a partition that
// has nothing new does not hold the others back, and new events come out
// as they are read.
func Run(ctx context.Context, log *kafka.Client, o Options, sink Sink, prog Progress) (Stats, error) {
	return run(ctx, log, o, sink, prog, nil)
}

// run is Run; observe, when not nil, sees every decoded envelope before
// the filters decide on it (from the readers' goroutines, concurrently).
func run(ctx context.Context, log *kafka.Client, o Options, sink Sink, prog Progress, observe func(*kafka.Record, *eventspb.Envelope)) (Stats, error) {
	if err := o.Validate(); err != nil {
		return Stats{}, err
	}
	cat := log.Catalogue()
	var st Stats
	var streams []*stream
	var total int64
	for rank, spec := range o.topicSpecs(cat) {
		spans, err := plan(ctx, log, spec, o)
		if err != nil {
			return Stats{}, err
		}
		st.Partitions += len(spans)
		for _, s := range spans {
			total += max(0, s.end-s.start)
			if s.start >= s.end && !o.Follow {
				continue
			}
			str := newStream(spec, rank, s, mergeBuffer)
			if s.start >= s.end {
				str.state = caughtUp
			}
			streams = append(streams, str)
		}
	}
	if o.Follow {
		total = -1
	}
	r := &reader{o: o, f: newFilter(o, cat), quotas: cat.Quotas.Name, prog: prog, observe: observe, m: newMerge(streams)}
	if prog != nil {
		prog.Start(total)
		defer prog.Finish()
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(rctx, r.m.stop)()
	var wg sync.WaitGroup
	errs := make([]error, len(streams))
	for i, s := range streams {
		wg.Go(func() {
			if errs[i] = r.consume(rctx, log, s); errs[i] != nil {
				cancel()
			}
		})
	}
	werr := r.write(sink)
	cancel()
	wg.Wait()
	st.Read, st.Selected = r.read.Load(), r.selected
	if err := errors.Join(append(errs, werr)...); err != nil {
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

// reader is one Run's state shared by its partitions' readers and the
// merge.
type reader struct {
	o       Options
	quotas  string // shoal.quotas's name: its tombstones' keys name gateways
	f       *filter
	observe func(*kafka.Record, *eventspb.Envelope)
	m       *merge
	read    atomic.Int64

	mu   sync.Mutex // serialises prog
	prog Progress

	selected int64 // written by write alone
}

// errCaughtUp stops a partition's reader at the end of its span.
var errCaughtUp = errors.New("end of the range")

// consume reads s's partition, filters and decodes its records and pushes
// the selected events to the merge, until the end of its span (on, when
// following) or until the merge stops.
func (r *reader) consume(ctx context.Context, log *kafka.Client, s *stream) error {
	evs := make([]*item, 0, mergeChunk)
	var it *item // decoded into, and not selected yet
	err := log.Consume(ctx, kafka.ConsumeConfig{
		Topic: s.spec.Name, Partitions: []int32{s.partition}, Reuse: true,
		Start: func(int32) int64 { return s.start },
	}, func(ctx context.Context, b kafka.Batch) error {
		var n int64
		for _, rec := range b.Records {
			if !r.o.Follow && rec.Offset >= s.end {
				break
			}
			n++
			if !r.f.keep(s.spec, rec) {
				continue
			}
			if it == nil {
				it = r.m.newItem()
			}
			if err := decode(rec, &it.env, r.quotas); err != nil {
				return fmt.Errorf("decode %s partition %d offset %d: %w", s.spec.Name, rec.Partition, rec.Offset, err)
			}
			if r.observe != nil {
				r.observe(rec, &it.env)
			}
			if !r.f.match(&it.env) {
				continue
			}
			it.ev.fill(rec, &it.env)
			evs, it = append(evs, it), nil
			if len(evs) == mergeChunk {
				if !r.m.push(s, evs, reading) {
					return errCaughtUp
				}
				evs = evs[:0]
			}
		}
		r.read.Add(n)
		r.mu.Lock()
		if r.prog != nil {
			r.prog.Add(n)
		}
		r.mu.Unlock()
		state := reading
		if b.Records[len(b.Records)-1].Offset+1 >= s.end {
			state = caughtUp
			if !r.o.Follow {
				state = finished
			}
		}
		ok := r.m.push(s, evs, state)
		evs = evs[:0]
		if !ok || state == finished {
			return errCaughtUp
		}
		return nil
	})
	if err != nil && !errors.Is(err, errCaughtUp) {
		return fmt.Errorf("read %s: %w", s.spec.Name, err)
	}
	return nil
}

// write writes the merge's events to sink until the merge ends, the limit
// is reached or the sink fails, then stops the merge.
func (r *reader) write(sink Sink) error {
	defer r.m.stop()
	var idle func() error
	if r.o.Follow {
		// A tail shows what it read as soon as it waits for more.
		idle = func() error {
			if err := sink.Flush(); err != nil {
				return fmt.Errorf("write: %w", err)
			}
			return nil
		}
	}
	for r.o.Limit <= 0 || r.selected < r.o.Limit {
		it, err := r.m.next(idle)
		if it == nil {
			return err
		}
		err = sink.Write(&it.ev)
		r.m.release(it)
		if err != nil {
			return fmt.Errorf("write: %w", err)
		}
		r.selected++
	}
	return nil
}
