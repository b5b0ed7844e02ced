package cqlstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/gocql/gocql"

	routersvc "github.com/shoal-mqtt/shoal/router-svc"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

var _ routersvc.Store = (*Store)(nil)

// The kinds of router_shard rows.
const (
	kindSubscription int8 = 1
	kindRetained     int8 = 2
	kindUnreleased   int8 = 3
)

// loadPageSize is the rows per page when loading a view partition: small
// enough that a page of large retained messages stays a few megabytes.
const loadPageSize = 500

// shardKey is the clustering key of a router_shard row.
type shardKey struct {
	kind       int8
	tenant     string
	k1, k2, k3 string
}

// subscriptionKey returns the row key of a subscription: k1 client, k2
// share group, k3 filter.
func subscriptionKey(k *routersvc.SubscriptionKey) shardKey {
	return shardKey{kind: kindSubscription, tenant: k.Tenant, k1: k.Client, k2: k.ShareGroup, k3: k.Filter}
}

// retainedKey returns the row key of a retained message: k1 topic.
func retainedKey(k *routersvc.RetainedKey) shardKey {
	return shardKey{kind: kindRetained, tenant: k.Tenant, k1: k.Topic}
}

// unreleasedKey returns the row key of a QoS 2 packet identifier not
// released yet: k1 client, k2 the identifier in decimal.
func unreleasedKey(k *routersvc.UnreleasedKey) shardKey {
	return shardKey{kind: kindUnreleased, tenant: k.Tenant, k1: k.Client, k2: strconv.Itoa(int(k.PacketID))}
}

// validUTF8 reports the first key part that is not valid UTF-8, which a
// CQL text column refuses. MQTT strings are UTF-8 (the codec checks), so
// this guards against bugs, before anything is written.
func (k *shardKey) validUTF8() error {
	for _, p := range [...]struct{ name, v string }{{"tenant", k.tenant}, {"k1", k.k1}, {"k2", k.k2}, {"k3", k.k3}} {
		if !utf8.ValidString(p.v) {
			return fmt.Errorf("%s %q is not valid UTF-8", p.name, p.v)
		}
	}
	return nil
}

// subscriptionValue returns the envelope stored for a subscription: the
// SubscriptionChange ADD that makes it, as pebblestore stores it.
func subscriptionValue(s *routersvc.Subscription) *eventspb.Envelope {
	return &eventspb.Envelope{
		Tenant:   s.Tenant,
		ClientId: s.Client,
		Event: &eventspb.Envelope_SubscriptionChange{SubscriptionChange: &eventspb.SubscriptionChange{
			Op:         eventspb.SubscriptionChange_OP_ADD,
			Filter:     s.Filter,
			ShareGroup: s.ShareGroup,
			Options:    s.Options,
			Route:      s.Route,
		}},
	}
}

// decodeSubscription rebuilds a subscription from its row.
func decodeSubscription(k shardKey, value []byte) (routersvc.Subscription, error) {
	env := &eventspb.Envelope{}
	if err := env.UnmarshalVT(value); err != nil {
		return routersvc.Subscription{}, fmt.Errorf("decode: %w", err)
	}
	ch := env.GetSubscriptionChange()
	if ch == nil {
		return routersvc.Subscription{}, errors.New("row without a subscription change")
	}
	return routersvc.Subscription{
		SubscriptionKey: routersvc.SubscriptionKey{Tenant: k.tenant, Client: k.k1, ShareGroup: k.k2, Filter: k.k3},
		Options:         ch.Options,
		Route:           ch.Route,
	}, nil
}

// rowWrite is one statement of an ApplyShard batch.
type rowWrite struct {
	key   shardKey
	value []byte // nil: delete
}

// size estimates the bytes the write adds to a batch and to the mutation:
// key and value, plus the statement's framing and the row's overhead.
func (w *rowWrite) size() int {
	const overhead = 64
	return len(w.key.tenant) + len(w.key.k1) + len(w.key.k2) + len(w.key.k3) + len(w.value) + overhead
}

// maxBatchStatements bounds the statements of one batch (the protocol
// counts them in 16 bits), the offset's update included.
const maxBatchStatements = gocql.BatchSizeMaximum

