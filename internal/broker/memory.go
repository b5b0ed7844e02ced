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
// the connections that then go idle and park leave their stacks. Go
// collects that garbage only when the heap reaches its goal, which an idle
// broker may not do for the two minutes of the runtime's forced collection,
// and returns free pages to the system gradually after that. So once a
// wave of at least waveMin parked connections is over (the number of
// parked connections stopped growing for waveQuiet seconds), the broker
// collects and returns the memory at once (debug.FreeOSMemory: one GC,
// tens of milliseconds for a heap of a few hundred MiB). A steady fleet,
// whose parked count only moves with its keep-alive pings, never triggers
// it.
const (
	waveMin   = 1000
	waveQuiet = 2
)

// waveWatch tells, from the number of parked connections read once a
// second, when a wave of them is over.
type waveWatch struct {
	base  int64 // parked connections after the last release (or the fewest since)
	last  int64 // at the previous tick
	quiet int   // ticks since the count last grew
}

// tick takes this second's count and reports whether to release memory.
func (w *waveWatch) tick(parked int64) bool {
	w.base = min(w.base, parked)
	grew := parked-w.last > max(8, w.last/100) // more than pings moving the count
	w.last = parked
	if grew {
		w.quiet = 0
		return false
	}
	w.quiet++
	if w.quiet < waveQuiet || parked-w.base < waveMin {
		return false
	}
	w.base = parked
	return true
}

// releaseAfterWaves watches parked (the gateway's count) every second
// until ctx ends and returns memory to the system after each wave.
func releaseAfterWaves(ctx context.Context, parked func() int64, log *slog.Logger) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var w waveWatch
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n := parked(); w.tick(n) {
			start := time.Now()
			debug.FreeOSMemory()
			log.Debug("memory returned after a wave of connections", "parked", n, "took", time.Since(start))
		}
	}
}
