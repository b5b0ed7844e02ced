package broker

import (
	"context"
	"log/slog"
	"runtime/debug"
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

// releaseAfterWaves reads the gateway's counts every second until ctx ends
// and returns memory to the system after each wave.
func releaseAfterWaves(ctx context.Context, total, parked func() int64, log *slog.Logger) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var w waveWatch
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n := total(); w.tick(n, parked()) {
			start := time.Now()
			debug.FreeOSMemory()
			log.Debug("memory returned after a wave of connections", "connections_total", n, "took", time.Since(start))
		}
	}
}
