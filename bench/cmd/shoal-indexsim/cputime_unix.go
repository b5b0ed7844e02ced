//go:build unix

package main

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time, user and system, of every thread of the
// process so far: the garbage collector's work, done on other threads, is
// part of what the shard calls cost. getrusage counts in microseconds,
// where /proc/self/stat counts in ticks of 10 ms, too coarse for a batch.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
