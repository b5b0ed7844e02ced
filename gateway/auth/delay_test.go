package auth

import (
	"net/netip"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newTestDelay(maxAddrs int) (*Delay, *fakeClock) {
	c := &fakeClock{now: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)}
	return NewDelay(maxAddrs, 100*time.Millisecond, time.Second, c.Now), c
}

func TestDelayDoublesToCapAndResets(t *testing.T) {
	d, clock := newTestDelay(10)
	a := netip.MustParseAddr("192.0.2.1")
	other := netip.MustParseAddr("192.0.2.2")
	if w := d.Wait(a); w != 0 {
		t.Fatalf("Wait before any failure = %v, want 0", w)
	}
	want := []int64{100, 200, 400, 800, 1000, 1000, 1000}
	for i, w := range want {
		d.Failed(a)
		clock.Advance(time.Millisecond)
		if got := d.Wait(a); got != time.Duration(w)*time.Millisecond {
			t.Fatalf("after %d failures Wait = %v, want %v", i+1, got, time.Duration(w)*time.Millisecond)
		}
	}
	if got := d.Wait(other); got != 0 {
		t.Errorf("another address waits %v, want 0", got)
	}
	d.Succeeded(a)
	if got := d.Wait(a); got != 0 {
		t.Fatalf("Wait after a success = %v, want 0", got)
	}
	d.Failed(a)
	if got := d.Wait(a); got != 100*time.Millisecond {
		t.Fatalf("the first failure after a success waits %v, want base", got)
	}
}

func TestDelayForgetsAfterQuietTime(t *testing.T) {
	d, clock := newTestDelay(10)
	a := netip.MustParseAddr("192.0.2.1")
	for range 5 {
		d.Failed(a)
	}
	clock.Advance(forgetAfterCaps*time.Second - time.Millisecond)
	if got := d.Wait(a); got != time.Second {
		t.Fatalf("just before the quiet time Wait = %v, want the cap", got)
	}
	d.Failed(a) // counts: the run of failures goes on
	clock.Advance(forgetAfterCaps * time.Second)
	d.Failed(a) // after the quiet time, a new run starts
	if got := d.Wait(a); got != 100*time.Millisecond {
		t.Fatalf("a failure after the quiet time waits %v, want base", got)
	}
	clock.Advance(forgetAfterCaps * time.Second)
	if got := d.Wait(a); got != 0 {
		t.Fatalf("after the quiet time Wait = %v, want 0", got)
	}
	if n := d.size(); n != 0 {
		t.Fatalf("a forgotten address is still held (%d)", n)
	}
}

func TestDelayBoundedOldestForgottenFirst(t *testing.T) {
	d, clock := newTestDelay(3)
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}) }
	for i := 1; i <= 3; i++ {
		d.Failed(addr(i))
		clock.Advance(time.Millisecond)
	}
	d.Failed(addr(1)) // 1 is now the most recent; 2 the oldest
	clock.Advance(time.Millisecond)
	d.Failed(addr(4))
	if n := d.size(); n != 3 {
		t.Fatalf("holds %d addresses, want at most 3", n)
	}
	if got := d.Wait(addr(2)); got != 0 {
		t.Errorf("the oldest address was kept (waits %v)", got)
	}
	for _, i := range []int{1, 3, 4} {
		if got := d.Wait(addr(i)); got == 0 {
			t.Errorf("address %d was forgotten", i)
		}
	}
	if got := d.Wait(addr(1)); got != 200*time.Millisecond {
		t.Errorf("address 1 (two failures) waits %v, want 200ms", got)
	}

	for i := 10; i < 1000; i++ {
		d.Failed(addr(i % 256))
	}
	if n := d.size(); n != 3 {
		t.Fatalf("after a flood holds %d addresses, want 3", n)
	}
}

func TestDelayAddressGrouping(t *testing.T) {
	d, _ := newTestDelay(10)
	d.Failed(netip.MustParseAddr("::ffff:192.0.2.7"))
	if got := d.Wait(netip.MustParseAddr("192.0.2.7")); got == 0 {
		t.Error("an IPv4-mapped address and its IPv4 address are counted apart")
	}
	d.Failed(netip.MustParseAddr("2001:db8:1:2::1"))
	if got := d.Wait(netip.MustParseAddr("2001:db8:1:2:ffff::9")); got == 0 {
		t.Error("two addresses of one IPv6 /64 are counted apart")
	}
	if got := d.Wait(netip.MustParseAddr("2001:db8:1:3::1")); got != 0 {
		t.Error("another /64 is delayed")
	}
	d.Failed(netip.MustParseAddr("fe80::1%eth0"))
	if got := d.Wait(netip.MustParseAddr("fe80::2%eth1")); got == 0 {
		t.Error("the zone separates addresses of one /64")
	}
	if n := d.size(); n != 3 {
		t.Errorf("holds %d keys, want 3", n)
	}
}

func TestNewDelayClampsArguments(t *testing.T) {
	d := NewDelay(0, time.Second, time.Millisecond, nil)
	a := netip.MustParseAddr("192.0.2.1")
	d.Failed(a)
	d.Failed(a)
	if got := d.Wait(a); got != time.Second {
		t.Errorf("cap below base: Wait = %v, want base", got)
	}
	d.Failed(netip.MustParseAddr("192.0.2.2"))
	if n := d.size(); n != 1 {
		t.Errorf("max 0 holds %d addresses, want 1", n)
	}
	z := NewDelay(10, 0, 0, nil)
	z.Failed(a)
	if got := z.Wait(a); got != 0 {
		t.Errorf("zero base: Wait = %v, want 0", got)
	}
}

func TestDelayConcurrent(t *testing.T) {
	d := NewDelay(64, time.Millisecond, time.Second, nil)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				a := netip.AddrFrom4([4]byte{10, byte(g), byte(i >> 8), byte(i)})
				d.Failed(a)
				d.Wait(a)
				if i%3 == 0 {
					d.Succeeded(a)
				}
			}
		})
	}
	wg.Wait()
	if n := d.size(); n > 64 {
		t.Fatalf("holds %d addresses, want at most 64", n)
	}
}
