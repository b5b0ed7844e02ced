package storetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	routersvc "github.com/shoal-mqtt/shoal/router-svc"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// Harness opens the store under test.
type Harness struct {
	// Open returns a store on fresh, empty state. The harness cleans it
	// up (t.Cleanup).
	Open func(t *testing.T) routersvc.Store
	// Reopen closes s and returns a store on the same durable state, as a
	// process restart would. Nil skips the tests that need it.
	Reopen func(t *testing.T, s routersvc.Store) routersvc.Store
}

// Run runs the conformance suite against h.
func Run(t *testing.T, h Harness) {
	t.Run("EmptyShard", func(t *testing.T) { testEmpty(t, h) })
	t.Run("RoundTrip", func(t *testing.T) { testRoundTrip(t, h) })
	t.Run("OverwriteAndDelete", func(t *testing.T) { testOverwrite(t, h) })
	t.Run("OffsetOnly", func(t *testing.T) { testOffsetOnly(t, h) })
	t.Run("KeysDoNotCollide", func(t *testing.T) { testKeys(t, h) })
	t.Run("PartitionsAreIndependent", func(t *testing.T) { testPartitions(t, h) })
	t.Run("BadBatchWritesNothing", func(t *testing.T) { testAtomic(t, h) })
	t.Run("SeveralShardsAtOnce", func(t *testing.T) { testApplyShards(t, h) })
	t.Run("Idempotent", func(t *testing.T) { testIdempotent(t, h) })
	t.Run("LargeBatch", func(t *testing.T) { testLarge(t, h) })
	t.Run("LoaderErrorStopsLoad", func(t *testing.T) { testLoaderError(t, h) })
	t.Run("StoreKeepsNoReferences", func(t *testing.T) { testNoAlias(t, h) })
	t.Run("UnreleasedPacketIDs", func(t *testing.T) { testUnreleased(t, h) })
	if h.Reopen != nil {
		t.Run("ReopenKeepsEverything", func(t *testing.T) { testReopen(t, h) })
	}
}

// Snapshot is a shard's stored state collected by Load, sorted by key.
type Snapshot struct {
	Offset        int64
	Subscriptions []routersvc.Subscription
	Retained      []*eventspb.Envelope
	Unreleased    []routersvc.Unreleased
}

// collector implements routersvc.ShardLoader.
type collector struct {
	snap *Snapshot
}

func (c collector) LoadSubscription(s routersvc.Subscription) error {
	c.snap.Subscriptions = append(c.snap.Subscriptions, s)
	return nil
}

func (c collector) LoadRetained(e *eventspb.Envelope) error {
	c.snap.Retained = append(c.snap.Retained, e)
	return nil
}

func (c collector) LoadUnreleased(u routersvc.Unreleased) error {
	c.snap.Unreleased = append(c.snap.Unreleased, u)
	return nil
}

// Load returns the stored state of partition, sorted by key.
func Load(ctx context.Context, s routersvc.Store, partition int32) (Snapshot, error) {
	var snap Snapshot
	off, err := s.LoadShard(ctx, partition, collector{&snap})
	if err != nil {
		return Snapshot{}, err
	}
	snap.Offset = off
	slices.SortFunc(snap.Subscriptions, func(a, b routersvc.Subscription) int { return compareSubKey(a.SubscriptionKey, b.SubscriptionKey) })
	slices.SortFunc(snap.Retained, func(a, b *eventspb.Envelope) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.GetPublish().GetMessage().GetTopic(), b.GetPublish().GetMessage().GetTopic()))
	})
	slices.SortFunc(snap.Unreleased, compareUnreleased)
	return snap, nil
}

func compareUnreleased(a, b routersvc.Unreleased) int {
	return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Client, b.Client), cmp.Compare(a.PacketID, b.PacketID))
}

func compareSubKey(a, b routersvc.SubscriptionKey) int {
	return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Client, b.Client),
		cmp.Compare(a.ShareGroup, b.ShareGroup), cmp.Compare(a.Filter, b.Filter))
}

