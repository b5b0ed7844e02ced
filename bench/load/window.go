package load

import (
	"sync/atomic"
)

// pubWindow is a publisher's end-to-end window: the publisher may send
// sequence number s only while s < seen + size, where seen is one above
// the highest sequence number any of its subscribers received. It bounds
// the messages queued between publisher and subscriber (socket buffers and
// broker queues) whatever the QoS, so that an unpaced run measures the
// broker's throughput at a bounded queue instead of the size of the
// kernel's buffers. A lost message does not stall it: later arrivals move
// seen past it. Subscribers advance it from their reader goroutines; the
// publisher waits on wake.
type pubWindow struct {
	seen    atomic.Uint64
	waitFor atomic.Uint64 // when non-zero, the seen value the publisher waits for
	wake    chan struct{} // capacity 1
}

func newPubWindow() *pubWindow { return &pubWindow{wake: make(chan struct{}, 1)} }

// advance records that a subscriber received seq and wakes the publisher
// if it waits for it.
func (w *pubWindow) advance(seq uint32) {
	next := uint64(seq) + 1
	for {
		cur := w.seen.Load()
		if next <= cur || w.seen.CompareAndSwap(cur, next) {
			break
		}
	}
	if want := w.waitFor.Load(); want != 0 && w.seen.Load() >= want {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// open reports whether sequence number seq may be sent with a window of
// size messages.
func (w *pubWindow) open(seq uint32, size int) bool {
	return uint64(seq) < w.seen.Load()+uint64(size)
}

// wait blocks until seq may be sent or stop is closed (false). Before it
// blocks it calls idle (the publisher flushes its buffer). It waits until
// half the window is free, so that the publisher then writes a batch
// rather than one message per wake-up.
func (w *pubWindow) wait(seq uint32, size int, stop <-chan struct{}, idle func()) bool {
	for !w.open(seq, size) {
		idle()
		w.waitFor.Store(uint64(seq) + 1 - uint64(size) + uint64(size/2))
		if w.open(seq, size) { // advanced before waitFor was visible
			w.waitFor.Store(0)
			return true
		}
		select {
		case <-w.wake:
		case <-stop:
			w.waitFor.Store(0)
			return false
		}
		w.waitFor.Store(0)
	}
	return true
}
