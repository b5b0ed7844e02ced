package views

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoal-mqtt/shoal/kafka"
	routersvc "github.com/shoal-mqtt/shoal/router-svc"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
	sessionsvc "github.com/shoal-mqtt/shoal/session-svc"
)

// bounds are where the rebuild of each topic's partitions starts (the log
// start) and ends (exclusive).
type bounds struct {
	messages, sessions span
	warnings           []string
}

type span struct {
	start, end map[int32]int64
}

func (s span) records() int64 {
	var n int64
	for p, end := range s.end {
		n += max(0, end-s.start[p])
	}
	return n
}

// bounds lists the log's start and end offsets. With --verify the end of a
// partition is the live view's offset + 1 (when the log reaches that far),
// so that both views reflect the same records: a live view behind the log
// (the router or session service stopped before the records the other
// roles wrote last) is no difference.
func (d *deployment) bounds(ctx context.Context) (bounds, error) {
	var b bounds
	var liveRouter, liveSessions map[int32]int64
	if d.o.Verify {
		var err error
		if liveRouter, liveSessions, err = liveOffsets(ctx, d.live, d.cat); err != nil {
			return b, err
		}
	}
	var err error
	if b.messages, err = d.span(ctx, d.cat.Messages.Name, liveRouter, &b.warnings); err != nil {
		return b, err
	}
	if b.sessions, err = d.span(ctx, d.cat.Sessions.Name, liveSessions, &b.warnings); err != nil {
		return b, err
	}
	return b, nil
}

func (d *deployment) span(ctx context.Context, topic string, live map[int32]int64, warnings *[]string) (span, error) {
	end, err := d.client.EndOffsets(ctx, topic)
	if err != nil {
		return span{}, fmt.Errorf("the log (is this a Shoal deployment?): %w", err)
	}
	start, err := d.client.StartOffsets(ctx, topic)
	if err != nil {
		return span{}, fmt.Errorf("the log: %w", err)
	}
	for _, p := range slices.Sorted(maps.Keys(end)) {
		if start[p] > 0 {
			*warnings = append(*warnings, fmt.Sprintf("%s partition %d starts at offset %d: the records before it are past the topic's retention, and what they made is not in the rebuilt view", topic, p, start[p]))
		}
		if live == nil {
			continue
		}
		switch off := live[p]; {
		case off+1 < end[p]:
			end[p] = off + 1
		case off+1 > end[p]:
			*warnings = append(*warnings, fmt.Sprintf("%s partition %d: the live view's offset %d is beyond the log's end %d", topic, p, off, end[p]))
		}
	}
	return span{start: start, end: end}, nil
}

// liveOffsets returns the offsets stored with the live views.
func liveOffsets(ctx context.Context, live store, cat kafka.Catalogue) (router, sessions map[int32]int64, err error) {
	router, sessions = make(map[int32]int64), make(map[int32]int64)
	for p := range cat.Messages.Partitions {
		if router[p], err = live.LoadShard(ctx, p, discardShard{}); err != nil {
			return nil, nil, fmt.Errorf("live router view: %w", err)
		}
	}
	for p := range cat.Sessions.Partitions {
		if sessions[p], err = live.LoadSessions(ctx, p, func(*sessionsvc.Session) error { return nil }); err != nil {
			return nil, nil, fmt.Errorf("live session view: %w", err)
		}
	}
	return router, sessions, nil
}

type discardShard struct{}

func (discardShard) LoadSubscription(routersvc.Subscription) error { return nil }
func (discardShard) LoadRetained(*eventspb.Envelope) error         { return nil }
func (discardShard) LoadUnreleased(routersvc.Unreleased) error     { return nil }

