package routersvc_test

import (
	"fmt"
	"testing"
	"time"

	routersvc "github.com/shoal-mqtt/shoal/router-svc"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// benchShard returns a shard with n subscribers of "a/b/c" (concrete and
// wildcard filters, all on slot 1, some with several matching filters) and
// 1000 subscriptions that do not match, and an Output warmed up by one
// publish.
func benchShard(tb testing.TB, n int, withPresence bool) (*routersvc.Shard, *routersvc.Output) {
	tb.Helper()
	presence := routersvc.NewPresence()
	s := routersvc.NewShard(0, presence, func() time.Time { return t0 })
	out := routersvc.NewOutput()
	filters := []string{"a/b/c", "a/+/c", "a/#", "+/b/+"}
	for i := range n {
		c := fmt.Sprintf("client-%d", i)
		mustApply(tb, s, add("t", c, filters[i%len(filters)], id(uint32(i+1))), out)
		if withPresence {
			presence.Update("t", c, &eventspb.Presence{Online: true, Route: route(c)})
		}
		if i%10 == 0 {
			mustApply(tb, s, add("t", c, "#", qos(1)), out)
		}
	}
	for i := range 1000 {
		c := fmt.Sprintf("other-%d", i)
		mustApply(tb, s, add("t", c, fmt.Sprintf("x/%d/+", i)), out)
		if withPresence {
			presence.Update("t", c, &eventspb.Presence{Online: true, Route: route(c)})
		}
	}
	out.Reset()
	mustApply(tb, s, pub("t", "p", "a/b/c"), out)
	if got := len(out.Deliveries[0].Envelope.GetDelivery().Targets); len(out.Deliveries) != 1 || got != n {
		tb.Fatalf("%d deliveries, %d targets; want 1 delivery, %d targets", len(out.Deliveries), got, n)
	}
	return s, out
}

// BenchmarkShardPublish applies one publish matching n subscribers on one
// slot; with presence=known every client also has a presence record (the
// usual case once shoal.presence is read).
func BenchmarkShardPublish(b *testing.B) {
	for _, n := range []int{1, 10, 1000} {
		for _, presence := range []string{"none", "known"} {
			b.Run(fmt.Sprintf("subscribers=%d/presence=%s", n, presence), func(b *testing.B) {
				s, out := benchShard(b, n, presence == "known")
				benchPublish(b, s, out, n)
			})
		}
	}
}

// benchPublish applies a publish to "a/b/c" reaching n targets per
// iteration.
func benchPublish(b *testing.B, s *routersvc.Shard, out *routersvc.Output, n int) {
	rec := pub("t", "p", "a/b/c")
	off := s.Offset()
	b.ReportAllocs()
	for b.Loop() {
		out.Reset()
		off++
		if err := s.Apply(rec, off, out); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n), "targets/op")
}

// TestShardPublishAllocations is the allocation budget of matching: none
// in steady state, whatever the number of subscribers.
func TestShardPublishAllocations(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation budget: skipped with -short")
	}
	for _, n := range []int{1, 10, 1000} {
		s, out := benchShard(t, n, true)
		rec := pub("t", "p", "a/b/c")
		off := s.Offset()
		allocs := testing.AllocsPerRun(50, func() {
			out.Reset()
			off++
			if err := s.Apply(rec, off, out); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("publish to %d subscribers: %.1f allocations, want 0", n, allocs)
		}
	}
}

// BenchmarkShardPublishSlots applies one publish matching 1000 subscribers
// spread over 32 gateway slots: a delivery per slot, so that finding a
// slot's delivery goes through the shard's map of them, not the linear
// scan of the first few.
func BenchmarkShardPublishSlots(b *testing.B) {
	const n, slots = 1000, 32
	s := routersvc.NewShard(0, routersvc.NewPresence(), func() time.Time { return t0 })
	out := routersvc.NewOutput()
	for i := range n {
		mustApply(b, s, add("t", fmt.Sprintf("client-%d", i), "a/b/c", slot(int32(i%slots))), out)
	}
	out.Reset()
	mustApply(b, s, pub("t", "p", "a/b/c"), out)
	if len(out.Deliveries) != slots {
		b.Fatalf("%d deliveries, want %d", len(out.Deliveries), slots)
	}
	benchPublish(b, s, out, n)
}
