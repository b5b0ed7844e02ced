package routersvc

import (
	"slices"
	"testing"

	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// TestSetSourceNumbersPerSlot: a record's deliveries are numbered per
// slot, so the one delivery a gateway gets of a publish is index 0 in
// whatever order the slots were planned, and several deliveries to one
// slot (retained messages for a new subscription) count up.
func TestSetSourceNumbersPerSlot(t *testing.T) {
	o := NewOutput()
	msg := &eventspb.Message{Topic: "t"}
	o.delivery(0, "acme", nil, 1, msg) // an earlier record's, left alone
	o.SetSource(0, 2, 6)
	first := len(o.Deliveries)
	for _, slot := range []int32{3, 1, 3, 0, 3} {
		o.delivery(slot, "acme", nil, 1, msg)
	}
	o.SetSource(first, 2, 7)
	var got []uint32
	for _, d := range o.Deliveries {
		got = append(got, d.Envelope.GetDelivery().GetSource().GetIndex())
		if src := d.Envelope.GetDelivery().GetSource(); src.GetPartition() != 2 {
			t.Errorf("source %v", src)
		}
	}
	if want := []uint32{0, 0, 0, 1, 0, 2}; !slices.Equal(got, want) {
		t.Errorf("indexes %v, want %v", got, want)
	}
	if o.Deliveries[0].Envelope.GetDelivery().GetSource().GetOffset() != 6 {
		t.Error("an earlier record's delivery was renumbered")
	}
}

// TestOutputLetsABurstGo: an Output that a burst filled keeps, once its
// batches have been small for a while, outputKeep envelopes and targets,
// not the burst's.
func TestOutputLetsABurstGo(t *testing.T) {
	o := NewOutput()
	fill := func(n int) {
		o.Reset()
		for range n {
			d := o.delivery(0, "t", nil, 0, nil)
			o.target(d, "t-1", 1)
		}
	}
	fill(10_000)
	for range 200 { // the bound shrinks by a sixteenth with each small batch
		fill(10)
	}
	o.Reset()
	if got, want := len(o.free), outputKeep; got != want {
		t.Errorf("free deliveries after small batches: %d, want %d", got, want)
	}
	if got, want := len(o.freeTargets), outputKeep; got != want {
		t.Errorf("free targets after small batches: %d, want %d", got, want)
	}
	if cap(o.free) > 4*outputKeep {
		t.Errorf("the free list's array keeps room for %d", cap(o.free))
	}
	// A steady load keeps what it needs: no allocation per batch.
	fill(500)
	if n := testing.AllocsPerRun(10, func() { fill(500) }); n != 0 {
		t.Errorf("a steady batch of 500: %v allocations, want 0", n)
	}
}

// TestRouterTrim: Trim lets the free Outputs go, with the envelopes their
// polls left in them, and the next poll gets a new one.
func TestRouterTrim(t *testing.T) {
	r := &Router{}
	out := r.takeOutput()
	msg := &eventspb.Message{Topic: "t"}
	for i := range 1000 {
		out.delivery(int32(i%4), "acme", nil, 1, msg)
	}
	r.putOutput(out)
	if again := r.takeOutput(); again != out {
		t.Fatal("a free Output was not taken again")
	}
	r.putOutput(out)
	r.Trim()
	if len(r.outs) != 0 {
		t.Fatalf("%d free Outputs after Trim", len(r.outs))
	}
	next := r.takeOutput()
	if next == out || len(next.free) != 0 {
		t.Fatalf("after Trim: the same Output %v, %d free envelopes", next == out, len(next.free))
	}
	r.putOutput(next)
}
