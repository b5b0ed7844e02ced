package routersvc

import (
	"context"
	"fmt"

	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// Store is the view store the router needs: the durable state of each shard
// (its subscriptions, its retained messages and the offset of the last
// record applied). Adapters: compose/store/pebblestore (embedded backbone)
// and the CQL adapter; router-svc/storetest is the conformance suite both
// pass.
type Store interface {
	// LoadShard streams the stored state of partition into l, one call per
	// subscription and per retained message in any order, and returns the
	// offset of the last record applied to the shard, or -1 when nothing
	// is stored. The values passed to l are freshly allocated: l may keep
	// them. An error from l stops the load and is returned wrapped.
	LoadShard(ctx context.Context, partition int32, l ShardLoader) (offset int64, err error)
	// ApplyShard writes m atomically and durably: every subscription and
	// retained write together with m.Offset as the shard's new offset, or
	// nothing. m holds at most one write per key, so the writes may be
	// applied in any order. The store must not keep m or anything it
	// points to after ApplyShard returns.
	ApplyShard(ctx context.Context, partition int32, m *Mutations) error
}

// ShardsApplier is implemented by stores that can write the mutations of
// several shards together (one commit for a whole poll of the router). Each
// shard's writes must be atomic, as with ApplyShard; the shards need not be
// atomic together: after an error the router retries them all, and writing
// a shard's mutations twice is harmless (they hold final states).
type ShardsApplier interface {
	ApplyShards(ctx context.Context, ms []ShardMutations) error
}

// ShardMutations are the mutations of one shard for [ShardsApplier].
type ShardMutations struct {
	Partition int32
	Mutations *Mutations
}

// ShardLoader receives a shard's stored state from [Store.LoadShard].
// [*Shard] implements it.
type ShardLoader interface {
	LoadSubscription(sub Subscription) error
	// LoadRetained receives the Publish envelope that set a retained
	// message.
	LoadRetained(publish *eventspb.Envelope) error
	// LoadUnreleased receives a kept packet identifier of a client's QoS 2
	// message (unreleased.go).
	LoadUnreleased(u Unreleased) error
}

// SubscriptionKey identifies one subscription within a shard: MQTT allows
// one subscription per (client, filter), and a shared subscription is a
// different one per share group.
type SubscriptionKey struct {
	Tenant     string
	Client     string
	ShareGroup string // "" when not shared
	Filter     string // without any $share/{group}/ prefix
}

// Subscription is one subscription as stored: its key, options and the
// route of the connection that made it (whose generation is the entry's
// generation).
type Subscription struct {
	SubscriptionKey
	Options *eventspb.SubscriptionOptions
	Route   *eventspb.Route
}

// RetainedKey identifies one retained message within a shard.
type RetainedKey struct {
	Tenant string
	Topic  string
}

// SubscriptionMutation stores Subscription, or deletes its key when Delete
// is set (then only the key fields are meaningful).
type SubscriptionMutation struct {
	Subscription
	Delete bool
}

// RetainedMutation stores Publish (the envelope of the Publish that set the
// retained message) under Key, or deletes Key when Publish is nil.
type RetainedMutation struct {
	Key     RetainedKey
	Publish *eventspb.Envelope
}

// Mutations are the state changes of a run of records applied to one shard,
// to be written with [Store.ApplyShard]. They hold the final state of each
// key touched (a later write of a key replaces an earlier one), so a store
// may apply them in any order. The values point into the shard's state and
// are never modified after they are added: they stay valid after the shard
// moves on.
type Mutations struct {
	// Offset is the offset of the last record applied, the shard's offset
	// once the mutations are stored.
	Offset        int64
	Subscriptions []SubscriptionMutation
	Retained      []RetainedMutation
	Unreleased    []UnreleasedMutation

	subIdx map[SubscriptionKey]int
	retIdx map[RetainedKey]int
	relIdx map[UnreleasedKey]int
}

// Reset empties m for reuse, keeping its memory. Offset becomes -1.
func (m *Mutations) Reset() {
	m.Offset = -1
	clear(m.Subscriptions)
	m.Subscriptions = m.Subscriptions[:0]
	clear(m.Retained)
	m.Retained = m.Retained[:0]
	clear(m.Unreleased)
	m.Unreleased = m.Unreleased[:0]
	clear(m.subIdx)
	clear(m.retIdx)
	clear(m.relIdx)
}

// Len returns the number of subscription, retained and packet identifier
// writes.
func (m *Mutations) Len() int {
	return len(m.Subscriptions) + len(m.Retained) + len(m.Unreleased)
}

func (m *Mutations) putSubscription(s SubscriptionMutation) {
	putLast(&m.Subscriptions, &m.subIdx, s.SubscriptionKey, s)
}

func (m *Mutations) putRetained(r RetainedMutation) {
	putLast(&m.Retained, &m.retIdx, r.Key, r)
}

func (m *Mutations) putUnreleased(u UnreleasedMutation) {
	putLast(&m.Unreleased, &m.relIdx, u.UnreleasedKey, u)
}

// putLast records v as the write of key k in list, replacing an earlier
// write of k (idx maps keys to their place in list), so a list holds each
// key's final state once.
func putLast[K comparable, V any](list *[]V, idx *map[K]int, k K, v V) {
	if *idx == nil {
		*idx = make(map[K]int)
	}
	if i, ok := (*idx)[k]; ok {
		(*list)[i] = v
		return
	}
	(*idx)[k] = len(*list)
	*list = append(*list, v)
}

// Validate reports what no store can write: a stored subscription without
// options or route, a retained message whose envelope has no Publish
// message or whose tenant and topic differ from its key, or a packet
// identifier without client or identifier. Adapters call it
// before writing anything, so a bad batch changes nothing.
func (m *Mutations) Validate() error {
	for i := range m.Subscriptions {
		s := &m.Subscriptions[i]
		if !s.Delete && (s.Options == nil || s.Route == nil) {
			return fmt.Errorf("subscription %q of client %q: no options or route", s.Filter, s.Client)
		}
	}
	for i := range m.Retained {
		r := &m.Retained[i]
		if r.Publish == nil {
			continue
		}
		msg := r.Publish.GetPublish().GetMessage()
		if msg == nil {
			return fmt.Errorf("retained %q: envelope without a publish message", r.Key.Topic)
		}
		if msg.Topic != r.Key.Topic || r.Publish.Tenant != r.Key.Tenant {
			return fmt.Errorf("retained %q of tenant %q: envelope of tenant %q, topic %q", r.Key.Topic, r.Key.Tenant, r.Publish.Tenant, msg.Topic)
		}
	}
	for i := range m.Unreleased {
		if u := &m.Unreleased[i]; u.Client == "" || u.PacketID == 0 {
			return fmt.Errorf("unreleased packet identifier %d of client %q: no client or identifier", u.PacketID, u.Client)
		}
	}
	return nil
}
