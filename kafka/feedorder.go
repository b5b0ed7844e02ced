package kafka

import (
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The feed's order of a tracked topic (Feed.Track): per partition, what
// the process's own clients have produced to it and its local consumer
// has not applied yet. The router of `shoal all` routes a QoS 0 publish
// before the publish is produced (the express path, docs/local-path.md)
// only when there is nothing of the kind (Feed.Settled): the publish then takes its place after everything the
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
	// end is the newest offset acknowledged of any record the process
	// wrote to the partition (expressed ones too), read the newest its
	// local consumer has handed out: end - read is the consumer's backlog
	// (Feed.Room).
	end, read atomic.Int64
	// fetching is set once a fetching consumer of the process has read
	// the partition (the router with tracing on, whose consumers fetch):
	// from then on Room counts read as it does a local consumer's.
	fetching atomic.Bool
}

// Track makes the feed keep the order of topic, which has partitions
// partitions, for Settled and Room. Call it before the process's clients
// produce to topic; a second call for the same topic does nothing.
func (f *Feed) Track(topic string, partitions int32) {
	if o := f.order.Load(); o != nil && o.topic == topic && len(o.parts) == int(partitions) {
		return // tracked already (the broker and the router's express path both ask)
	}
	o := &feedOrder{topic: topic, parts: make([]partOrder, partitions)}
	for i := range o.parts {
		o.parts[i].acked.Store(-1)
		o.parts[i].end.Store(-1)
		o.parts[i].read.Store(-1)
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
func (po *partOrder) ack(offset int64) { raise(&po.acked, offset) }

// raise raises v to offset.
func raise(v *atomic.Int64, offset int64) {
	for {
		a := v.Load()
		if offset <= a || v.CompareAndSwap(a, offset) {
			return
		}
	}
}

// FeedMaxBacklog bounds, per partition of the tracked topic, the process's
// records on their way to its local consumer (Room), above which Room is
// false. 1,024 records are a few hundred KiB, far below any size bound of
// the log, so no record is deleted before the consumer has read it, and
// well within a subscription's inbox (feedMaxInbox), so none is read back
// from the log; and they are polls large enough for the router to
// amortise its writes. A larger bound only holds records in the pipeline,
// which cost the collector's work and make the router no faster; a
// smaller one lets the pipeline run dry. bench/HISTORY.md has the
// measurements under floods and saturating pairs.
const FeedMaxBacklog = 1024

// Room reports whether fewer than FeedMaxBacklog records of the process's
// clients to partition p of topic, the tracked topic, are on their way:
// given to Produce and not acknowledged yet (expressed ones aside), or
// acknowledged and not handed out by the partition's local consumer. A
// producer that can wait (the gateway, before it writes a client's
// PUBLISH: TCP then holds the client back) waits for room, so that a
// client publishing faster than the router routes is slowed to the
// router's pace instead of growing a backlog that the log's size bound
// would cut. True for a topic not
// tracked, and until the partition's local consumer has started (or a
// fetching consumer has read it). With several consumers of the
// partition in the process, read is the furthest one's.
func (f *Feed) Room(topic string, p int32) bool {
	po := f.partOrder(topic, p)
	return po == nil || !po.known.Load() && !po.fetching.Load() ||
		po.pending.Load()+po.end.Load()-po.read.Load() < FeedMaxBacklog
}

// written notes that the process's record at offset of partition p of
// topic is acknowledged (Feed.push, for every record, expressed or not).
func (f *Feed) written(topic string, p int32, offset int64) {
	if po := f.partOrder(topic, p); po != nil {
		raise(&po.end, offset)
	}
}

// handedOut notes that the local consumer of partition p of topic has
// handed out every record before next.
func (f *Feed) handedOut(topic string, p int32, next int64) {
	if po := f.partOrder(topic, p); po != nil {
		raise(&po.read, next-1)
	}
}

// fetchedUpTo notes that a fetching consumer of the process has read
// partition p of topic up to next (consumeLoop): with tracing on the
// router fetches, and Room follows it as it follows a local consumer.
func (f *Feed) fetchedUpTo(topic string, p int32, next int64) {
	if po := f.partOrder(topic, p); po != nil {
		raise(&po.read, next-1)
		po.fetching.Store(true)
	}
}

// noteEnd records that partition p of topic ended before offset end when
// its local consumer started: what the log held then counts as
// acknowledged, and the partition's order is known from now on.
func (f *Feed) noteEnd(topic string, p int32, end int64) {
	if po := f.partOrder(topic, p); po != nil {
		po.ack(end - 1)
		raise(&po.end, end-1)
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

// Room is Feed.Room of the client's feed; true without one (a fetching
// consumer's backlog is Kafka's to hold).
func (c *Client) Room(topic string, p int32) bool {
	return c.cfg.Feed.Room(topic, p)
}

// Settled is Feed.Settled of the client's feed; false without one.
func (c *Client) Settled(topic string, p int32, applied int64) bool {
	return c.cfg.Feed.Settled(topic, p, applied)
}
