package routersvc_test

import (
	"fmt"
	"testing"
	"time"

	routersvc "github.com/shoal-mqtt/shoal/router-svc"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// TestShardRestart applies records, stores each step's mutations, rebuilds
// a shard from the store and checks that both shards then behave alike.
func TestShardRestart(t *testing.T) {
	far := t0.Add(time.Hour).UnixMilli()
	steps := []step{
		{rec: add("", "c1", "a/b", qos(1), id(1))},
		{rec: add("", "c1", "a/#", qos(2), id(2), rap(), gen(2), slot(3))},
		{rec: add("", "c2", "+/b", noLocal())},
		{rec: add("", "c3", "$SYS/#", qos(0))},
		{rec: add("", "c4", "a/b", group("solo"))},
		{rec: add("", "gone", "#")},
		{rec: removeAll("", "gone", 1)},
		{rec: add("", "c5", "x/#")},
		{rec: remove("", "c5", "x/#")},
		{rec: add("t2", "c1", "#", slot(7))},
		{rec: add("t2", "c9", "a/+", rh(1))},
		{rec: pub("", "p", "a/b", retain(), payload("r1"), expires(far))},
		{rec: pub("", "p", "a/c", retain(), payload("r2"))},
		{rec: pub("", "p", "a/c", retain(), payload("r2b"), pqos(1))},
		{rec: pub("", "p", "$SYS/load", retain(), payload("r3"))},
		{rec: pub("", "p", "a/d", retain(), payload("r4"))},
		{rec: pub("", "p", "a/d", retain(), noPayload())},
		{rec: pub("t2", "p", "a/b", retain(), payload("t2r"))},
	}
	// Deliveries are not the subject here: TestShard checks them.
	a, st := applySteps(t, steps, false)

	b, err := routersvc.OpenShard(t.Context(), st, 0, routersvc.NewPresence(), func() time.Time { return t0 })
	if err != nil {
		t.Fatal(err)
	}
	if b.Offset() != a.Offset() || b.Subscriptions() != a.Subscriptions() || b.RetainedCount() != a.RetainedCount() {
		t.Fatalf("rebuilt shard: offset %d, %d subscriptions, %d retained; want %d, %d, %d",
			b.Offset(), b.Subscriptions(), b.RetainedCount(), a.Offset(), a.Subscriptions(), a.RetainedCount())
	}
	if a.Subscriptions() != 7 || a.RetainedCount() != 4 {
		t.Fatalf("shard holds %d subscriptions and %d retained, want 7 and 4", a.Subscriptions(), a.RetainedCount())
	}

	probes := []*eventspb.Envelope{
		pub("", "p", "a/b"),
		pub("", "c2", "a/b"),
		pub("", "p", "a/b/c", pqos(1)),
		pub("", "p", "$SYS/x"),
		pub("", "p", "x/y"),
		pub("t2", "p", "a/b", retain(), payload("t2r2")),
		add("", "n1", "#", rh(0)),
		add("", "n2", "a/+", rh(1), qos(1), id(3)),
		add("t2", "n3", "+/+"),
		add("t2", "c9", "a/+", rh(1)),
		add("", "n4", "$SYS/#"),
		removeAll("", "c1", 1),
		pub("", "p", "a/b"),
		removeAll("", "c1", 2),
		pub("", "p", "a/b"),
		pub("", "p", "a/c", retain(), noPayload()),
		add("", "n5", "a/#"),
	}
	outA, outB := routersvc.NewOutput(), routersvc.NewOutput()
	delivered := 0
	for i, rec := range probes {
		off := a.Offset() + 1
		outA.Reset()
		outB.Reset()
		if err := a.Apply(rec, off, outA); err != nil {
			t.Fatal(err)
		}
		if err := b.Apply(rec, off, outB); err != nil {
			t.Fatal(err)
		}
		want := normalize(t, outA)
		delivered += len(want)
		diffDeliveries(t, fmt.Sprintf("probe %d (%s): rebuilt vs original", i, describe(rec)), want, normalize(t, outB))
		if outA.Mutations.Len() != outB.Mutations.Len() {
			t.Errorf("probe %d: %d mutations, original %d", i, outB.Mutations.Len(), outA.Mutations.Len())
		}
	}
	// And the probes did something.
	if delivered < 15 {
		t.Errorf("the probes made %d deliveries, want at least 15", delivered)
	}
	if a.Subscriptions() != 10 || a.RetainedCount() != 3 {
		t.Errorf("after the probes: %d subscriptions and %d retained, want 10 and 3", a.Subscriptions(), a.RetainedCount())
	}
}
