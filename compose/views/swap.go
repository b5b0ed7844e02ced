package views

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/shoal-mqtt/shoal/compose/store/cqlstore"
	"github.com/shoal-mqtt/shoal/kafka"
	routersvc "github.com/shoal-mqtt/shoal/router-svc"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
	sessionsvc "github.com/shoal-mqtt/shoal/session-svc"
)

// swap makes the rebuilt views live and returns where the replaced ones
// went.
func (d *deployment) swap(ctx context.Context) (string, error) {
	if d.liveCQL != nil {
		return d.swapCQL(ctx)
	}
	return d.swapPebble()
}

// swapPebble moves data_dir/views aside (views-replaced-<time>) and the
// rebuilt directory in its place. The embedded log stays locked by this
// process meanwhile, so no `shoal all` starts on the directory halfway.
func (d *deployment) swapPebble() (string, error) {
	live, lok := d.live.(interface{ Close() error })
	target, tok := d.target.(interface{ Close() error })
	if !lok || !tok {
		return "", errors.New("the Pebble views cannot be closed")
	}
	if err := errors.Join(live.Close(), target.Close()); err != nil {
		return "", err
	}
	replaced := filepath.Join(d.cfg.DataDir, "views-replaced-"+d.o.Now().UTC().Format("20060102T150405.000Z"))
	if err := os.Rename(d.pebbleLive, replaced); err != nil {
		return "", err
	}
	if err := os.Rename(d.pebbleTarget, d.pebbleLive); err != nil {
		// Put the live view back.
		return "", errors.Join(err, os.Rename(replaced, d.pebbleLive))
	}
	d.targetName = d.pebbleLive
	return replaced, nil
}

// swapCQL copies the live views to <keyspace>_replaced, empties the live
// ones and copies the rebuilt rows in, through the store ports. It
// refuses while a gateway holds a slot lease: the deployment must be
// stopped (the routers and session services too, which it cannot see).
func (d *deployment) swapCQL(ctx context.Context) (string, error) {
	for slot := range d.cat.Deliveries.Partitions {
		holder, err := d.liveCQL.SlotHolder(ctx, slot)
		if err != nil {
			return "", fmt.Errorf("slot leases: %w", err)
		}
		if holder != "" {
			return "", fmt.Errorf("gateway %q holds slot %d: stop the deployment (gateways, routers, session services) before --swap", holder, slot)
		}
	}
	rcfg := d.cfg.CQL
	rcfg.Keyspace += replacedSuffix
	replaced, err := cqlstore.Open(ctx, rcfg, d.log)
	if err != nil {
		return "", fmt.Errorf("keyspace for the replaced views: %w", err)
	}
	defer func() { _ = replaced.Close() }()
	if err := replaced.TruncateViews(ctx); err != nil {
		return "", err
	}
	if err := copyViews(ctx, d.live, replaced, d.cat); err != nil {
		return "", fmt.Errorf("copy the live views to %s: %w", replaced.Keyspace(), err)
	}
	if err := d.liveCQL.TruncateViews(ctx); err != nil {
		return "", err
	}
	if err := copyViews(ctx, d.target, d.live, d.cat); err != nil {
		return "", fmt.Errorf("copy the rebuilt views to %s (the replaced ones are in %s): %w", d.liveCQL.Keyspace(), replaced.Keyspace(), err)
	}
	d.targetName = "keyspace " + d.liveCQL.Keyspace()
	return "keyspace " + replaced.Keyspace(), nil
}

// sessionChunk bounds the sessions of one commit of a copy: a CQL batch
// holds at most 65,535 statements.
const sessionChunk = 1000

// copyViews copies every partition of the router's and the session
// service's views from src to dst (which should be empty), offsets
// included.
func copyViews(ctx context.Context, src, dst store, cat kafka.Catalogue) error {
	for p := range cat.Messages.Partitions {
		c := &shardCopy{}
		off, err := src.LoadShard(ctx, p, c)
		if err != nil {
			return err
		}
		if off < 0 && c.m.Len() == 0 {
			continue
		}
		c.m.Offset = off
		if err := dst.ApplyShard(ctx, p, &c.m); err != nil {
			return err
		}
	}
	for p := range cat.Sessions.Partitions {
		var sessions []*sessionsvc.Session
		off, err := src.LoadSessions(ctx, p, func(s *sessionsvc.Session) error {
			sessions = append(sessions, s)
			return nil
		})
		if err != nil {
			return err
		}
		if off < 0 && len(sessions) == 0 {
			continue
		}
		for len(sessions) > sessionChunk {
			if err := dst.CommitSessions(ctx, p, off, sessions[:sessionChunk]); err != nil {
				return err
			}
			sessions = sessions[sessionChunk:]
		}
		if err := dst.CommitSessions(ctx, p, off, sessions); err != nil {
			return err
		}
	}
	return nil
}

// shardCopy collects a shard's rows as the mutations that write them.
type shardCopy struct{ m routersvc.Mutations }

func (c *shardCopy) LoadSubscription(s routersvc.Subscription) error {
	c.m.Subscriptions = append(c.m.Subscriptions, routersvc.SubscriptionMutation{Subscription: s})
	return nil
}

func (c *shardCopy) LoadRetained(env *eventspb.Envelope) error {
	key := routersvc.RetainedKey{Tenant: env.GetTenant(), Topic: env.GetPublish().GetMessage().GetTopic()}
	c.m.Retained = append(c.m.Retained, routersvc.RetainedMutation{Key: key, Publish: env})
	return nil
}

func (c *shardCopy) LoadUnreleased(u routersvc.Unreleased) error {
	c.m.Unreleased = append(c.m.Unreleased, routersvc.UnreleasedMutation{Unreleased: u})
	return nil
}
