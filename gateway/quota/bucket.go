package quota

import (
	"sync/atomic"
	"time"
)

// Bucket is a token bucket: rate units per second, at most burst units
// held. It keeps the bucket as the GCRA's theoretical arrival time (tat):
// the instant at which the bucket is full again. Taking n units moves tat
// n × unit later (unit = 1/rate); the bucket holds them while tat stays
// within burst × unit of now. Its rate and burst are one immutable value
// behind an atomic pointer, which SetRate replaces; so the bucket is safe
// for concurrent use, and neither locks nor allocates to take. It
// implements [Limiter].
type Bucket struct {
	tat atomic.Int64 // unix ns: when the bucket is full again
	p   atomic.Pointer[bucketRate]
}

// bucketRate is a Bucket's rate and burst, and what follows from them.
type bucketRate struct {
	perSecond float64
	burst     int64
	unit      float64 // ns to refill one unit
	tolerance int64   // ns: burst × unit, how far tat may run ahead of now
}

func newBucketRate(rate float64, burst int64) *bucketRate {
	burst = max(burst, 1)
	unit := float64(time.Second) / rate
	return &bucketRate{perSecond: rate, burst: burst, unit: unit, tolerance: int64(float64(burst) * unit)}
}

// NewBucket returns a full bucket of rate units per second (rate > 0)
// holding at most burst units (at least 1).
func NewBucket(rate float64, burst int64) *Bucket {
	b := &Bucket{}
	b.p.Store(newBucketRate(rate, burst))
	return b
}

// cost is the time n units take to refill.
func (p *bucketRate) cost(n int64) int64 { return int64(float64(n) * p.unit) }

// Reserve takes n units at now, running into debt when the bucket holds
// fewer, and returns how long the caller waits until the debt is paid: 0
// when the bucket held them. Whatever it returns, the units are taken.
func (b *Bucket) Reserve(now time.Time, n int64) time.Duration {
	p := b.p.Load()
	t, c := now.UnixNano(), p.cost(n)
	for {
		old := b.tat.Load()
		next := max(old, t) + c
		if b.tat.CompareAndSwap(old, next) {
			return time.Duration(max(0, next-p.tolerance-t))
		}
	}
}

// Take takes n units at now if the bucket holds them, and reports whether
// it did; it takes nothing otherwise.
func (b *Bucket) Take(now time.Time, n int64) bool {
	p := b.p.Load()
	t, c := now.UnixNano(), p.cost(n)
	for {
		old := b.tat.Load()
		next := max(old, t) + c
		if next-t > p.tolerance {
			return false
		}
		if b.tat.CompareAndSwap(old, next) {
			return true
		}
	}
}

// SetRate makes the bucket refill rate units per second (rate > 0) and
// hold at most burst units (at least 1) from now on. The units taken and
// not refilled yet stay taken: they refill at the new rate (so a debt
// takes longer to pay at a lower rate), and a bucket that held more than
// the new burst holds the new burst. A Reserve or Take running at the
// same time is priced at the old rate or the new one, never lost.
func (b *Bucket) SetRate(now time.Time, rate float64, burst int64) {
	np := newBucketRate(rate, burst)
	old := b.p.Swap(np)
	if old.unit == np.unit {
		return // the same refill time per unit: tat means the same
	}
	t := now.UnixNano()
	for {
		tat := b.tat.Load()
		if tat <= t {
			return // full: nothing to refill
		}
		// The units still to refill, at the new unit's time each.
		next := t + int64(float64(tat-t)/old.unit*np.unit)
		if b.tat.CompareAndSwap(tat, next) {
			return
		}
	}
}

// PerSecond returns the bucket's rate.
func (b *Bucket) PerSecond() float64 { return b.p.Load().perSecond }

// Burst returns the most units the bucket holds.
func (b *Bucket) Burst() int64 { return b.p.Load().burst }