// rebuild applies both topics up to their bounds into the target, the
// router's and the session service's at the same time, and returns how
// many records it applied.
func (d *deployment) rebuild(ctx context.Context, b bounds) (int64, error) {
	rr, err := routersvc.NewRebuild(d.cfg.Router, d.cfg.Tenants.RetainedLimits(), d.cat.Messages.Partitions, d.log)
	if err != nil {
		return 0, err
	}
	sr, err := sessionsvc.NewRebuild(d.cfg.Session, d.cat, d.target, d.log)
	if err != nil {
		return 0, err
	}
	var applied atomic.Int64
	bar := newProgress(d.o.Progress, b.messages.records()+b.sessions.records())
	defer bar.finish()
	count := func(n int) { bar.add(int64(n)); applied.Add(int64(n)) }

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var rerr, serr error
	wg.Go(func() {
		rerr = readSpan(ctx, d.client, d.cat.Messages.Name, b.messages, func(ctx context.Context, bs []kafka.Batch) error {
			var ms []routersvc.ShardMutations
			for _, batch := range bs {
				count(len(batch.Records))
				if m := rr.Apply(batch); m != nil {
					ms = append(ms, routersvc.ShardMutations{Partition: batch.Partition, Mutations: m})
				}
			}
			return applyShards(ctx, d.target, ms)
		})
		if rerr != nil {
			cancel()
		}
	})
	wg.Go(func() {
		serr = readSpan(ctx, d.client, d.cat.Sessions.Name, b.sessions, func(ctx context.Context, bs []kafka.Batch) error {
			for _, batch := range bs {
				count(len(batch.Records))
				if err := sr.Apply(ctx, batch); err != nil {
					return err
				}
			}
			return nil
		})
		if serr != nil {
			cancel()
		}
	})
	wg.Wait()
	if n := rr.Skipped(); n > 0 {
		d.log.Warn("records of shoal.messages skipped (undecodable or malformed), as the router skips them", "records", n)
	}
	return applied.Load(), errors.Join(rerr, serr)
}

// applyShards stores the mutations of a poll's shards, in one commit where
// the store can.
func applyShards(ctx context.Context, st store, ms []routersvc.ShardMutations) error {
	if len(ms) == 0 {
		return nil
	}
	if sa, ok := st.(routersvc.ShardsApplier); ok {
		return sa.ApplyShards(ctx, ms)
	}
	for _, m := range ms {
		if err := st.ApplyShard(ctx, m.Partition, m.Mutations); err != nil {
			return err
		}
	}
	return nil
}

// stallTimeout is how long readSpan waits for records it knows are there
// before it gives up.
const stallTimeout = 30 * time.Second

// readSpan reads topic from each partition's start up to its end
// (exclusive), calling apply with each poll's batches cut at the ends.
func readSpan(ctx context.Context, client *kafka.Client, topic string, s span, apply func(context.Context, []kafka.Batch) error) error {
	remaining := make(map[int32]int64) // partition → its end
	var parts []int32
	for p, end := range s.end {
		if end > s.start[p] {
			remaining[p] = end
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return nil
	}
	slices.Sort(parts)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var last atomic.Int64 // unix nanoseconds of the last poll
	last.Store(time.Now().UnixNano())
	var stalled atomic.Bool
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-cctx.Done():
				return
			case now := <-t.C:
				if now.Sub(time.Unix(0, last.Load())) > stallTimeout {
					stalled.Store(true)
					cancel()
					return
				}
			}
		}
	}()
	var cut []kafka.Batch
	err := client.ConsumePolls(cctx, kafka.ConsumeConfig{Topic: topic, Partitions: parts, Reuse: true},
		func(ctx context.Context, bs []kafka.Batch) error {
			last.Store(time.Now().UnixNano())
			cut = cut[:0]
			for _, b := range bs {
				end, ok := remaining[b.Partition]
				if !ok {
					continue
				}
				n, _ := slices.BinarySearchFunc(b.Records, end, func(r *kafka.Record, end int64) int {
					return cmp.Compare(r.Offset, end)
				})
				if n > 0 {
					cut = append(cut, kafka.Batch{Topic: b.Topic, Partition: b.Partition, Records: b.Records[:n]})
				}
				if n < len(b.Records) || (n > 0 && b.Records[n-1].Offset >= end-1) {
					delete(remaining, b.Partition)
				}
			}
			if len(cut) > 0 {
				if err := apply(ctx, cut); err != nil {
					return err
				}
			}
			if len(remaining) == 0 {
				cancel()
			}
			return nil
		})
	switch {
	case err != nil && !errors.Is(err, context.Canceled):
		return fmt.Errorf("%s: %w", topic, err)
	case ctx.Err() != nil:
		return ctx.Err()
	case len(remaining) > 0 && stalled.Load():
		return fmt.Errorf("%s: no records for %s with partitions %v not read to their ends", topic, stallTimeout, slices.Sorted(maps.Keys(remaining)))
	case len(remaining) > 0:
		return fmt.Errorf("%s: stopped with partitions %v not read to their ends", topic, slices.Sorted(maps.Keys(remaining)))
	}
	return nil
}
