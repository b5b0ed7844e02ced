package routersvc

import "github.com/shoal-mqtt/shoal/kafka"

// Handoff is the gateway of the router's own process (`shoal all`), to
// which the router hands each delivery record for a slot before it
// produces it: the gateway writes the message to its clients at once
// instead of when the record comes back from the log, and the record is
// still written, behind, as the record of what was delivered
// (docs/local-path.md, "The hand-off").
type Handoff interface {
	// Handoff is given rec, a delivery record for slot filled and not yet
	// produced, in the order the router produces them; rec and its bytes
	// are the router's again when it returns. It returns the mark rec must
	// carry in kafka.HeaderHandoff (whether the gateway delivered it or
	// left it to the log, which it tells apart when it reads its slot), or
	// nil when the gateway does not serve slot: then rec goes through the
	// log as any other record. With now false the router is busy (a
	// large poll: a backlog): the gateway leaves rec to the log, and the
	// records after it until it has read rec there, so that it writes
	// nothing on the router's goroutine while the router is what limits
	// the throughput.
	Handoff(slot int32, rec *kafka.Record, now bool) (mark []byte)
}

// handoffMaxPoll is the largest poll (records of shoal.messages) whose
// deliveries are handed over to be written at once: a larger one is a
// backlog, which the router works off faster when the gateway's slot
// consumer writes its deliveries beside it (measured: saturating QoS 0
// pairs lost 10–20 % of their deliveries per CPU-second with every poll
// handed over), and whose messages have waited already.
const handoffMaxPoll = 256

// handOff offers rec to the gateway of the process, when there is one,
// and marks rec with its answer. now says whether rec's poll is small
// enough for the gateway to write it at once.
func (r *Router) handOff(rec *kafka.Record, now bool) {
	if r.handoff == nil || r.tel.Tracing {
		return
	}
	if mark := r.handoff.Handoff(rec.Partition, rec, now); mark != nil {
		rec.AddHeader(kafka.HeaderHandoff, mark)
	}
}
