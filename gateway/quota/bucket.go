package quota

import (
	"sync/atomic"
	"time"
)

// Bucket is a token bucket: rate units per second, at most burst units
// held. It keeps the bucket as the GCRA's theoretical arrival time (tat):
// the instant at which the bucket is full again. Taking n units moves tat
// n × unit later (unit = 1/rate); the bucket holds them while tat stays
// within burst × unit of now. One atomic word, so it is safe for
// concurrent use, and neither locks nor allocates. It implements
// [Limiter].
type Bucket struct {
	tat       atomic.Int64 // unix ns: when the bucket is full again
	unit      float64      // ns to refill one unit
	tolerance int64        // ns: burst × unit, how far tat may run ahead of now
}

// NewBucket returns a full bucket of rate units per second (rate > 0)
// holding at most burst units (at least 1).
func NewBucket(rate float64, burst int64) *Bucket {
	unit := float64(time.Second) / rate
	return &Bucket{unit: unit, tolerance: int64(float64(max(burst, 1)) * unit)}
}

// cost is the time n units take to refill.
func (b *Bucket) cost(n int64) int64 { return int64(float64(n) * b.unit) }

// Reserve takes n units at now, running into debt when the bucket holds
// fewer, and returns how long the caller waits until the debt is paid: 0
// when the bucket held them. Whatever it returns, the units are taken.
func (b *Bucket) Reserve(now time.Time, n int64) time.Duration {
	t, c := now.UnixNano(), b.cost(n)
	for {
		old := b.tat.Load()
		next := max(old, t) + c
		if b.tat.CompareAndSwap(old, next) {
			return time.Duration(max(0, next-b.tolerance-t))
		}
	}
}

// Take takes n units at now if the bucket holds them, and reports whether
// it did; it takes nothing otherwise.
func (b *Bucket) Take(now time.Time, n int64) bool {
	t, c := now.UnixNano(), b.cost(n)
	for {
		old := b.tat.Load()
		next := max(old, t) + c
		if next-t > b.tolerance {
			return false
		}
		if b.tat.CompareAndSwap(old, next) {
			return true
		}
	}
}
