package quota

import (
	"sync"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

func at(d time.Duration) time.Time { return t0.Add(d) }

// TestBucketTake: a full bucket gives its burst at once, then a unit per
// 1/rate, and never holds more than the burst however long it rests.
func TestBucketTake(t *testing.T) {
	b := NewBucket(2, 3) // a unit every 500 ms
	for i := range 3 {
		if !b.Take(t0, 1) {
			t.Fatalf("take %d of the burst refused", i+1)
		}
	}
	for _, step := range []struct {
		at   time.Duration
		want bool
	}{
		{0, false},
		{499 * time.Millisecond, false},
		{500 * time.Millisecond, true},
		{500 * time.Millisecond, false},
		{999 * time.Millisecond, false},
		{1000 * time.Millisecond, true},
	} {
		if got := b.Take(at(step.at), 1); got != step.want {
			t.Fatalf("take at +%v: %v, want %v", step.at, got, step.want)
		}
	}
	// A long rest fills the bucket to its burst, not beyond.
	later := at(time.Hour)
	for i := range 3 {
		if !b.Take(later, 1) {
			t.Fatalf("after a rest: take %d refused", i+1)
		}
	}
	if b.Take(later, 1) {
		t.Fatal("after a rest: a fourth take, beyond the burst, allowed")
	}
	if b.Take(later, 4) {
		t.Fatal("a take larger than the burst allowed")
	}
}

// TestBucketReserve: reservations beyond the burst go into debt and are
// told how long to wait; a reservation larger than the burst waits for
// its own refill.
func TestBucketReserve(t *testing.T) {
	b := NewBucket(10, 5) // 100 ms a unit
	for i := range 5 {
		if d := b.Reserve(t0, 1); d != 0 {
			t.Fatalf("reserve %d of the burst: wait %v, want 0", i+1, d)
		}
	}
	for i, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond} {
		if d := b.Reserve(t0, 1); d != want {
			t.Fatalf("reserve %d beyond the burst: wait %v, want %v", i+1, d, want)
		}
	}
	// The debt is paid as time passes.
	if d := b.Reserve(at(200*time.Millisecond), 1); d != 100*time.Millisecond {
		t.Fatalf("reserve at +200ms: wait %v, want 100ms", d)
	}
	// Take refuses what Reserve would wait for, and takes nothing.
	if b.Take(at(250*time.Millisecond), 1) {
		t.Fatal("take while in debt allowed")
	}
	if d := b.Reserve(at(300*time.Millisecond), 1); d != 100*time.Millisecond {
		t.Fatalf("reserve at +300ms: wait %v, want 100ms (the refused take took nothing)", d)
	}

	big := NewBucket(1000, 1000) // bytes: 1000/s
	if d := big.Reserve(t0, 3000); d != 2*time.Second {
		t.Fatalf("3000 units from a burst of 1000 at 1000/s: wait %v, want 2s", d)
	}
	if d := big.Reserve(t0, 1); d != 2*time.Second+time.Millisecond {
		t.Fatalf("then one more: wait %v, want 2.001s", d)
	}
}

// TestBucketReserveRate: a reader that waits what Reserve says sends n
// messages of a rate r with burst b in (n-b)/r of its clock, whatever the
// sizes of the steps between its reads.
func TestBucketReserveRate(t *testing.T) {
	for _, tc := range []struct {
		rate  float64
		burst int64
		n     int
	}{{1000, 1000, 5000}, {3, 3, 30}, {0.5, 1, 10}, {250, 10, 1000}} {
		b := NewBucket(tc.rate, tc.burst)
		now := t0
		for i := range tc.n {
			now = now.Add(b.Reserve(now, 1))
			if i%7 == 0 {
				now = now.Add(time.Microsecond) // the reader's own time
			}
		}
		want := time.Duration(float64(tc.n-int(tc.burst)) / tc.rate * float64(time.Second))
		if got := now.Sub(t0); got < want-time.Millisecond || got > want+time.Millisecond+time.Duration(tc.n/7+1)*time.Microsecond {
			t.Errorf("rate %v burst %d: %d messages took %v, want %v", tc.rate, tc.burst, tc.n, got, want)
		}
	}
}

