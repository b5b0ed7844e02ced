package routersvc

import (
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// InboxSlot is the Delivery.Slot of targets that are offline persistent
// sessions (an Inbox delivery).
const InboxSlot int32 = -1

// Delivery is one record to produce to shoal.deliveries: Envelope (whose
// event is a Delivery) for partition Slot, the slot of the gateway that
// holds its targets.
//
// Inbox marks the delivery of targets whose sessions are persistent: the
// router writes each QoS 1/2 target's message as an InboxAppend to
// shoal.sessions (key tenant/client), and the session service keeps it
// until the client acknowledges it; the QoS 0 targets are delivered to
// Slot (dropped for InboxSlot: the client is offline).
type Delivery struct {
	Slot     int32
	Inbox    bool
	Envelope *eventspb.Envelope
}

// Output collects what applying records to a shard produces: the
// deliveries to write to shoal.deliveries and the mutations to write to
// the view store once the deliveries are durable.
//
// An Output is reused from batch to batch: [Output.Reset] recycles the
// envelopes, deliveries and targets it handed out, so steady-state
// matching allocates nothing. Ownership: a delivery envelope, its Delivery
// and Targets belong to the Output and are valid until Reset. The Message
// of a live delivery and its MessageId are those of the applied Publish
// envelope (shared, not copied): the caller must not modify or reuse that
// envelope until it has written the deliveries and called Reset. Retained
// deliveries point at the shard's retained messages, which are never
// modified.
type Output struct {
	Deliveries []Delivery
	Mutations  Mutations

	used        []*deliveryBuf // handed out since Reset, in order
	free        []*deliveryBuf
	usedTargets []*eventspb.Target // handed out since Reset (a delivery's Targets may be trimmed)
	freeTargets []*eventspb.Target
	// keep and keepTargets bound free and freeTargets (keepFree).
	keep, keepTargets int
}

// deliveryBuf holds the three structs of one delivery envelope, allocated
// together and recycled together.
type deliveryBuf struct {
	env eventspb.Envelope
	ev  eventspb.Envelope_Delivery
	del eventspb.Delivery
	src eventspb.Source
}

// NewOutput returns an empty Output.
func NewOutput() *Output {
	o := &Output{}
	o.Mutations.Reset()
	return o
}

// Reset empties o for the next batch, recycling every delivery envelope
// and target handed out since the last Reset.
func (o *Output) Reset() {
	o.dropDeliveries()
	o.Mutations.Reset()
}

// dropDeliveries recycles the deliveries and targets handed out since the
// last Reset, keeping the mutations (a rebuild, which produces nothing,
// stores them later).
func (o *Output) dropDeliveries() {
	nd, nt := len(o.used), len(o.usedTargets)
	for _, t := range o.usedTargets {
		t.ClientId = ""
		t.Connection = 0
		t.Qos = 0
		t.Retain = false
		t.SubscriptionIds = t.SubscriptionIds[:0]
		t.Dup, t.ShareGroup, t.ShareFilter = false, "", ""
		o.freeTargets = append(o.freeTargets, t)
	}
	clear(o.usedTargets)
	o.usedTargets = o.usedTargets[:0]
	for _, b := range o.used {
		clear(b.del.Targets)
		b.del.Targets = b.del.Targets[:0]
		b.del.Message = nil
		b.del.Source = nil
		b.del.PublishedUs = 0
		b.env.Tenant = ""
		b.env.MessageId = nil
		b.env.TimestampUs = 0
		o.free = append(o.free, b)
	}
	clear(o.used)
	o.used = o.used[:0]
	clear(o.Deliveries)
	o.Deliveries = o.Deliveries[:0]
	o.free, o.keep = keepFree(o.free, nd, o.keep)
	o.freeTargets, o.keepTargets = keepFree(o.freeTargets, nt, o.keepTargets)
}

// outputKeep is the number of recycled structs an Output keeps whatever
// its last batch used.
const outputKeep = 64

// keepFree bounds a free list to twice what the last batch used, to the
// last bound less a sixteenth, or to outputKeep, whichever is largest, and
// returns the bound: the Outputs a saturating burst filled (one per
// partition of every poll in flight) let the burst's envelopes go within a
// hundred batches or so once traffic is moderate again, while a load
// whose batches vary in size keeps what its large ones need.
func keepFree[T any](free []*T, used, last int) ([]*T, int) {
	keep := max(outputKeep, 2*used, last-last/16)
	if len(free) <= keep {
		return free, keep
	}
	clear(free[keep:])
	free = free[:keep]
	if cap(free) > 4*keep {
		free = append(make([]*T, 0, keep), free...)
	}
	return free, keep
}

// delivery appends a new delivery of msg for slot and returns its Delivery,
// without targets.
func (o *Output) delivery(slot int32, tenant string, id *eventspb.MessageID, tsUs int64, msg *eventspb.Message) *eventspb.Delivery {
	var b *deliveryBuf
	if n := len(o.free); n > 0 {
		b = o.free[n-1]
		o.free[n-1] = nil
		o.free = o.free[:n-1]
	} else {
		b = &deliveryBuf{}
		b.ev.Delivery = &b.del
		b.env.Event = &b.ev
	}
	o.used = append(o.used, b)
	b.env.Tenant = tenant
	b.env.MessageId = id
	b.env.TimestampUs = tsUs
	b.del.Message = msg
	o.Deliveries = append(o.Deliveries, Delivery{Slot: slot, Envelope: &b.env})
	return &b.del
}

// SetSource marks the deliveries from index first on as made for the
// record at offset of partition (Delivery.source). Those of one slot are
// numbered from 0 in their order (Source.index): a record may bring one
// connection several deliveries (a new subscription's retained messages,
// sorted by topic), and a gateway takes a delivery as new only after the
// newest (offset, index) it had. Numbered per slot, a publish's one
// delivery to a gateway is index 0 however many slots it reaches, so the
// same record applied again (a router taking a partition over) is known
// as a repeat whatever the order of the slots.
func (o *Output) SetSource(first int, partition int32, offset int64) {
	ds := o.Deliveries[first:]
	for i, b := range o.used[first:] {
		var idx uint32
		for _, d := range ds[:i] {
			if d.Slot == ds[i].Slot {
				idx++
			}
		}
		b.src.Partition, b.src.Offset, b.src.Index = partition, offset, idx
		b.del.Source = &b.src
	}
}

// target appends a new target for client at conn to d and returns it.
func (o *Output) target(d *eventspb.Delivery, client string, conn uint64) *eventspb.Target {
	var t *eventspb.Target
	if n := len(o.freeTargets); n > 0 {
		t = o.freeTargets[n-1]
		o.freeTargets[n-1] = nil
		o.freeTargets = o.freeTargets[:n-1]
	} else {
		t = &eventspb.Target{}
	}
	t.ClientId = client
	t.Connection = conn
	o.usedTargets = append(o.usedTargets, t)
	d.Targets = append(d.Targets, t)
	return t
}
