package load

import (
	"testing"
	"time"
)

func TestPacerSchedule(t *testing.T) {
	p := NewPacer(1000, 5*time.Millisecond) // 1 ms apart from 5 ms
	if !p.Paced() {
		t.Fatal("a pacer with a rate is not paced")
	}
	for n := range 5 {
		want := 5*time.Millisecond + time.Duration(n)*time.Millisecond
		if got := p.Next(); got != want {
			t.Fatalf("message %d due at %s, want %s", n, got, want)
		}
		p.Advance()
	}
	if p.Sent() != 5 {
		t.Errorf("Sent = %d, want 5", p.Sent())
	}
}

func TestPacerWait(t *testing.T) {
	p := NewPacer(100, 0) // 10 ms apart
	if w := p.Wait(0); w != 0 {
		t.Errorf("first message: wait %s, want 0", w)
	}
	p.Advance()
	if w := p.Wait(4 * time.Millisecond); w != 6*time.Millisecond {
		t.Errorf("at 4 ms: wait %s, want 6ms", w)
	}
	// Behind schedule: every message already due is due now, with its own
	// scheduled time (no coordinated omission).
	now := 35 * time.Millisecond
	var due []time.Duration
	for range 10 {
		if p.Wait(now) > 0 {
			break
		}
		due = append(due, p.Next())
		p.Advance()
	}
	want := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 30 * time.Millisecond}
	if len(due) != len(want) {
		t.Fatalf("due at 35 ms: %v, want %v", due, want)
	}
	for i := range want {
		if due[i] != want[i] {
			t.Fatalf("due at 35 ms: %v, want %v", due, want)
		}
	}
}

func TestPacerFractionalRate(t *testing.T) {
	p := NewPacer(3, 0) // 333.33 ms apart: no drift after many messages
	for range 3000 {
		p.Advance()
	}
	if got, want := p.Next(), 1000*time.Second; got != want {
		t.Errorf("message 3000 at 3/s due at %s, want %s", got, want)
	}
}

func TestPacerUnpaced(t *testing.T) {
	for _, rate := range []float64{0, -1} {
		p := NewPacer(rate, time.Second)
		if p.Paced() || p.Wait(0) != 0 || p.Next() != 0 {
			t.Errorf("rate %g: paced %v, wait %s, next %s; want unpaced, no wait", rate, p.Paced(), p.Wait(0), p.Next())
		}
	}
}
