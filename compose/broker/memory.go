package broker

import (
	"context"
	"log/slog"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// A wave of connections (a fleet reconnecting, a gateway taking over
// another's clients) leaves garbage behind: every CONNECT crosses the log
// twice and allocates tens of KiB on its way, and the reader goroutines of
// the connections, which park once idle, leave their stacks. Go collects
// that garbage only when the heap reaches its goal, which an idle broker
// may not do for the two minutes of the runtime's forced collection, and
// returns free pages to the system gradually after that. So once a wave of
// at least waveMin new connections is over (no new connection and no more
// parked ones for waveQuiet seconds), the broker collects and returns the
// memory at once (debug.FreeOSMemory: one GC, tens of milliseconds for a
// heap of a few hundred MiB). A steady fleet, whose parked count only moves
// with its keep-alive pings, never triggers it.
const (
	waveMin   = 1000
	waveQuiet = 2
)

// waveWatch tells, from the gateway's counts read once a second, when a
// wave of connections is over.
type waveWatch struct {
	base       int64 // connections established by the last release
	lastTotal  int64 // at the previous tick
	lastParked int64
	quiet      int // ticks without new or newly parked connections
}

// tick takes this second's counts, the connections established since start
// and those parked now, and reports whether to release memory.
func (w *waveWatch) tick(total, parked int64) bool {
	grew := total > w.lastTotal ||
		parked-w.lastParked > max(8, w.lastParked/100) // more than pings moving the count
	w.lastTotal, w.lastParked = total, parked
	if grew {
		w.quiet = 0
		return false
	}
	w.quiet++
	if w.quiet < waveQuiet || total-w.base < waveMin {
		return false
	}
	w.base = total
	return true
}

// A burst of traffic leaves the same kind of garbage, and more that is
// kept: the buffers the roles reuse grow to the burst's batches (the
// router's delivery records and produce states, the consumers' record
// slices, franz-go's), and those in sync.Pools are let go only by the
// second collection after their last use, which an idle broker may not
// run for minutes. Before, a `shoal all` that had carried 20 s of
// saturating pairs and then took 10,000 idle connections held 26 MiB
// more than a fresh one with the same connections. So after a second of at
// least burstRate messages (received and sent by the gateway), once
// burstQuiet seconds passed at under a twentieth of that rate, the broker
// collects twice (the pools' contents go with the second collection) and
// returns the memory. A fleet at a steady rate never triggers it, however
// high the rate.
//
// burstQuiet is longer than the consumers take to let the arrays a burst
// grew go by themselves (kafka's shrinkAfter, 2 s of small polls, checked
// at least every second), so that the release collects them too.
const (
	burstRate  = 20000
	burstQuiet = 4
)

// burstWatch tells, from the gateway's messages (received + sent since
// start) read once a second, when a burst of traffic is over.
type burstWatch struct {
	last   int64
	primed bool // last holds a reading
	busy   bool // a second of burstRate since the last release
	quiet  int  // seconds under burstRate/20 since
}

// tick takes this second's count and reports whether to release memory.
func (w *burstWatch) tick(messages int64) bool {
	d := messages - w.last
	w.last = messages
	if !w.primed {
		w.primed = true
		return false
	}
	switch {
	case d >= burstRate:
		w.busy, w.quiet = true, 0
		return false
	case !w.busy:
		return false
	case d*20 >= burstRate:
		w.quiet = 0 // still busy: not over
		return false
	}
	w.quiet++
	if w.quiet < burstQuiet {
		return false
	}
	w.busy, w.quiet = false, 0
	return true
}

// A quiet broker keeps allocating a little: keep-alive pings, the log's
// polls, heartbeats, $SYS. With 10,000 idle connections that was about
// 130 KB/s, and Go collects only when the heap has doubled since the last
// collection (GOGC 100), so between two collections the garbage grew
// towards as much again as the live heap, and the process's RSS with it:
// after a wave's release, 10,000 idle connections held 3.9 KiB each; three
// minutes later 4.5 KiB, and up to twice their live heap once the garbage
// reached the collector's goal. A quiet broker has CPU to spare and no
// use for that garbage, so once quiet for idleQuiet seconds (under
// idleRate messages and idleConnects new connections a second) it
// collects and returns the memory whenever the heap holds more than
// idleSlack over its live objects (a sixteenth of them, at least
// idleSlackMin), at most once every idleEvery seconds. With 10,000 idle
// connections that is a collection of about 20 MB of live heap every 15 s
// or so, a few milliseconds of CPU each. A busy broker, whose
// collections run often anyway, is left to the runtime.
const (
	idleRate     = 1000
	idleConnects = 100
	idleQuiet    = 10
	idleEvery    = 10
	idleSlackMin = 2 << 20
)

// idleWatch tells, from the gateway's counts and the heap's figures read
// once a second, when a quiet broker should collect and return memory.
type idleWatch struct {
	lastMessages, lastTotal int64
	primed                  bool
	quiet                   int // seconds in a row under idleRate and idleConnects
	sinceRelease            int // seconds since the last release (of any kind)
}

// tick takes this second's counts (messages received and sent, connections
// established, both since start) and the heap's bytes in objects (live or
// not yet collected) and live after the last collection, and reports
// whether to release memory.
func (w *idleWatch) tick(messages, total int64, objects, live uint64) bool {
	dm, dt := messages-w.lastMessages, total-w.lastTotal
	w.lastMessages, w.lastTotal = messages, total
	w.sinceRelease++
	if !w.primed {
		w.primed = true
		return false
	}
	if dm >= idleRate || dt >= idleConnects {
		w.quiet = 0
		return false
	}
	w.quiet++
	if w.quiet < idleQuiet || w.sinceRelease < idleEvery {
		return false
	}
	if objects <= live+max(live/16, idleSlackMin) {
		return false
	}
	w.sinceRelease = 0
	return true
}

// released tells the watch that memory was returned for another reason.
func (w *idleWatch) released() { w.sinceRelease = 0 }

// heapFigures reads the heap's bytes in objects (live or not yet
// collected) and its live bytes after the last collection.
func heapFigures(s []metrics.Sample) (objects, live uint64) {
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// releaseAfterWaves reads the gateway's counts every second until ctx ends
// and returns memory to the system after each wave of connections and
// each burst of traffic, calling trim first (the router's free buffers,
// which an idle router never lets go by itself), and now and then while
// the broker is quiet (idleWatch).
func releaseAfterWaves(ctx context.Context, total, parked, messages func() int64, trim func(), log *slog.Logger) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var w waveWatch
	var b burstWatch
	var q idleWatch
	heap := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, m := total(), messages()
		wave := w.tick(n, parked())
		burst := b.tick(m)
		objects, live := heapFigures(heap)
		idle := q.tick(m, n, objects, live)
		switch {
		case wave || burst:
			start := time.Now()
			trim()
			runtime.GC()         // the pools' contents move to their victim caches,
			debug.FreeOSMemory() // and go with this collection
			q.released()
			log.Debug("memory returned", "after_wave", wave, "after_burst", burst, "connections_total", n, "took", time.Since(start))
		case idle:
			start := time.Now()
			debug.FreeOSMemory()
			log.Debug("memory returned", "quiet", true, "heap_objects", objects, "heap_live", live, "took", time.Since(start))
		}
	}
}