// chunks splits writes into consecutive runs of at most maxBytes
// (estimated) and maxStmts statements each; a write bigger than maxBytes
// is a run of its own. The last run has room for one more statement (the
// offset's update). No writes: one empty run.
func chunks(writes []rowWrite, maxBytes, maxStmts int) [][]rowWrite {
	var out [][]rowWrite
	start, size := 0, 0
	for i := range writes {
		n := writes[i].size()
		if i > start && (size+n > maxBytes || i-start+1 >= maxStmts) {
			out = append(out, writes[start:i])
			start, size = i, 0
		}
		size += n
	}
	return append(out, writes[start:])
}

// LoadShard implements routersvc.Store: one paged read of the shard's
// partition. The shard has one writer (its router), so the pages are
// consistent with each other and with the offset.
func (s *Store) LoadShard(ctx context.Context, partition int32, l routersvc.ShardLoader) (int64, error) {
	iter := s.session.Query(s.q.shardSelect, partition).WithContext(ctx).PageSize(loadPageSize).Iter()
	offset := int64(-1)
	maxTS := int64(0)
	var (
		kind                *int8
		tenant, k1, k2, k3  *string
		value               []byte
		off, valueTS, offTS *int64
		skipped             int
	)
	for iter.Scan(&kind, &tenant, &k1, &k2, &k3, &value, &off, &valueTS, &offTS) {
		if off != nil {
			offset = *off
		}
		if offTS != nil {
			maxTS = max(maxTS, *offTS)
		}
		if valueTS != nil {
			maxTS = max(maxTS, *valueTS)
		}
		if kind == nil { // the partition's static row: the offset only
			continue
		}
		k := shardKey{kind: *kind, tenant: deref(tenant), k1: deref(k1), k2: deref(k2), k3: deref(k3)}
		var err error
		switch k.kind {
		case kindSubscription:
			var sub routersvc.Subscription
			if sub, err = decodeSubscription(k, value); err != nil {
				err = fmt.Errorf("subscription %q/%q/%q/%q: %w", k.tenant, k.k1, k.k2, k.k3, err)
				break
			}
			err = l.LoadSubscription(sub)
		case kindRetained:
			env := &eventspb.Envelope{}
			if err = env.UnmarshalVT(value); err != nil {
				err = fmt.Errorf("retained %q/%q: decode: %w", k.tenant, k.k1, err)
				break
			}
			err = l.LoadRetained(env)
		case kindUnreleased:
			env := &eventspb.Envelope{}
			if err = env.UnmarshalVT(value); err != nil {
				err = fmt.Errorf("unreleased %q/%q/%q: decode: %w", k.tenant, k.k1, k.k2, err)
				break
			}
			var u routersvc.Unreleased
			if u, err = routersvc.UnreleasedOf(env); err != nil {
				err = fmt.Errorf("unreleased %q/%q/%q: %w", k.tenant, k.k1, k.k2, err)
				break
			}
			err = l.LoadUnreleased(u)
		default:
			skipped++ // a kind of a newer version of Shoal
		}
		if err != nil {
			_ = iter.Close() // the load fails with err anyway
			return 0, fmt.Errorf("load shard %d: %w", partition, err)
		}
	}
	if err := iter.Close(); err != nil {
		return 0, fmt.Errorf("load shard %d: %w", partition, err)
	}
	if skipped > 0 {
		s.log.Warn("rows of unknown kinds skipped (written by a newer version?)", "partition", partition, "rows", skipped)
	}
	s.stamps.observe(stampKey{'r', partition}, maxTS)
	return offset, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// ApplyShards implements routersvc.ShardsApplier: each shard's writes as
// ApplyShard makes them (atomic per shard, one CQL partition each), the
// shards concurrently, so a poll of many shards costs about one round trip.
// It returns every shard's error, joined.
func (s *Store) ApplyShards(ctx context.Context, ms []routersvc.ShardMutations) error {
	if len(ms) == 1 {
		return s.ApplyShard(ctx, ms[0].Partition, ms[0].Mutations)
	}
	errs := make([]error, len(ms))
	var wg sync.WaitGroup
	for i, sm := range ms {
		wg.Go(func() { errs[i] = s.ApplyShard(ctx, sm.Partition, sm.Mutations) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ApplyShard implements routersvc.Store. The shard's rows and its offset
// are one CQL partition, and a batch to one partition is applied
// atomically and in isolation: when the writes fit in cql.max_batch_bytes,
// one unlogged batch writes them and the offset. A bigger m is split into
// several batches with the same timestamp, the offset in the last; see
// the package documentation for why that is safe.
func (s *Store) ApplyShard(ctx context.Context, partition int32, m *routersvc.Mutations) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("apply shard %d: %w", partition, err)
	}
	if err := m.Validate(); err != nil {
		return fmt.Errorf("apply shard %d: %w", partition, err)
	}
	writes, err := shardWrites(m)
	if err != nil {
		return fmt.Errorf("apply shard %d: %w", partition, err)
	}
	k := stampKey{'r', partition}
	if err := s.learnStamp(ctx, k); err != nil {
		return fmt.Errorf("apply shard %d: %w", partition, err)
	}
	ts := s.stamps.next(k)
	runs := chunks(writes, s.cfg.MaxBatchBytes, maxBatchStatements)
	if len(runs) > 1 {
		s.shardSplits.Add(1)
		s.log.Debug("shard batch split", "partition", partition, "writes", len(writes), "batches", len(runs))
	}
	for i, run := range runs {
		b := s.session.Batch(gocql.UnloggedBatch).WithContext(ctx).WithTimestamp(ts)
		for j := range run {
			w := &run[j]
			if w.value == nil {
				b.Query(s.q.shardDelete, partition, w.key.kind, w.key.tenant, w.key.k1, w.key.k2, w.key.k3)
			} else {
				b.Query(s.q.shardUpsert, partition, w.key.kind, w.key.tenant, w.key.k1, w.key.k2, w.key.k3, w.value)
			}
		}
		if i == len(runs)-1 {
			b.Query(s.q.shardOffset, m.Offset, partition)
		}
		if err := s.session.ExecuteBatch(b); err != nil {
			return fmt.Errorf("apply shard %d at offset %d: batch %d of %d (%d writes): %w", partition, m.Offset, i+1, len(runs), len(run), err)
		}
		s.shardBatches.Add(1)
	}
	return nil
}

// shardWrites encodes m's writes: keys checked, values marshalled into one
// buffer (the writes own it: the store keeps nothing of m).
func shardWrites(m *routersvc.Mutations) ([]rowWrite, error) {
	writes := make([]rowWrite, 0, m.Len())
	envs := make([]*eventspb.Envelope, 0, m.Len())
	total := 0
	for i := range m.Subscriptions {
		sm := &m.Subscriptions[i]
		var env *eventspb.Envelope
		if !sm.Delete {
			env = subscriptionValue(&sm.Subscription)
			total += env.SizeVT()
		}
		writes = append(writes, rowWrite{key: subscriptionKey(&sm.SubscriptionKey)})
		envs = append(envs, env)
	}
	for i := range m.Retained {
		rm := &m.Retained[i]
		if rm.Publish != nil {
			total += rm.Publish.SizeVT()
		}
		writes = append(writes, rowWrite{key: retainedKey(&rm.Key)})
		envs = append(envs, rm.Publish)
	}
	for i := range m.Unreleased {
		um := &m.Unreleased[i]
		var env *eventspb.Envelope
		if !um.Delete {
			env = um.Envelope()
			total += env.SizeVT()
		}
		writes = append(writes, rowWrite{key: unreleasedKey(&um.UnreleasedKey)})
		envs = append(envs, env)
	}
	buf := make([]byte, total) // never nil: a nil value would be a null
	for i := range writes {
		if err := writes[i].key.validUTF8(); err != nil {
			return nil, err
		}
		env := envs[i]
		if env == nil {
			continue
		}
		n := env.SizeVT()
		v := buf[:n:n]
		buf = buf[n:]
		if _, err := env.MarshalToSizedBufferVT(v); err != nil {
			return nil, fmt.Errorf("marshal %q: %w", writes[i].key.k1, err)
		}
		writes[i].value = v
	}
	return writes, nil
}