func mustLoad(t *testing.T, s routersvc.Store, partition int32) Snapshot {
	t.Helper()
	snap, err := Load(t.Context(), s, partition)
	if err != nil {
		t.Fatalf("LoadShard(%d): %v", partition, err)
	}
	return snap
}

func mustApply(t *testing.T, s routersvc.Store, partition int32, m *routersvc.Mutations) {
	t.Helper()
	if err := s.ApplyShard(t.Context(), partition, m); err != nil {
		t.Fatalf("ApplyShard(%d): %v", partition, err)
	}
}

// want compares got with the state described by subs and rets (any order).
func want(t *testing.T, got Snapshot, offset int64, subs []routersvc.Subscription, rets []*eventspb.Envelope) {
	t.Helper()
	exp := Snapshot{Offset: offset, Subscriptions: slices.Clone(subs), Retained: slices.Clone(rets)}
	slices.SortFunc(exp.Subscriptions, func(a, b routersvc.Subscription) int { return compareSubKey(a.SubscriptionKey, b.SubscriptionKey) })
	slices.SortFunc(exp.Retained, func(a, b *eventspb.Envelope) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.GetPublish().GetMessage().GetTopic(), b.GetPublish().GetMessage().GetTopic()))
	})
	if got.Offset != exp.Offset {
		t.Errorf("offset: got %d, want %d", got.Offset, exp.Offset)
	}
	// EqualVT, not reflection: the large tests compare thousands of rows.
	if len(got.Subscriptions) != len(exp.Subscriptions) {
		t.Errorf("got %d subscriptions, want %d", len(got.Subscriptions), len(exp.Subscriptions))
	}
	for i := range min(len(got.Subscriptions), len(exp.Subscriptions)) {
		g, w := got.Subscriptions[i], exp.Subscriptions[i]
		if g.SubscriptionKey != w.SubscriptionKey || !g.Options.EqualVT(w.Options) || !g.Route.EqualVT(w.Route) {
			t.Fatalf("subscription %d (-want +got):\n%s", i, gocmp.Diff(w, g, protocmp.Transform()))
		}
	}
	if len(got.Retained) != len(exp.Retained) {
		t.Errorf("got %d retained messages, want %d", len(got.Retained), len(exp.Retained))
	}
	for i := range min(len(got.Retained), len(exp.Retained)) {
		if g, w := got.Retained[i], exp.Retained[i]; !g.EqualVT(w) {
			t.Fatalf("retained %d (-want +got):\n%s", i, gocmp.Diff(w, g, protocmp.Transform()))
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// Sub returns a stored subscription for tests.
func Sub(tenant, client, group, filter string, qos uint32, gen uint64) routersvc.Subscription {
	return routersvc.Subscription{
		SubscriptionKey: routersvc.SubscriptionKey{Tenant: tenant, Client: client, ShareGroup: group, Filter: filter},
		Options:         &eventspb.SubscriptionOptions{Qos: qos, NoLocal: qos == 1, RetainAsPublished: qos == 2, RetainHandling: qos % 3, SubscriptionId: uint32(gen) + 7},
		Route:           &eventspb.Route{Slot: int32(gen % 5), Connection: gen*100 + 1, Generation: gen},
	}
}

// Retained returns a retained publish envelope for tests.
func Retained(tenant, topic, payload string) *eventspb.Envelope {
	return &eventspb.Envelope{
		SchemaVersion: 1,
		Tenant:        tenant,
		ClientId:      "publisher",
		TimestampUs:   1_700_000_000_000_000,
		MessageId:     &eventspb.MessageID{GatewayEpoch: 42, Seq: uint64(len(payload))},
		Event: &eventspb.Envelope_Publish{Publish: &eventspb.Publish{
			Connection: 9,
			Message: &eventspb.Message{
				Topic: topic, Payload: []byte(payload), Qos: 1, Retain: true, PayloadUtf8: true,
				ExpiresAtMs: 1_800_000_000_000, ContentType: "text/plain", ResponseTopic: "r/" + topic,
				CorrelationData: []byte{0, 1, 2}, HasExpiry: true,
				UserProperties: []*eventspb.UserProperty{{Key: "k", Value: "v"}, {Key: "k", Value: "w"}},
			},
		}},
	}
}

func putSubs(m *routersvc.Mutations, subs ...routersvc.Subscription) {
	for _, s := range subs {
		m.Subscriptions = append(m.Subscriptions, routersvc.SubscriptionMutation{Subscription: s})
	}
}

func delSubs(m *routersvc.Mutations, subs ...routersvc.Subscription) {
	for _, s := range subs {
		m.Subscriptions = append(m.Subscriptions, routersvc.SubscriptionMutation{Subscription: routersvc.Subscription{SubscriptionKey: s.SubscriptionKey}, Delete: true})
	}
}

func putRets(m *routersvc.Mutations, rets ...*eventspb.Envelope) {
	for _, r := range rets {
		m.Retained = append(m.Retained, routersvc.RetainedMutation{Key: keyOf(r), Publish: r})
	}
}

func delRets(m *routersvc.Mutations, rets ...*eventspb.Envelope) {
	for _, r := range rets {
		m.Retained = append(m.Retained, routersvc.RetainedMutation{Key: keyOf(r)})
	}
}

func keyOf(r *eventspb.Envelope) routersvc.RetainedKey {
	return routersvc.RetainedKey{Tenant: r.Tenant, Topic: r.GetPublish().GetMessage().GetTopic()}
}

func testEmpty(t *testing.T, h Harness) {
	s := h.Open(t)
	want(t, mustLoad(t, s, 0), -1, nil, nil)
	want(t, mustLoad(t, s, 7), -1, nil, nil)
}

func testRoundTrip(t *testing.T, h Harness) {
	s := h.Open(t)
	subs := []routersvc.Subscription{
		Sub("", "c1", "", "a/b", 0, 1),
		Sub("", "c1", "", "a/+", 1, 2),
		Sub("", "c1", "g", "a/+", 2, 3),
		Sub("t1", "c2", "", "#", 2, 1<<40),
		Sub("t1", "c3", "", "$SYS/#", 1, 5),
	}
	rets := []*eventspb.Envelope{Retained("", "a/b", "x"), Retained("t1", "a/b", "yy"), Retained("t1", "/", "")}
	m := &routersvc.Mutations{Offset: 41}
	putSubs(m, subs...)
	putRets(m, rets...)
	mustApply(t, s, 3, m)
	want(t, mustLoad(t, s, 3), 41, subs, rets)
	want(t, mustLoad(t, s, 2), -1, nil, nil)
}

func testOverwrite(t *testing.T, h Harness) {
	s := h.Open(t)
	a, b := Sub("t", "c", "", "a", 1, 1), Sub("t", "c", "", "b", 1, 1)
	ra, rb := Retained("t", "a", "1"), Retained("t", "b", "1")
	m := &routersvc.Mutations{Offset: 1}
	putSubs(m, a, b)
	putRets(m, ra, rb)
	mustApply(t, s, 0, m)

	a2 := Sub("t", "c", "", "a", 2, 9)
	ra2 := Retained("t", "a", "22")
	m = &routersvc.Mutations{Offset: 2}
	putSubs(m, a2)
	delSubs(m, b)
	putRets(m, ra2)
	delRets(m, rb)
	mustApply(t, s, 0, m)
	want(t, mustLoad(t, s, 0), 2, []routersvc.Subscription{a2}, []*eventspb.Envelope{ra2})

	// Deleting what is not stored is not an error.
	m = &routersvc.Mutations{Offset: 3}
	delSubs(m, b, Sub("other", "x", "g", "f", 0, 0))
	delRets(m, rb)
	mustApply(t, s, 0, m)
	want(t, mustLoad(t, s, 0), 3, []routersvc.Subscription{a2}, []*eventspb.Envelope{ra2})
}

func testOffsetOnly(t *testing.T, h Harness) {
	s := h.Open(t)
	sub := Sub("t", "c", "", "a", 1, 1)
	m := &routersvc.Mutations{Offset: 10}
	putSubs(m, sub)
	mustApply(t, s, 1, m)
	for _, off := range []int64{11, 12, 1 << 50} {
		mustApply(t, s, 1, &routersvc.Mutations{Offset: off})
		want(t, mustLoad(t, s, 1), off, []routersvc.Subscription{sub}, nil)
	}
}

// testKeys stores keys that a careless encoding (joining with a separator,
// prefixes without lengths) would confuse.
func testKeys(t *testing.T, h Harness) {
	s := h.Open(t)
	subs := []routersvc.Subscription{
		Sub("a", "b/c", "", "x", 1, 1),
		Sub("a/b", "c", "", "x", 1, 2),
		Sub("a", "b", "", "c/x", 1, 3),
		Sub("a", "b", "c", "x", 1, 4),
		Sub("a", "bc", "", "x", 1, 5),
		Sub("ab", "c", "", "x", 1, 6),
		Sub("", "ab", "", "x", 1, 7),
		Sub("a\x00", "b", "", "x", 1, 8),
		Sub("a", "\x00b", "", "x", 1, 9),
		Sub("a", "b", "", "x/#", 1, 10),
		Sub("a", "b", "", "x", 1, 11),
		Sub("a", "b", "x", "x", 1, 12),
		Sub("é", "ü/", "g", "+/+", 1, 13),
	}
	rets := []*eventspb.Envelope{
		Retained("a", "b/c", "1"), Retained("a/b", "c", "2"), Retained("ab", "c", "3"),
		Retained("", "ab/c", "4"), Retained("a\x00", "b", "5"), Retained("a", "\x00b", "6"),
	}
	m := &routersvc.Mutations{Offset: 5}
	putSubs(m, subs...)
	putRets(m, rets...)
	mustApply(t, s, 0, m)
	want(t, mustLoad(t, s, 0), 5, subs, rets)

	// Deleting one key deletes exactly that one.
	m = &routersvc.Mutations{Offset: 6}
	delSubs(m, subs[0])
	delRets(m, rets[0])
	mustApply(t, s, 0, m)
	want(t, mustLoad(t, s, 0), 6, subs[1:], rets[1:])
}

func testPartitions(t *testing.T, h Harness) {
	s := h.Open(t)
	var all [][]routersvc.Subscription
	for p := range int32(4) {
		sub := Sub("t", "c", "", fmt.Sprintf("p%d", p), 1, uint64(p))
		all = append(all, []routersvc.Subscription{sub})
		m := &routersvc.Mutations{Offset: int64(100 + p)}
		putSubs(m, sub)
		if p%2 == 0 {
			putRets(m, Retained("t", fmt.Sprintf("p%d", p), "x"))
		}
		mustApply(t, s, p, m)
	}
	// Also partitions whose numbers share leading bytes.
	for _, p := range []int32{256, 65536} {
		mustApply(t, s, p, &routersvc.Mutations{Offset: int64(p)})
	}
	for p := range int32(4) {
		var rets []*eventspb.Envelope
		if p%2 == 0 {
			rets = append(rets, Retained("t", fmt.Sprintf("p%d", p), "x"))
		}
		want(t, mustLoad(t, s, p), int64(100+p), all[p], rets)
	}
	want(t, mustLoad(t, s, 256), 256, nil, nil)
	want(t, mustLoad(t, s, 65536), 65536, nil, nil)
}

// testApplyShards writes several shards with one ApplyShards call, when
// the store offers it, then once more (a retry), and reads each back.
func testApplyShards(t *testing.T, h Harness) {
	s := h.Open(t)
	sa, ok := s.(routersvc.ShardsApplier)
	if !ok {
		t.Skip("the store does not implement routersvc.ShardsApplier")
	}
	parts := []int32{0, 5, 9}
	var ms []routersvc.ShardMutations
	for i, p := range parts {
		m := &routersvc.Mutations{Offset: int64(10 * (i + 1))}
		putSubs(m, Sub("t", "c", "", fmt.Sprintf("f%d", p), 1, uint64(i)))
		putRets(m, Retained("t", fmt.Sprintf("r%d", p), "v"))
		ms = append(ms, routersvc.ShardMutations{Partition: p, Mutations: m})
	}
	ctx := context.Background()
	for range 2 {
		if err := sa.ApplyShards(ctx, ms); err != nil {
			t.Fatalf("ApplyShards: %v", err)
		}
	}
	for i, p := range parts {
		want(t, mustLoad(t, s, p), int64(10*(i+1)),
			[]routersvc.Subscription{Sub("t", "c", "", fmt.Sprintf("f%d", p), 1, uint64(i))},
			[]*eventspb.Envelope{Retained("t", fmt.Sprintf("r%d", p), "v")})
	}
	want(t, mustLoad(t, s, 1), -1, nil, nil)
	// A bad shard among good ones: the call fails and the bad shard
	// writes nothing.
	bad := &routersvc.Mutations{Offset: 99}
	bad.Subscriptions = append(bad.Subscriptions, routersvc.SubscriptionMutation{Subscription: routersvc.Subscription{
		SubscriptionKey: routersvc.SubscriptionKey{Tenant: "t", Client: "c", Filter: "x"},
	}})
	if err := sa.ApplyShards(ctx, []routersvc.ShardMutations{{Partition: 3, Mutations: bad}}); err == nil {
		t.Fatal("ApplyShards of a subscription without options or route succeeded")
	}
	want(t, mustLoad(t, s, 3), -1, nil, nil)
}

func testAtomic(t *testing.T, h Harness) {
	s := h.Open(t)
	good := Sub("t", "c", "", "a", 1, 1)
	m := &routersvc.Mutations{Offset: 1}
	putSubs(m, good)
	mustApply(t, s, 0, m)

	bad := []struct {
		name string
		m    func() *routersvc.Mutations
	}{
		{"subscription without route", func() *routersvc.Mutations {
			m := &routersvc.Mutations{Offset: 2}
			sub := Sub("t", "c", "", "b", 1, 2)
			sub.Route = nil
			putSubs(m, Sub("t", "c", "", "z", 1, 2), sub)
			delSubs(m, good)
			return m
		}},
		{"subscription without options", func() *routersvc.Mutations {
			m := &routersvc.Mutations{Offset: 2}
			sub := Sub("t", "c", "", "b", 1, 2)
			sub.Options = nil
			delSubs(m, good)
			putSubs(m, sub)
			return m
		}},
		{"retained without publish", func() *routersvc.Mutations {
			m := &routersvc.Mutations{Offset: 2}
			putRets(m, Retained("t", "ok", "1"))
			m.Retained = append(m.Retained, routersvc.RetainedMutation{Key: routersvc.RetainedKey{Tenant: "t", Topic: "x"}, Publish: &eventspb.Envelope{Tenant: "t"}})
			delSubs(m, good)
			return m
		}},
		{"retained under another key", func() *routersvc.Mutations {
			m := &routersvc.Mutations{Offset: 2}
			m.Retained = append(m.Retained, routersvc.RetainedMutation{Key: routersvc.RetainedKey{Tenant: "t", Topic: "x"}, Publish: Retained("t", "y", "1")})
			return m
		}},
		{"packet identifier without client", func() *routersvc.Mutations {
			m := &routersvc.Mutations{Offset: 2}
			putRels(m, Rel("t", "c", 1, 1), Rel("t", "", 2, 1))
			delSubs(m, good)
			return m
		}},
		{"packet identifier 0", func() *routersvc.Mutations {
			m := &routersvc.Mutations{Offset: 2}
			putRels(m, Rel("t", "c", 0, 1))
			return m
		}},
	}
	for _, tc := range bad {
		if err := s.ApplyShard(t.Context(), 0, tc.m()); err == nil {
			t.Errorf("%s: ApplyShard succeeded", tc.name)
		}
		want(t, mustLoad(t, s, 0), 1, []routersvc.Subscription{good}, nil)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	m = &routersvc.Mutations{Offset: 2}
	delSubs(m, good)
	if err := s.ApplyShard(ctx, 0, m); !errors.Is(err, context.Canceled) {
		t.Errorf("ApplyShard with a canceled context: got %v, want context.Canceled", err)
	}
	want(t, mustLoad(t, s, 0), 1, []routersvc.Subscription{good}, nil)
}

func testIdempotent(t *testing.T, h Harness) {
	s := h.Open(t)
	a, b := Sub("t", "c", "", "a", 1, 1), Sub("t", "c", "", "b", 1, 1)
	r := Retained("t", "a", "1")
	m := &routersvc.Mutations{Offset: 7}
	putSubs(m, a)
	delSubs(m, b)
	putRets(m, r)
	mustApply(t, s, 0, m)
	mustApply(t, s, 0, m)
	want(t, mustLoad(t, s, 0), 7, []routersvc.Subscription{a}, []*eventspb.Envelope{r})
}

func testLarge(t *testing.T, h Harness) {
	s := h.Open(t)
	const n = 5000
	subs := make([]routersvc.Subscription, 0, n)
	rets := make([]*eventspb.Envelope, 0, n/10)
	m := &routersvc.Mutations{Offset: n}
	for i := range n {
		subs = append(subs, Sub(fmt.Sprintf("t%d", i%7), fmt.Sprintf("client-%d", i), "", fmt.Sprintf("a/%d/#", i%100), uint32(i%3), uint64(i)))
		if i%10 == 0 {
			rets = append(rets, Retained(fmt.Sprintf("t%d", i%7), fmt.Sprintf("a/%d", i), "payload"))
		}
	}
	putSubs(m, subs...)
	putRets(m, rets...)
	mustApply(t, s, 2, m)
	want(t, mustLoad(t, s, 2), n, subs, rets)
}

type failingLoader struct {
	err   error
	calls int
}

func (f *failingLoader) LoadSubscription(routersvc.Subscription) error {
	f.calls++
	return f.err
}

func (f *failingLoader) LoadRetained(*eventspb.Envelope) error {
	f.calls++
	return f.err
}

func (f *failingLoader) LoadUnreleased(routersvc.Unreleased) error {
	f.calls++
	return f.err
}

func testLoaderError(t *testing.T, h Harness) {
	s := h.Open(t)
	m := &routersvc.Mutations{Offset: 3}
	putSubs(m, Sub("t", "c", "", "a", 1, 1), Sub("t", "c", "", "b", 1, 1))
	putRets(m, Retained("t", "a", "1"))
	putRels(m, Rel("t", "c", 1, 1), Rel("t", "c", 2, 1))
	mustApply(t, s, 0, m)
	f := &failingLoader{err: errors.New("loader refuses")}
	if _, err := s.LoadShard(t.Context(), 0, f); !errors.Is(err, f.err) {
		t.Fatalf("LoadShard with a failing loader: got %v, want it wrapped", err)
	}
	if f.calls != 1 {
		t.Errorf("loader called %d times after its error, want 1", f.calls)
	}
}

// testNoAlias checks that the store copies what it is given: the router
// reuses its mutation buffers.
func testNoAlias(t *testing.T, h Harness) {
	s := h.Open(t)
	sub := Sub("t", "c", "", "a", 1, 1)
	r := Retained("t", "a", "payload")
	m := &routersvc.Mutations{Offset: 1}
	putSubs(m, sub)
	putRets(m, r)
	mustApply(t, s, 0, m)
	wantSub, wantRet := Sub("t", "c", "", "a", 1, 1), Retained("t", "a", "payload")
	sub.Options.Qos = 0
	sub.Route.Slot = 99
	r.GetPublish().GetMessage().Payload[0] = 'X'
	r.GetPublish().GetMessage().Topic = "b"
	want(t, mustLoad(t, s, 0), 1, []routersvc.Subscription{wantSub}, []*eventspb.Envelope{wantRet})
}

func testReopen(t *testing.T, h Harness) {
	s := h.Open(t)
	subs := []routersvc.Subscription{Sub("", "c1", "", "a/b", 0, 1), Sub("t", "c2", "g", "#", 2, 2)}
	rets := []*eventspb.Envelope{Retained("", "a/b", "x"), Retained("t", "q", "y")}
	m := &routersvc.Mutations{Offset: 12}
	putSubs(m, subs...)
	putRets(m, rets...)
	mustApply(t, s, 4, m)
	mustApply(t, s, 5, &routersvc.Mutations{Offset: 99})
	s = h.Reopen(t, s)
	want(t, mustLoad(t, s, 4), 12, subs, rets)
	want(t, mustLoad(t, s, 5), 99, nil, nil)
	// And it keeps working after the reopen.
	m = &routersvc.Mutations{Offset: 13}
	delSubs(m, subs[0])
	mustApply(t, s, 4, m)
	s = h.Reopen(t, s)
	want(t, mustLoad(t, s, 4), 13, subs[1:], rets)
}

// Rel returns a kept packet identifier for tests.
func Rel(tenant, client string, id uint16, sessionGen uint64) routersvc.Unreleased {
	return routersvc.Unreleased{
		UnreleasedKey:     routersvc.UnreleasedKey{Tenant: tenant, Client: client, PacketID: id},
		SessionGeneration: sessionGen,
	}
}

func putRels(m *routersvc.Mutations, rels ...routersvc.Unreleased) {
	for _, u := range rels {
		m.Unreleased = append(m.Unreleased, routersvc.UnreleasedMutation{Unreleased: u})
	}
}

func delRels(m *routersvc.Mutations, rels ...routersvc.Unreleased) {
	for _, u := range rels {
		m.Unreleased = append(m.Unreleased, routersvc.UnreleasedMutation{Unreleased: routersvc.Unreleased{UnreleasedKey: u.UnreleasedKey}, Delete: true})
	}
}

func wantRels(t *testing.T, got Snapshot, rels ...routersvc.Unreleased) {
	t.Helper()
	exp := slices.Clone(rels)
	slices.SortFunc(exp, compareUnreleased)
	if diff := gocmp.Diff(exp, got.Unreleased); diff != "" {
		t.Fatalf("unreleased packet identifiers (-want +got):\n%s", diff)
	}
}

// testUnreleased stores, overwrites and deletes the packet identifiers of
// QoS 2 messages not released yet, beside subscriptions and retained
// messages, with keys a careless encoding would confuse, and reads them
// back after a reopen.
func testUnreleased(t *testing.T, h Harness) {
	s := h.Open(t)
	sub := Sub("t", "c", "", "a", 1, 1)
	ret := Retained("t", "a", "1")
	rels := []routersvc.Unreleased{
		Rel("t", "c", 1, 1), Rel("t", "c", 65535, 1<<40), Rel("t", "c2", 1, 3),
		Rel("", "c", 1, 0), Rel("t/c", "x", 1, 4), Rel("t", "c/x", 1, 5), Rel("tc", "x", 1, 8),
		Rel("é", "\x00", 256, 6), Rel("t", "c", 256, 7),
	}
	m := &routersvc.Mutations{Offset: 5}
	putSubs(m, sub)
	putRets(m, ret)
	putRels(m, rels...)
	mustApply(t, s, 1, m)
	got := mustLoad(t, s, 1)
	want(t, got, 5, []routersvc.Subscription{sub}, []*eventspb.Envelope{ret})
	wantRels(t, got, rels...)
	wantRels(t, mustLoad(t, s, 0))

	// Overwrite one (a newer session), delete two, delete one not stored.
	m = &routersvc.Mutations{Offset: 6}
	putRels(m, Rel("t", "c", 1, 9))
	delRels(m, rels[1], rels[2], Rel("t", "zz", 3, 0))
	mustApply(t, s, 1, m)
	left := append([]routersvc.Unreleased{Rel("t", "c", 1, 9)}, rels[3:]...)
	wantRels(t, mustLoad(t, s, 1), left...)

	if h.Reopen != nil {
		s = h.Reopen(t, s)
		got := mustLoad(t, s, 1)
		want(t, got, 6, []routersvc.Subscription{sub}, []*eventspb.Envelope{ret})
		wantRels(t, got, left...)
	}
}
