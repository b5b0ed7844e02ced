package eventually

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a testing.TB that records a failure instead of ending the
// test.
type recorder struct {
	testing.TB
	failed atomic.Bool
	msg    string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed.Store(true)
	r.msg = format
	panic(r) // Fatalf does not return
}

func run(r *recorder, f func()) {
	defer func() {
		if p := recover(); p != nil && p != r {
			panic(p)
		}
	}()
	f()
}

func TestTrueWaitsAndFails(t *testing.T) {
	var n atomic.Int32
	go func() {
		for range 3 {
			time.Sleep(5 * time.Millisecond) // real time: True polls on the real clock outside a bubble
			n.Add(1)
		}
	}()
	True(t, 5*time.Second, "three ticks", func() bool { return n.Load() == 3 })

	r := &recorder{TB: t}
	began := time.Now()
	run(r, func() { True(r, 30*time.Millisecond, "never", func() bool { return false }) })
	if !r.failed.Load() || time.Since(began) < 30*time.Millisecond {
		t.Errorf("True of a condition that never holds: failed %t after %s", r.failed.Load(), time.Since(began))
	}
}

func TestOKReportsTheLastComplaint(t *testing.T) {
	r := &recorder{TB: t}
	run(r, func() { OK(r, 20*time.Millisecond, func() string { return "still wrong" }) })
	if !r.failed.Load() {
		t.Error("OK of a check that never passes did not fail")
	}
	calls := 0
	OK(t, time.Second, func() string {
		if calls++; calls < 3 {
			return "not yet"
		}
		return ""
	})
}

func TestBeforeEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	r := &recorder{TB: t}
	run(r, func() { Before(r, ctx, "never", func() bool { return false }) })
	if !r.failed.Load() {
		t.Error("Before of a condition that never holds did not fail when its context ended")
	}
}
