package routersvc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/shoal-mqtt/shoal/internal/mqtt/topic"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// ErrNoRetained: the tenant has no retained message on the topic.
var ErrNoRetained = errors.New("no retained message")

// Query selects what an operator inspects (shoal ctl, through the admin
// API that compose/admin serves): one tenant's state, or every tenant's
// with AllTenants.
type Query struct {
	Tenant     string
	AllTenants bool
	// Filter, when set, keeps the subscriptions whose filter is Filter and
	// the retained messages whose topic Filter matches.
	Filter string
	// Client, when set, keeps the subscriptions of that client.
	Client string
}

func (q Query) tenant(t string) bool { return q.AllTenants || t == q.Tenant }

// Subscriptions returns the subscriptions q selects, one per key (a
// wildcard subscription is stored in every shard), sorted by tenant,
// client, filter and share group. They are read from the view store, for
// every partition of shoal.messages whichever instance owns it: the
// store's state after the last stored poll (within router.offset_interval
// of the log for records that change no state), never the shards' memory,
// which only their goroutine touches. The cost is a scan of the stored
// shards: an operator's tool, not a hot path.
func (r *Router) Subscriptions(ctx context.Context, q Query) ([]Subscription, error) {
	seen := make(map[SubscriptionKey]int)
	var subs []Subscription
	l := &inspectLoader{sub: func(s Subscription) {
		if !q.tenant(s.Tenant) || (q.Filter != "" && s.Filter != q.Filter) || (q.Client != "" && s.Client != q.Client) {
			return
		}
		if i, dup := seen[s.SubscriptionKey]; dup {
			if s.Route.GetGeneration() > subs[i].Route.GetGeneration() {
				subs[i] = s
			}
			return
		}
		seen[s.SubscriptionKey] = len(subs)
		subs = append(subs, s)
	}}
	for p := range r.topics.Messages.Partitions {
		if _, err := r.store.LoadShard(ctx, p, l); err != nil {
			return nil, fmt.Errorf("read subscriptions of shard %d: %w", p, err)
		}
	}
	slices.SortFunc(subs, func(a, b Subscription) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Client, b.Client),
			cmp.Compare(a.Filter, b.Filter), cmp.Compare(a.ShareGroup, b.ShareGroup))
	})
	return subs, nil
}

// Retained returns the Publish envelopes of the retained messages q
// selects (Client is ignored), sorted by tenant and topic, read from the
// view store as Subscriptions reads; expired ones the shard has not
// removed yet are left out.
func (r *Router) Retained(ctx context.Context, q Query) ([]*eventspb.Envelope, error) {
	nowMs := r.clock().UnixMilli()
	var out []*eventspb.Envelope
	l := &inspectLoader{ret: func(env *eventspb.Envelope) {
		msg := env.GetPublish().GetMessage()
		if !q.tenant(env.GetTenant()) || (q.Filter != "" && !topic.Match(q.Filter, msg.GetTopic())) {
			return
		}
		if msg.GetExpiresAtMs() != 0 && msg.GetExpiresAtMs() < nowMs {
			return
		}
		out = append(out, env)
	}}
	for p := range r.topics.Messages.Partitions {
		if _, err := r.store.LoadShard(ctx, p, l); err != nil {
			return nil, fmt.Errorf("read retained messages of shard %d: %w", p, err)
		}
	}
	slices.SortFunc(out, func(a, b *eventspb.Envelope) int {
		return cmp.Or(cmp.Compare(a.GetTenant(), b.GetTenant()),
			cmp.Compare(a.GetPublish().GetMessage().GetTopic(), b.GetPublish().GetMessage().GetTopic()))
	})
	return out, nil
}

// DeleteRetained deletes a tenant's retained message through the log:
// once the view store holds one on the topic (ErrNoRetained otherwise),
// it writes to the topic's partition of shoal.messages a retained Publish
// with an empty payload, which deletes it as MQTT says, and which has
// expired already (expires_at_ms 1), so that the shard, which delivers no
// expired message, sends it to no subscriber. It returns once the record
// is durably in the log; the shard applies it within a consume round trip.
func (r *Router) DeleteRetained(ctx context.Context, tenant, name string) error {
	if err := topic.ValidateName(name); err != nil {
		return fmt.Errorf("delete retained: %w", err)
	}
	key := kafka.Key(tenant, name)
	found := false
	l := &inspectLoader{ret: func(env *eventspb.Envelope) {
		found = found || (env.GetTenant() == tenant && env.GetPublish().GetMessage().GetTopic() == name)
	}}
	if _, err := r.store.LoadShard(ctx, kafka.PartitionForKey(key, r.topics.Messages.Partitions), l); err != nil {
		return fmt.Errorf("read retained message: %w", err)
	}
	if !found {
		return ErrNoRetained
	}
	env := &eventspb.Envelope{
		Tenant:      tenant,
		TimestampUs: r.clock().UnixMicro(),
		Event: &eventspb.Envelope_Publish{Publish: &eventspb.Publish{Message: &eventspb.Message{
			Topic: name, Retain: true, HasExpiry: true, ExpiresAtMs: 1,
		}}},
	}
	if err := r.client.ProduceSync(ctx, kafka.NewRecord(r.topics.Messages.Name, key, kafka.PartitionByKey, env)); err != nil {
		return fmt.Errorf("write retained deletion: %w", err)
	}
	r.log.Info("retained message deleted by an operator", "tenant", tenant, "topic", name)
	return nil
}

// inspectLoader collects what a Store.LoadShard streams.
type inspectLoader struct {
	sub func(Subscription)
	ret func(*eventspb.Envelope)
}

func (l *inspectLoader) LoadSubscription(s Subscription) error {
	if l.sub != nil {
		l.sub(s)
	}
	return nil
}

func (l *inspectLoader) LoadRetained(env *eventspb.Envelope) error {
	if l.ret != nil && env.GetPublish().GetMessage() != nil {
		l.ret(env)
	}
	return nil
}

func (l *inspectLoader) LoadUnreleased(Unreleased) error { return nil }
