package routersvc

import (
	"context"

	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// The express path: in `shoal all` the gateway gives the router each QoS 0
// publish that is not retained before it produces it (Express), and the
// router routes it at once, on the publisher's goroutine, when its shard
// has applied everything the process wrote to the shard's partition
// before (kafka.Client.Settled): nothing of the process is then between
// the shard's state and the publish, so routing it now is routing it
// where the log puts it. The gateway then marks the record with
// kafka.HeaderExpress and produces it as before; the router skips marked
// records when it reads them (apply), in this run or after a restart.
// docs/local-path.md, "The express path", has the argument; in short:
//
//   - Order. A publish that finds anything of the process unapplied in its
//     partition (a subscription change read before it, another publish of
//     its connection on the log path) goes the log's way, behind it. A
//     connection's publishes go to the producer one after the other, so
//     one that follows an express publish is applied after it either way.
//   - Same result. The same shard code matches it (Shard.publish) under the
//     shard's lock, and its delivery records are handed to the gateway and
//     then produced as the router's others are: the log still holds the
//     publish and every delivery. A delivery made on the express path has
//     no Source (the publish has no offset yet).
//   - Guarantees. Only QoS 0 publishes, which are acknowledged to nobody
//     and may be lost in a crash, come this way, and only their QoS 0
//     deliveries. QoS 1/2 publishes are acknowledged once in the log, and
//     routed from it, as before; retained messages change the shard's
//     stored state, so they go through the log too.

// expressMaxInFlight is the most records the express path's producer may
// have in franz-go for a publish to go the express way. Beyond it the
// broker is busy, and publishes go through the log, where the router takes
// them a poll at a time: under a saturating load that costs less CPU per
// delivery than routing each publish at once. The records the producer
// holds back (gateway.express_linger, kafka.Client.ProduceBackground) do
// not count until they go to franz-go, and then go together. One batch of
// them, up to kafka.BackgroundMaxHeld, is what a steady rate sends every
// linger, not a backlog, so the bound is one and a half batches: a steady
// rate stays on the express path while its batch is in flight, and
// overlapping batches close it. bench/HISTORY.md has the figures behind
// both choices. Which way a publish goes never changes its order
// (Settled).
const expressMaxInFlight = kafka.BackgroundMaxHeld * 3 / 2

// Express routes rec, a QoS 0 publish record of shoal.messages (filled,
// keyed, not produced yet, its message not retained), and reports whether
// it did: then the caller marks rec with kafka.HeaderExpress before it
// produces it, and the router skips it when it reads it. When Express
// returns false the caller produces rec unmarked, and the router routes it
// from the log. rec is the caller's again when Express returns.
func (r *Router) Express(rec *kafka.Record) bool {
	if r.express == nil || r.handoff == nil || r.tel.Tracing || r.express.InFlight() > expressMaxInFlight {
		return false
	}
	p := kafka.PartitionForKey(rec.Key, r.topics.Messages.Partitions)
	s := r.shard(p)
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !r.client.Settled(r.topics.Messages.Name, p, s.Offset()) {
		return false
	}
	env, err := s.xdec.Decode(rec)
	if err != nil {
		return false // the log's way, which logs it
	}
	ev, ok := env.GetEvent().(*eventspb.Envelope_Publish)
	if !ok {
		return false
	}
	if m := ev.Publish.GetMessage(); m == nil || m.Qos != 0 || m.Retain {
		return false
	}
	out := r.takeOutput()
	defer r.putOutput(out)
	if err := s.publish(env, ev.Publish, out); err != nil {
		return false // malformed: nothing was routed; the log's way says why
	}
	s.xrecs = r.deliveryRecords(rec, out.Deliveries, s.xrecs[:0], true)
	if parent := rec.Header(kafka.HeaderTraceparent); parent != nil {
		for _, d := range s.xrecs {
			d.AddTraceChild(parent)
		}
	}
	r.met.routed(s, len(s.xrecs))
	for _, d := range s.xrecs {
		if d.HandedOffEarly() {
			// Delivered: its record is the log's copy, which nobody
			// waits for (a late one goes at once, and sends these first).
			r.express.ProduceBackground(d, r.expressProduced)
			continue
		}
		r.express.Produce(context.Background(), d, r.expressProduced)
	}
	clear(s.xrecs)
	return true
}

// expressProduced is the done callback of the express path's records. A
// record that fails was refused for good (franz-go retries the others
// without limit): too large, not authorised, or the client is closing.
// Its delivery was made already, unless the gateway had left it to the
// log; the router's own path, which produces the same kind of records,
// stops the router on such an error.
func (r *Router) expressProduced(rec *kafka.Record, err error) {
	if err != nil {
		r.log.Warn("express delivery not written to the log", "topic", rec.Topic, "partition", rec.Partition, "err", err)
	}
	r.pool.Put(rec)
}
