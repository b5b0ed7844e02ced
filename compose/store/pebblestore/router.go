package pebblestore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	routersvc "github.com/shoal-mqtt/shoal/router-svc"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// The router's namespace and tables (see the package documentation).
const (
	nsRouter      = 'r'
	tableOffset   = 'o'
	tableSubs     = 's'
	tableRetained = 't'
	tableRelease  = 'q'
)

var _ routersvc.Store = (*DB)(nil)

// tablePrefix appends the key prefix of a router table's rows of one
// partition.
func tablePrefix(dst []byte, table byte, partition int32) []byte {
	dst = append(dst, nsRouter, table)
	return binary.BigEndian.AppendUint32(dst, uint32(partition))
}

// appendPart appends a length-prefixed key component.
func appendPart(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func offsetKey(dst []byte, partition int32) []byte {
	return tablePrefix(dst, tableOffset, partition)
}

func subKey(dst []byte, partition int32, k *routersvc.SubscriptionKey) []byte {
	dst = tablePrefix(dst, tableSubs, partition)
	dst = appendPart(dst, k.Tenant)
	dst = appendPart(dst, k.Client)
	dst = appendPart(dst, k.ShareGroup)
	return append(dst, k.Filter...)
}

func retainedKey(dst []byte, partition int32, k *routersvc.RetainedKey) []byte {
	dst = tablePrefix(dst, tableRetained, partition)
	dst = appendPart(dst, k.Tenant)
	return append(dst, k.Topic...)
}

func unreleasedKey(dst []byte, partition int32, k *routersvc.UnreleasedKey) []byte {
	dst = tablePrefix(dst, tableRelease, partition)
	dst = appendPart(dst, k.Tenant)
	dst = appendPart(dst, k.Client)
	return binary.BigEndian.AppendUint16(dst, k.PacketID)
}

// prefixEnd returns the smallest key above every key starting with p (p
// never ends in 0xff bytes only: it starts with a namespace byte).
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// LoadShard implements routersvc.Store.
func (d *DB) LoadShard(ctx context.Context, partition int32, l routersvc.ShardLoader) (int64, error) {
	snap := d.db.NewSnapshot()
	defer snap.Close() //nolint:errcheck // closing a read snapshot; nothing to do on error

	offset := int64(-1)
	v, closer, err := snap.Get(offsetKey(nil, partition))
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		return 0, fmt.Errorf("load shard %d: read offset: %w", partition, err)
	default:
		if len(v) != 8 {
			_ = closer.Close()
			return 0, fmt.Errorf("load shard %d: offset value of %d bytes", partition, len(v))
		}
		offset = int64(binary.BigEndian.Uint64(v))
		if err := closer.Close(); err != nil {
			return 0, fmt.Errorf("load shard %d: read offset: %w", partition, err)
		}
	}

	err = scan(ctx, snap, tablePrefix(nil, tableSubs, partition), func(env *eventspb.Envelope) error {
		ch := env.GetSubscriptionChange()
		if ch == nil {
			return errors.New("subscription row without a subscription change")
		}
		return l.LoadSubscription(routersvc.Subscription{
			SubscriptionKey: routersvc.SubscriptionKey{Tenant: env.Tenant, Client: env.ClientId, ShareGroup: ch.ShareGroup, Filter: ch.Filter},
			Options:         ch.Options,
			Route:           ch.Route,
		})
	})
	if err != nil {
		return 0, fmt.Errorf("load shard %d: subscriptions: %w", partition, err)
	}
	err = scan(ctx, snap, tablePrefix(nil, tableRetained, partition), l.LoadRetained)
	if err != nil {
		return 0, fmt.Errorf("load shard %d: retained: %w", partition, err)
	}
	err = scan(ctx, snap, tablePrefix(nil, tableRelease, partition), func(env *eventspb.Envelope) error {
		u, err := routersvc.UnreleasedOf(env)
		if err != nil {
			return err
		}
		return l.LoadUnreleased(u)
	})
	if err != nil {
		return 0, fmt.Errorf("load shard %d: unreleased packet identifiers: %w", partition, err)
	}
	return offset, nil
}

