package gateway

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shoal-mqtt/shoal/kafka"
)

// SlotLeaser hands out gateway slots, the partitions of shoal.deliveries,
// by lease: two gateways never hold one slot, and a restarted gateway
// (same owner name) gets its slot back. internal/store/cqlstore implements
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

// SetSlotLeaser makes the gateway lease its slot from l (before Run): a
// free one when Config.Slot is -1, else Config.Slot itself.
func (g *Gateway) SetSlotLeaser(l SlotLeaser) { g.leaser = l }

// Slot returns the gateway's slot (known once Run has leased it).
func (g *Gateway) Slot() int32 { return g.slot.Load() }

// leaseSlot takes the gateway's slot. With an explicit slot it retries
// while another owner holds it, until ctx ends: a gateway replacing a dead
// one waits for the old lease to expire.
func (g *Gateway) leaseSlot(ctx context.Context) error {
	slots := g.kl.Partitions(kafka.TopicDeliveries)
	if g.leaser == nil {
		if g.cfg.Slot < 0 {
			return errors.New("gateway.slot is -1 (lease a free slot) but no lease store is configured (cql.hosts)")
		}
		if g.cfg.Slot >= slots {
			return fmt.Errorf("gateway.slot %d: shoal.deliveries has %d partitions", g.cfg.Slot, slots)
		}
		g.slot.Store(g.cfg.Slot)
		return nil
	}
	if g.cfg.Slot >= slots {
		return fmt.Errorf("gateway.slot %d: shoal.deliveries has %d partitions", g.cfg.Slot, slots)
	}
	for {
		var slot int32
		var err error
		if g.cfg.Slot < 0 {
			slot, err = g.leaser.AcquireSlot(ctx, slots, g.cfg.ID, g.cfg.SlotLease)
		} else {
			slot = g.cfg.Slot
			err = g.leaser.RenewSlot(ctx, slot, g.cfg.ID, g.cfg.SlotLease)
		}
		if err == nil {
			g.slot.Store(slot)
			g.log.Info("slot leased", "slot", slot, "owner", g.cfg.ID, "ttl", g.cfg.SlotLease)
			return nil
		}
		g.log.Warn("lease slot; retrying", "slot", g.cfg.Slot, "owner", g.cfg.ID, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("lease slot: %w", err)
		case <-time.After(g.cfg.SlotLease / 3):
		}
	}
}

// renewLoop renews the slot lease every third of its time-to-live until
// ctx ends, then releases it. It returns an error when the lease is lost
// or could not be renewed before it expired: another gateway may own the
// slot, so this one must stop.
func (g *Gateway) renewLoop(ctx context.Context) error {
	if g.leaser == nil {
		return nil
	}
	slot := g.slot.Load()
	last := time.Now()
	t := time.NewTicker(g.cfg.SlotLease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.cfg.SlotLease/3)
			defer cancel()
			if err := g.leaser.ReleaseSlot(rctx, slot, g.cfg.ID); err != nil {
				g.log.Warn("release slot", "slot", slot, "err", err)
			}
			return nil
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, g.cfg.SlotLease/3)
		err := g.leaser.RenewSlot(rctx, slot, g.cfg.ID, g.cfg.SlotLease)
		cancel()
		switch {
		case err == nil:
			last = time.Now()
		case ctx.Err() != nil:
		case time.Since(last) >= g.cfg.SlotLease*2/3:
			return fmt.Errorf("slot %d lease lost (not renewed for %s): %w", slot, time.Since(last).Round(time.Millisecond), err)
		default:
			g.log.Warn("renew slot lease; retrying", "slot", slot, "err", err)
		}
	}
}
