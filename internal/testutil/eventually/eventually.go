package eventually

import (
	"context"
	"testing"
	"time"
)

// maxPoll bounds the pause between two polls.
const maxPoll = 50 * time.Millisecond

// True polls cond until it holds, and fails t naming what when within
// passed first.
func True(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for pause := time.Millisecond; !cond(); pause = min(2*pause, maxPoll) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(pause)
	}
}

// OK polls check until it returns "", and fails t with its last complaint
// when within passed first.
func OK(t testing.TB, within time.Duration, check func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for pause := time.Millisecond; ; pause = min(2*pause, maxPoll) {
		msg := check()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, msg)
		}
		time.Sleep(pause)
	}
}

// Before polls cond until it holds, and fails t naming what when ctx ends
// first.
func Before(t testing.TB, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for pause := time.Millisecond; !cond(); pause = min(2*pause, maxPoll) {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(pause):
		}
	}
}
