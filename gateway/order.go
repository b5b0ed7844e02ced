package gateway

import (
	"sync"
	"sync/atomic"
	"time"
)

// readOrder makes what a gateway reads take effect in that order across
// its connections (TestSubscribeReadFirstIsWrittenFirst): a SUBSCRIBE or UNSUBSCRIBE read before a
// PUBLISH, on any connection, is applied by the routers before that
// PUBLISH. Each connection has its own reader, so two packets read one
// after the other on two connections can reach the producer the other way
// round; a subscription change handed to the producer first precedes the
// publish in every partition (one producer: a partition keeps the order of
// the Produce calls), and a router applies a partition in order.
//
// A SUBSCRIBE or UNSUBSCRIBE takes a ticket when it is read (begin) and
// gives it back once every record it writes is handed to the producer
// (end). A PUBLISH notes the newest ticket when it is read (mark) and,
// before it hands its own record to the producer, waits until every ticket
// up to that one was given back (wait): in the common case none is out,
// and that costs two atomic loads.
//
// Read order is not quite arrival order: Go's network poller hands the
// goroutines of connections that became readable in one poll to the
// scheduler last first, so a PUBLISH that arrived a few microseconds after
// a SUBSCRIBE on another connection was often read first (Paho's request
// and response test failed about two runs in three). A reader that was
// just woken (its packet needed a fresh read) therefore yields once
// (runtime.Gosched) before it notes its mark, so the readers woken with it
// take their tickets first. That is best effort, not a guarantee: bytes
// of two connections that arrive in the same instant may still be read in
// either order, as in any broker that reads connections in parallel.
//
// The yield is not free: it sends the reader to the back of the
// scheduler's queue and wakes a thread to look for work, 15 % of the
// broker's CPU at 10,000 msg/s QoS 0, and with one processor
// (GOMAXPROCS=1) a wait behind every runnable goroutine. So a reader
// yields only while subscriptions move: within readOrderWindow of the
// last CONNECT or subscription change the gateway read (stir). The race
// it is for needs one: a client that subscribes just after it connected
// (Paho's test) or among other subscription changes. A fleet whose
// subscriptions stand still publishes without yielding; a SUBSCRIBE that
// comes after a second without any, on a connection that is not new, is
// read in the order the scheduler runs the readers.
type readOrder struct {
	begun atomic.Uint64 // tickets taken
	done  atomic.Uint64 // every ticket up to done was given back

	// stirred is the time (Unix nanoseconds, the gateway's clock) of the
	// last CONNECT or subscription change read, give or take an eighth of
	// readOrderWindow.
	stirred atomic.Int64

	mu    sync.Mutex
	cond  sync.Cond
	ended map[uint64]struct{} // tickets given back above done+1
}

func (o *readOrder) init() {
	o.cond.L = &o.mu
	o.ended = make(map[uint64]struct{})
}

// readOrderWindow is how long after a CONNECT or a subscription change
// the readers of the gateway yield before they note their mark.
const readOrderWindow = time.Second

// stir notes a CONNECT or a subscription change read at now.
func (o *readOrder) stir(now int64) {
	if now-o.stirred.Load() > int64(readOrderWindow/8) {
		o.stirred.Store(now)
	}
}

// moving says whether subscriptions may be moving at now: whether a
// reader just woken should yield (above).
func (o *readOrder) moving(now int64) bool {
	return now-o.stirred.Load() < int64(readOrderWindow)
}

// begin takes a ticket for a subscription change just read.
func (o *readOrder) begin() uint64 { return o.begun.Add(1) }

// end gives ticket tk back: its records are with the producer.
func (o *readOrder) end(tk uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	d := o.done.Load()
	if tk != d+1 {
		o.ended[tk] = struct{}{}
		return
	}
	d = tk
	for {
		if _, ok := o.ended[d+1]; !ok {
			break
		}
		delete(o.ended, d+1)
		d++
	}
	o.done.Store(d)
	o.cond.Broadcast()
}

// mark returns what a PUBLISH read now waits for.
func (o *readOrder) mark() uint64 { return o.begun.Load() }

// wait returns once every ticket up to mark was given back.
func (o *readOrder) wait(mark uint64) {
	if o.done.Load() >= mark {
		return
	}
	o.mu.Lock()
	for o.done.Load() < mark {
		o.cond.Wait()
	}
	o.mu.Unlock()
}
