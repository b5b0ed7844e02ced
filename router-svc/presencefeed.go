package routersvc

import (
	"context"
	"fmt"
	"time"

	"github.com/shoal-mqtt/shoal/kafka"
)

// runPresence reads every partition of shoal.presence from the beginning
// into r.presence.
func (r *Router) runPresence(ctx context.Context) error {
	n := r.topics.Presence.Partitions
	parts := make([]int32, n)
	for i := range parts {
		parts[i] = int32(i)
	}
	err := r.client.Consume(ctx, kafka.ConsumeConfig{Topic: r.topics.Presence.Name, Partitions: parts}, r.handlePresence)
	if err != nil {
		return fmt.Errorf("presence: %w", err)
	}
	return nil
}

func (r *Router) handlePresence(ctx context.Context, b kafka.Batch) error {
	for _, rec := range b.Records {
		if len(rec.Value) == 0 {
			if err := r.presence.deleteRecordKey(rec.Key); err != nil { // a tombstone
				r.log.WarnContext(ctx, "skipping presence tombstone", "partition", b.Partition, "offset", rec.Offset, "err", err)
			}
			continue
		}
		if err := kafka.DecodeEnvelope(rec, r.penv); err != nil {
			r.log.WarnContext(ctx, "skipping undecodable presence record", "partition", b.Partition, "offset", rec.Offset, "err", err)
			continue
		}
		p := r.penv.GetPresence()
		if p == nil {
			r.log.WarnContext(ctx, "skipping presence record without presence", "partition", b.Partition, "offset", rec.Offset, "type", kafka.EnvelopeType(r.penv))
			continue
		}
		r.presence.Update(r.penv.Tenant, r.penv.ClientId, p)
	}
	if n := len(b.Records); n > 0 && int(b.Partition) < len(r.presenceNext) {
		r.presenceNext[b.Partition].Store(b.Records[n-1].Offset + 1)
	}
	return nil
}

// watchPresence marks presence as read once the presence consumer has
// reached the end offsets shoal.presence had at start, or after
// PresenceTimeout. Listing the end offsets is retried (with the router's
// backoff) until it succeeds or the timeout passes. It measures real
// time: this is an operational timer, not the state's clock.
func (r *Router) watchPresence(ctx context.Context) error {
	start := time.Now()
	deadline := start.Add(r.cfg.PresenceTimeout)
	ready := func() {
		r.presenceReady.Store(true)
		close(r.presenceRead)
	}
	var ends map[int32]int64
	lctx, cancel := context.WithDeadline(ctx, deadline)
	err := r.retry(lctx, "presence: listing end offsets", -1, func() (err error) {
		ends, err = r.client.EndOffsets(lctx, r.topics.Presence.Name)
		return err
	})
	cancel()
	switch {
	case ctx.Err() != nil:
		return nil
	case err != nil:
		r.log.Warn("presence: end offsets not listed before the timeout; ready anyway",
			"clients", r.presence.Len(), "timeout", r.cfg.PresenceTimeout)
		ready()
		return nil
	}
	tick := time.NewTicker(presencePoll)
	defer tick.Stop()
	for {
		if r.presenceCaughtUp(ends) {
			r.log.Info("presence read", "clients", r.presence.Len(), "took", time.Since(start).Round(time.Millisecond))
			ready()
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case now := <-tick.C:
			if !now.Before(deadline) {
				r.log.Warn("presence still behind its end offsets after the timeout; ready anyway",
					"clients", r.presence.Len(), "timeout", r.cfg.PresenceTimeout)
				ready()
				return nil
			}
		}
	}
}

// presencePoll is how often watchPresence compares the presence
// consumer's position with the end offsets.
const presencePoll = 5 * time.Millisecond

// presenceCaughtUp reports whether the presence consumer has read every
// partition up to its end offset in ends.
func (r *Router) presenceCaughtUp(ends map[int32]int64) bool {
	for p, end := range ends {
		if int(p) >= len(r.presenceNext) {
			continue // a partition added after start: not ours to wait for
		}
		if r.presenceNext[p].Load() < end {
			return false
		}
	}
	return true
}
