package load

import (
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
)

func TestPubWindow(t *testing.T) {
	w := newPubWindow()
	if !w.open(3, 4) || w.open(4, 4) {
		t.Fatal("a window of 4 with nothing received must allow 0–3 only")
	}
	w.advance(1) // seen = 2: 0..5 allowed
	if !w.open(5, 4) || w.open(6, 4) {
		t.Error("after seq 1 arrived, a window of 4 must allow up to 5")
	}
	w.advance(0) // an older one does not move it back
	if !w.open(5, 4) {
		t.Error("an older arrival moved the window back")
	}
}

func TestPubWindowWaitWakes(t *testing.T) {
	w := newPubWindow()
	stop := make(chan struct{})
	idle := 0
	done := make(chan bool)
	go func() { done <- w.wait(10, 4, stop, func() { idle++ }) }()
	// The waiter resumes when half the window is free: seq 10 needs seen ≥
	// 7, and with hysteresis it waits for seen ≥ 9.
	eventually.True(t, 5*time.Second, "the publisher to wait", func() bool { return w.waitFor.Load() != 0 })
	w.advance(7) // seen = 8: open, but below the wake mark
	select {
	case ok := <-done:
		// Allowed: it may have seen the window open between checks.
		if !ok {
			t.Fatal("wait returned false without stop")
		}
		return
	case <-time.After(50 * time.Millisecond):
	}
	w.advance(8) // seen = 9: wakes it
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("wait returned false without stop")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("advance did not wake the publisher")
	}
	if idle == 0 {
		t.Error("the publisher did not flush before waiting")
	}
}

func TestPubWindowStop(t *testing.T) {
	w := newPubWindow()
	stop := make(chan struct{})
	close(stop)
	if w.wait(100, 4, stop, func() {}) {
		t.Error("wait with a closed stop and a closed window returned true")
	}
}