// TestBucketConcurrent: takes from many goroutines at one instant get
// exactly the burst.
func TestBucketConcurrent(t *testing.T) {
	b := NewBucket(1, 100)
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := 0
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if b.Take(t0, 1) {
					mu.Lock()
					got++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if got != 100 {
		t.Fatalf("%d takes succeeded, want the burst, 100", got)
	}
}

// TestBucketSetRate: a new rate applies from the instant it is set; the
// units taken and not refilled stay taken and refill at the new rate; a
// full bucket holds the new burst.
func TestBucketSetRate(t *testing.T) {
	// Lowered while empty: the 10 units taken refill at 5/s, 2 s.
	b := NewBucket(10, 10)
	for i := range 10 {
		if !b.Take(t0, 1) {
			t.Fatalf("take %d of the burst refused", i+1)
		}
	}
	b.SetRate(t0, 5, 5)
	if b.PerSecond() != 5 || b.Burst() != 5 {
		t.Fatalf("rate %v burst %d after SetRate(5, 5)", b.PerSecond(), b.Burst())
	}
	// Full again at +2s; a unit is there when tat − now ≤ 1 s (the new
	// burst, 5 units of 200 ms), less the unit's own 200 ms: at +1.2s.
	if b.Take(at(1199*time.Millisecond), 1) {
		t.Fatal("a unit taken before the old debt was refilled at the new rate")
	}
	if !b.Take(at(1200*time.Millisecond), 1) {
		t.Fatal("no unit at +1.2s, when the new rate has refilled one")
	}

	// Raised while in debt: 4 s of debt at 1/s is 0.4 s at 10/s.
	b = NewBucket(1, 1)
	if d := b.Reserve(t0, 5); d != 4*time.Second {
		t.Fatalf("5 units from a burst of 1 at 1/s: wait %v, want 4s", d)
	}
	b.SetRate(t0, 10, 10)
	if d := b.Reserve(t0, 6); d != 100*time.Millisecond {
		t.Fatalf("after raising the rate: wait %v, want 100ms (11 units owed, 10 held)", d)
	}

	// A full bucket holds the new burst at once.
	b = NewBucket(1, 1)
	b.SetRate(t0, 100, 100)
	for i := range 100 {
		if !b.Take(t0, 1) {
			t.Fatalf("take %d of the new burst refused", i+1)
		}
	}
	if b.Take(t0, 1) {
		t.Fatal("a take beyond the new burst allowed")
	}

	// The same refill time per unit, another burst: what is owed stays.
	b = NewBucket(2, 4)
	b.Take(t0, 4)
	b.SetRate(t0, 2, 8)
	for i := range 4 {
		if !b.Take(t0, 1) {
			t.Fatalf("take %d of the 4 units the larger burst adds refused", i+1)
		}
	}
	if b.Take(t0, 1) {
		t.Fatal("a take beyond the larger burst allowed")
	}
}

// TestBucketSetRateConcurrent: SetRate between takes from many
// goroutines loses none of them and lets none through twice: at one
// instant, the takes that succeed are at most the larger burst and at
// least the smaller.
func TestBucketSetRateConcurrent(t *testing.T) {
	b := NewBucket(100, 100)
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := 0
	for range 4 {
		wg.Go(func() {
			for range 100 {
				if b.Take(t0, 1) {
					mu.Lock()
					got++
					mu.Unlock()
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 200 {
			if i%2 == 0 {
				b.SetRate(t0, 100, 200)
			} else {
				b.SetRate(t0, 100, 100)
			}
		}
	})
	wg.Wait()
	if got < 100 || got > 200 {
		t.Fatalf("%d takes succeeded, want between the bursts, 100 and 200", got)
	}
}
