package kafka

import (
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The feed's order of a tracked topic (Feed.Track): per partition, what
// the process's own clients have produced to it and its local consumer
// has not applied yet. The router of `shoal all` routes a QoS 0 publish
// before the publish is produced (the express path, ARCHITECTURE.md "The
// local delivery path") only when there is nothing of the kind
// (Feed.Settled): the publish then takes its place after everything the
// process wrote to the partition before it, as it would in the log, and
// what the process writes after it comes after it in the log too (the
// router has applied the publish before it applies any later record).
//
// A record is counted from the moment Produce takes it until its promise
// (pending), then by its offset until the consumer has applied it
// (acked). Records marked with HeaderExpress are not counted: they were
// applied before they were produced. Records of other processes (through
// the embedded broker's socket) are not counted either: nothing orders
// them with this process's anyway.
type feedOrder struct {
	topic string
	parts []partOrder
}

// partOrder is the order of one partition.
type partOrder struct {
	pending atomic.Int64 // taken by Produce, not acknowledged or failed yet
	acked   atomic.Int64 // the newest offset acknowledged (not expressed)
	// known is set once a local consumer of the partition has noted the
	// log's end (Feed.noteEnd): before, what the log held at the start is
	// unknown, and nothing is settled.
	known atomic.Bool
}

// Track makes the feed keep the order of topic, which has partitions
// partitions, for Settled. Call it once, before the process's clients
// produce to topic.
func (f *Feed) Track(topic string, partitions int32) {
	o := &feedOrder{topic: topic, parts: make([]partOrder, partitions)}
	for i := range o.parts {
		o.parts[i].acked.Store(-1)
	}
	f.order.Store(o)
}

// Settled reports whether everything the process's clients have produced
// to partition p of topic is acknowledged and at or below applied, the
// newest offset its local consumer has applied. False for a topic not
// tracked, and until the partition's local consumer has started.
func (f *Feed) Settled(topic string, p int32, applied int64) bool {
	po := f.partOrder(topic, p)
	// pending before acked: a record's promise raises acked before it
	// lowers pending.
	return po != nil && po.known.Load() && po.pending.Load() == 0 && po.acked.Load() <= applied
}

// partOrder returns the order of partition p of topic, nil when the topic
// is not tracked.
func (f *Feed) partOrder(topic string, p int32) *partOrder {
	if f == nil {
		return nil
	}
	o := f.order.Load()
	if o == nil || o.topic != topic || p < 0 || int(p) >= len(o.parts) {
		return nil
	}
	return &o.parts[p]
}

// taken counts r, which Produce has just taken, and returns the order it
// is counted in (nil when it is not).
func (f *Feed) taken(r *Record) *partOrder {
	if f == nil {
		return nil
	}
	o := f.order.Load()
	if o == nil || o.topic != r.Topic || r.Expressed() {
		return nil
	}
	p := r.Partition
	if p < 0 {
		p = PartitionForKey(r.Key, int32(len(o.parts)))
	}
	po := f.partOrder(r.Topic, p)
	if po != nil {
		po.pending.Add(1)
	}
	return po
}

// done ends the count of a record taken into po: acknowledged at offset
// when ok.
func (po *partOrder) done(ok bool, offset int64) {
	if ok {
		po.ack(offset)
	}
	po.pending.Add(-1)
}

// ack raises acked to offset.
func (po *partOrder) ack(offset int64) {
	for {
		a := po.acked.Load()
		if offset <= a || po.acked.CompareAndSwap(a, offset) {
			return
		}
	}
}

// noteEnd records that partition p of topic ended before offset end when
// its local consumer started: what the log held then counts as
// acknowledged, and the partition's order is known from now on.
func (f *Feed) noteEnd(topic string, p int32, end int64) {
	if po := f.partOrder(topic, p); po != nil {
		po.ack(end - 1)
		po.known.Store(true)
	}
}

// expressed reports whether kr carries HeaderExpress.
func expressed(kr *kgo.Record) bool {
	for _, h := range kr.Headers {
		if h.Key == HeaderExpress {
			return true
		}
	}
	return false
}

// TrackOrder makes the client's feed keep the order of topic, a catalogue
// topic, for Settled (Feed.Track); without a feed it does nothing. Call
// it before the process's clients produce to topic.
func (c *Client) TrackOrder(topic string) {
	if c.cfg.Feed != nil {
		c.cfg.Feed.Track(topic, c.Partitions(topic))
	}
}

// Settled is Feed.Settled of the client's feed; false without one.
func (c *Client) Settled(topic string, p int32, applied int64) bool {
	return c.cfg.Feed.Settled(topic, p, applied)
}