// scan decodes each value under prefix into a new Envelope and calls fn.
func scan(ctx context.Context, snap *pebble.Snapshot, prefix []byte, fn func(*eventspb.Envelope) error) (err error) {
	it, err := snap.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return fmt.Errorf("iterate: %w", err)
	}
	defer func() {
		if cerr := it.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("iterate: %w", cerr)
		}
	}()
	for ok := it.First(); ok; ok = it.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("read %x: %w", it.Key(), err)
		}
		env := &eventspb.Envelope{}
		if err := env.UnmarshalVT(v); err != nil { // copies: v is valid until Next
			return fmt.Errorf("decode %x: %w", it.Key(), err)
		}
		if err := fn(env); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("iterate: %w", err)
	}
	return nil
}

// ApplyShard implements routersvc.Store: one batch, committed with the
// store's write options (see Options.NoSync).
func (d *DB) ApplyShard(ctx context.Context, partition int32, m *routersvc.Mutations) error {
	return d.ApplyShards(ctx, []routersvc.ShardMutations{{Partition: partition, Mutations: m}})
}

// ApplyShards implements routersvc.ShardsApplier: the mutations of every
// shard in one batch, so one commit (and at most one WAL sync) stores a
// whole poll of the router.
func (d *DB) ApplyShards(ctx context.Context, ms []routersvc.ShardMutations) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("apply shards: %w", err)
	}
	for _, sm := range ms {
		if err := sm.Mutations.Validate(); err != nil {
			return fmt.Errorf("apply shard %d: %w", sm.Partition, err)
		}
	}
	b := d.db.NewBatch()
	defer b.Close() //nolint:errcheck // Close only recycles the batch's memory
	var key []byte
	for _, sm := range ms {
		var err error
		if key, err = addShard(b, key, sm.Partition, sm.Mutations); err != nil {
			return fmt.Errorf("apply shard %d: %w", sm.Partition, err)
		}
	}
	if err := d.commit(b); err != nil {
		return fmt.Errorf("apply shards: commit: %w", err)
	}
	return nil
}

// addShard adds the writes of m to b; key is scratch space, returned for
// reuse.
func addShard(b *pebble.Batch, key []byte, partition int32, m *routersvc.Mutations) ([]byte, error) {
	var env eventspb.Envelope
	var ev eventspb.Envelope_SubscriptionChange
	var ch eventspb.SubscriptionChange
	ev.SubscriptionChange = &ch
	env.Event = &ev
	ch.Op = eventspb.SubscriptionChange_OP_ADD
	for i := range m.Subscriptions {
		s := &m.Subscriptions[i]
		key = subKey(key[:0], partition, &s.SubscriptionKey)
		if s.Delete {
			if err := b.Delete(key, nil); err != nil {
				return key, err
			}
			continue
		}
		env.Tenant, env.ClientId = s.Tenant, s.Client
		ch.Filter, ch.ShareGroup, ch.Options, ch.Route = s.Filter, s.ShareGroup, s.Options, s.Route
		if err := set(b, key, &env); err != nil {
			return key, fmt.Errorf("subscription %q: %w", s.Filter, err)
		}
	}
	for i := range m.Retained {
		r := &m.Retained[i]
		key = retainedKey(key[:0], partition, &r.Key)
		if r.Publish == nil {
			if err := b.Delete(key, nil); err != nil {
				return key, err
			}
			continue
		}
		if err := set(b, key, r.Publish); err != nil {
			return key, fmt.Errorf("retained %q: %w", r.Key.Topic, err)
		}
	}
	for i := range m.Unreleased {
		u := &m.Unreleased[i]
		key = unreleasedKey(key[:0], partition, &u.UnreleasedKey)
		if u.Delete {
			if err := b.Delete(key, nil); err != nil {
				return key, err
			}
			continue
		}
		if err := set(b, key, u.Envelope()); err != nil {
			return key, fmt.Errorf("unreleased packet identifier %d of %q: %w", u.PacketID, u.Client, err)
		}
	}
	key = offsetKey(key[:0], partition)
	if err := b.Set(key, binary.BigEndian.AppendUint64(nil, uint64(m.Offset)), nil); err != nil {
		return key, fmt.Errorf("offset: %w", err)
	}
	return key, nil
}

// set marshals env straight into the batch.
func set(b *pebble.Batch, key []byte, env *eventspb.Envelope) error {
	op := b.SetDeferred(len(key), env.SizeVT())
	copy(op.Key, key)
	if _, err := env.MarshalToSizedBufferVT(op.Value); err != nil {
		return fmt.Errorf("marshal: %w", err)
	}
	if err := op.Finish(); err != nil {
		return fmt.Errorf("batch: %w", err)
	}
	return nil
}
