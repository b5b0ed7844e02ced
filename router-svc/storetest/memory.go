package storetest

import (
	"context"
	"fmt"
	"sync"

	routersvc "github.com/shoal-mqtt/shoal/router-svc"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// Memory is an in-memory [routersvc.Store] for tests whose subject is not
// the store. It copies what it is given and what it returns, and validates
// mutations as the real adapters do. The zero value is not usable; use
// [NewMemory].
type Memory struct {
	mu     sync.Mutex
	shards map[int32]*memShard
}

type memShard struct {
	offset   int64
	subs     map[routersvc.SubscriptionKey]routersvc.Subscription
	retained map[routersvc.RetainedKey]*eventspb.Envelope
	rels     map[routersvc.UnreleasedKey]routersvc.Unreleased
}

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{shards: make(map[int32]*memShard)}
}

// LoadShard implements [routersvc.Store].
func (m *Memory) LoadShard(ctx context.Context, partition int32, l routersvc.ShardLoader) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("load shard %d: %w", partition, err)
	}
	m.mu.Lock()
	sh := m.shards[partition]
	var subs []routersvc.Subscription
	var rets []*eventspb.Envelope
	var rels []routersvc.Unreleased
	offset := int64(-1)
	if sh != nil {
		offset = sh.offset
		for _, s := range sh.subs {
			subs = append(subs, cloneSub(s))
		}
		for _, r := range sh.retained {
			rets = append(rets, r.CloneVT())
		}
		for _, u := range sh.rels {
			rels = append(rels, u)
		}
	}
	m.mu.Unlock()
	for _, s := range subs {
		if err := l.LoadSubscription(s); err != nil {
			return 0, fmt.Errorf("load shard %d: subscription: %w", partition, err)
		}
	}
	for _, r := range rets {
		if err := l.LoadRetained(r); err != nil {
			return 0, fmt.Errorf("load shard %d: retained: %w", partition, err)
		}
	}
	for _, u := range rels {
		if err := l.LoadUnreleased(u); err != nil {
			return 0, fmt.Errorf("load shard %d: unreleased packet identifier: %w", partition, err)
		}
	}
	return offset, nil
}

// ApplyShard implements [routersvc.Store].
func (m *Memory) ApplyShard(ctx context.Context, partition int32, mu *routersvc.Mutations) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("apply shard %d: %w", partition, err)
	}
	if err := mu.Validate(); err != nil {
		return fmt.Errorf("apply shard %d: %w", partition, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	sh := m.shards[partition]
	if sh == nil {
		sh = &memShard{
			subs:     make(map[routersvc.SubscriptionKey]routersvc.Subscription),
			retained: make(map[routersvc.RetainedKey]*eventspb.Envelope),
			rels:     make(map[routersvc.UnreleasedKey]routersvc.Unreleased),
		}
		m.shards[partition] = sh
	}
	for _, s := range mu.Subscriptions {
		if s.Delete {
			delete(sh.subs, s.SubscriptionKey)
		} else {
			sh.subs[s.SubscriptionKey] = cloneSub(s.Subscription)
		}
	}
	for _, r := range mu.Retained {
		if r.Publish == nil {
			delete(sh.retained, r.Key)
		} else {
			sh.retained[r.Key] = r.Publish.CloneVT()
		}
	}
	for _, u := range mu.Unreleased {
		if u.Delete {
			delete(sh.rels, u.UnreleasedKey)
		} else {
			sh.rels[u.UnreleasedKey] = u.Unreleased
		}
	}
	sh.offset = mu.Offset
	return nil
}

func cloneSub(s routersvc.Subscription) routersvc.Subscription {
	s.Options = s.Options.CloneVT()
	s.Route = s.Route.CloneVT()
	return s
}
