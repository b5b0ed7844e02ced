package auth

import (
	"container/list"
	"net/netip"
	"sync"
	"time"
)

// forgetAfterCaps: an address with no failure for this many times the cap
// is forgotten, so an old mistake does not keep slowing a client down.
const forgetAfterCaps = 10

// maxFailures saturates the failure count (the delay reaches the cap long
// before).
const maxFailures = 1 << 20

// Delay slows down repeated failures from one address: bounded memory (at
// most max addresses; the oldest forgotten first), delay doubling from base
// per consecutive failure up to a cap, reset by a success.
//
// IPv4-mapped IPv6 addresses count as their IPv4 address, and IPv6
// addresses are grouped by their /64 prefix (one host usually holds a whole
// /64, and could otherwise step past the delay, and flush the table, by
// changing address). Safe for concurrent use.
type Delay struct {
	max       int
	base, cap time.Duration
	clock     func() time.Time

	mu    sync.Mutex
	addrs map[netip.Addr]*list.Element // of *failures
	order list.List                    // least recent failure at the front
}

type failures struct {
	key  netip.Addr
	n    int
	last time.Time
}

// NewDelay returns a Delay remembering at most maxAddrs addresses (at least one),
// delaying base after the first failure, doubling per further failure up to
// cap. clock is time.Now when nil.
func NewDelay(maxAddrs int, base, cap time.Duration, clock func() time.Time) *Delay {
	if clock == nil {
		clock = time.Now
	}
	return &Delay{
		max:   max(1, maxAddrs),
		base:  max(0, base),
		cap:   max(base, cap),
		clock: clock,
		addrs: make(map[netip.Addr]*list.Element),
	}
}

// delayKey is the table key of addr: the IPv4 address, or the IPv6 /64.
func delayKey(addr netip.Addr) netip.Addr {
	addr = addr.Unmap().WithZone("")
	if addr.Is6() {
		if p, err := addr.Prefix(64); err == nil {
			return p.Addr()
		}
	}
	return addr
}

// Wait returns how long to delay this attempt from addr: zero when addr has
// no recent failure, else base doubled per consecutive failure after the
// first, at most cap.
func (d *Delay) Wait(addr netip.Addr) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	el, ok := d.addrs[delayKey(addr)]
	if !ok {
		return 0
	}
	f, _ := el.Value.(*failures) // the list holds only *failures
	if d.clock().Sub(f.last) >= forgetAfterCaps*d.cap {
		d.remove(el)
		return 0
	}
	return d.penalty(f.n)
}

func (d *Delay) penalty(n int) time.Duration {
	if n <= 0 || d.base <= 0 {
		return 0
	}
	p := d.base
	for i := 1; i < n && p < d.cap; i++ {
		p *= 2
	}
	return min(p, d.cap)
}

// Failed records a failed attempt from addr. When the table is full the
// address whose last failure is the oldest is forgotten.
func (d *Delay) Failed(addr netip.Addr) {
	key := delayKey(addr)
	now := d.clock()
	d.mu.Lock()
	defer d.mu.Unlock()
	if el, ok := d.addrs[key]; ok {
		f, _ := el.Value.(*failures) // the list holds only *failures
		if now.Sub(f.last) >= forgetAfterCaps*d.cap {
			f.n = 0
		}
		f.n = min(f.n+1, maxFailures)
		f.last = now
		d.order.MoveToBack(el)
		return
	}
	for len(d.addrs) >= d.max {
		d.remove(d.order.Front())
	}
	d.addrs[key] = d.order.PushBack(&failures{key: key, n: 1, last: now})
}

// Succeeded forgets addr's failures.
func (d *Delay) Succeeded(addr netip.Addr) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if el, ok := d.addrs[delayKey(addr)]; ok {
		d.remove(el)
	}
}

func (d *Delay) remove(el *list.Element) {
	f, _ := d.order.Remove(el).(*failures) // the list holds only *failures
	delete(d.addrs, f.key)
}

// size returns how many addresses are remembered.
func (d *Delay) size() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.addrs)
}
