package load

import (
	"math"
	"time"
)

// Pacer schedules one publisher's messages at a fixed rate. Message n is
// due at start + n × interval; a publisher that falls behind sends the
// messages already due at once (their send time is the scheduled time, so
// the delay counts as latency). A Pacer with rate 0 is unpaced: every
// message is due at once and [Pacer.Next] returns 0. Not safe for
// concurrent use.
type Pacer struct {
	start    time.Duration
	interval float64 // nanoseconds; 0 = unpaced
	n        uint64
}

// NewPacer returns a pacer of rate messages per second whose first message
// is due at start (a time on the run's clock). rate ≤ 0 means unpaced.
func NewPacer(rate float64, start time.Duration) Pacer {
	p := Pacer{start: start}
	if rate > 0 {
		p.interval = float64(time.Second) / rate
	}
	return p
}

// Paced reports whether the pacer has a rate.
func (p *Pacer) Paced() bool { return p.interval > 0 }

// Next returns the time at which the next message is due.
func (p *Pacer) Next() time.Duration {
	if p.interval == 0 {
		return 0
	}
	return p.start + time.Duration(math.Round(float64(p.n)*p.interval))
}

// Advance moves to the next message.
func (p *Pacer) Advance() { p.n++ }

// Wait returns how long to wait at now before the next message is due, 0
// if it is due.
func (p *Pacer) Wait(now time.Duration) time.Duration {
	if at := p.Next(); at > now {
		return at - now
	}
	return 0
}

// Sent returns the number of messages advanced past.
func (p *Pacer) Sent() uint64 { return p.n }
