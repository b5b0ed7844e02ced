package gateway

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// SlotLeaser hands out gateway slots, the partitions of shoal.deliveries,
// by lease: two gateways never hold one slot, and a restarted gateway
// (same owner name) gets its slot back. compose/store/cqlstore implements
// it with lightweight transactions.
type SlotLeaser interface {
	// AcquireSlot claims a slot in [0, slots) for owner for ttl.
	AcquireSlot(ctx context.Context, slots int32, owner string, ttl time.Duration) (int32, error)
	// RenewSlot extends owner's lease of slot; it fails when another owner
	// holds it.
	RenewSlot(ctx context.Context, slot int32, owner string, ttl time.Duration) error
	// ReleaseSlot gives slot up.
	ReleaseSlot(ctx context.Context, slot int32, owner string) error
}

// Slot returns the gateway's slot (known once Run has leased it).
func (g *Gateway) Slot() int32 { return g.slot.Load() }

// leaseSlot takes the gateway's slot and returns when the successful
// acquire or renewal was sent, the start of the lease. With an explicit
// slot it retries while another owner holds it, until ctx ends: a gateway
// replacing a dead one waits for the old lease to expire. Without a leaser
// (a fixed slot, no lease) it returns the zero time.
func (g *Gateway) leaseSlot(ctx context.Context) (time.Time, error) {
	slots := g.eventLog.Partitions(g.topics.Deliveries.Name)
	if g.leaser == nil {
		if g.cfg.Slot < 0 {
			return time.Time{}, errors.New("gateway.slot is -1 (lease a free slot) but no lease store is configured (cql.hosts)")
		}
		if g.cfg.Slot >= slots {
			return time.Time{}, fmt.Errorf("gateway.slot %d: shoal.deliveries has %d partitions", g.cfg.Slot, slots)
		}
		g.slot.Store(g.cfg.Slot)
		return time.Time{}, nil
	}
	if g.cfg.Slot >= slots {
		return time.Time{}, fmt.Errorf("gateway.slot %d: shoal.deliveries has %d partitions", g.cfg.Slot, slots)
	}
	for {
		var slot int32
		var err error
		sent := g.baseClock()
		if g.cfg.Slot < 0 {
			slot, err = g.leaser.AcquireSlot(ctx, slots, g.cfg.ID, g.cfg.SlotLease)
		} else {
			slot = g.cfg.Slot
			err = g.leaser.RenewSlot(ctx, slot, g.cfg.ID, g.cfg.SlotLease)
		}
		if err == nil {
			g.slot.Store(slot)
			g.log.Info("slot leased", "slot", slot, "owner", g.cfg.ID, "ttl", g.cfg.SlotLease)
			g.measureClock(ctx) // before any client: its first Connect is stamped right
			return sent, nil
		}
		g.log.Warn("lease slot; retrying", "slot", g.cfg.Slot, "owner", g.cfg.ID, "err", err)
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("lease slot: %w", err)
		case <-time.After(g.cfg.SlotLease / 3):
		}
	}
}

// leaseValidity is how long after a successful acquire or renewal was sent
// the gateway may act as the slot's owner: the lease's time-to-live less
// the database's one-second expiry granularity (docs/cql.md), but at least
// three quarters of it.
func leaseValidity(ttl time.Duration) time.Duration { return ttl - min(time.Second, ttl/4) }

// renewLoop renews the slot lease every third of its time-to-live until
// ctx ends, then releases it. leasedAt is when the lease's acquire was
// sent. It returns an error when the lease is lost: another gateway may
// own the slot, so this one must stop. A renewal that fails is tried again
// every renewRetry, each attempt bounded by what is left of the lease's
// validity, until one succeeds or the validity (leaseValidity, from when
// the last good renewal was sent) runs out: then the lease is lost. A
// database that stalls for seconds, as Cassandra's lightweight
// transactions do for 5–10 s after a replica dies (docs/faults.md), costs
// nothing as long as a renewal gets through within the lease. The lease
// is also lost when, measured on the gateway's own clock (time.Now's
// monotonic reading), it ran out before a renewal was confirmed: after a
// pause of the process (GC, SIGSTOP, a stalled VM) another gateway may
// have taken the slot and released it meanwhile, so a late renewal that
// succeeds does not undo the gap.
func (g *Gateway) renewLoop(ctx context.Context, leasedAt time.Time) error {
	if g.leaser == nil {
		return nil
	}
	slot := g.slot.Load()
	ttl := g.cfg.SlotLease
	valid := leaseValidity(ttl)
	last := leasedAt // when the last successful acquire or renewal was sent
	t := time.NewTimer(ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ttl/3)
			defer cancel()
			if err := g.leaser.ReleaseSlot(rctx, slot, g.cfg.ID); err != nil {
				g.log.Warn("release slot", "slot", slot, "err", err)
			}
			return nil
		case <-t.C:
		}
		sent := g.baseClock()
		gap := sent.Sub(last)
		if gap >= valid {
			return fmt.Errorf("slot %d lease lost: the last renewal was sent %s ago, the lease lasts %s", slot, gap.Round(time.Millisecond), ttl)
		}
		rctx, cancel := context.WithTimeout(ctx, min(ttl/3, valid-gap))
		err := g.leaser.RenewSlot(rctx, slot, g.cfg.ID, ttl)
		cancel()
		gap = g.baseClock().Sub(last)
		switch {
		case ctx.Err() != nil:
			t.Reset(0)
		case err == nil && gap >= valid:
			return fmt.Errorf("slot %d lease lost: renewed %s after the previous renewal, past the lease's %s", slot, gap.Round(time.Millisecond), ttl)
		case err == nil:
			last = sent
			g.measureClock(ctx)
			t.Reset(ttl / 3)
		case gap >= valid:
			return fmt.Errorf("slot %d lease lost (not renewed for %s): %w", slot, gap.Round(time.Millisecond), err)
		default:
			g.log.Warn("renew slot lease; retrying", "slot", slot, "err", err, "unrenewed_for", gap.Round(time.Millisecond))
			t.Reset(renewRetry(ttl))
		}
	}
}

// renewRetry is the pause before trying a failed renewal again: a
// fifteenth of the lease (1 s of the default 15 s).
func renewRetry(ttl time.Duration) time.Duration { return ttl / 15 }
