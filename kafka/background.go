package kafka

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Background records (Config.BackgroundLinger): records that nobody waits
// for, because what they record has happened already (in `shoal all`, a
// QoS 0 publish the express path routed before it was written, and the
// deliveries the gateway made with it), wait in the client for up to the
// background linger before they go to franz-go, so that they share few,
// large requests: on the embedded backbone every request costs the
// producer, the broker, the segment write and every local consumer a
// round of work (bench/HISTORY.md has what it saved).
//
// Order is the client's as before: every Produce, ProduceAll and
// ProduceSync first hands the held records to franz-go, so a record
// produced after a background one (on the same goroutine, or after it in
// any other happens-before order: a lock, a channel) is written after it
// in its partition, and the held records go in the order they were given.
// Only records given concurrently, in no order, may be written either way,
// as before.

// BackgroundMaxHeld is the most records the client holds back: at that
// many they go to franz-go at once, so a busy client's background records
// reach franz-go, and count in InFlight, about as soon as they did without
// a linger. A caller that reads InFlight as a backlog (the router's
// express gate) allows for one such batch in flight.
const BackgroundMaxHeld = 512

// background is a client's held records.
type background struct {
	linger time.Duration // 0: none are held
	mu     sync.Mutex
	queue  []*produceState
	timer  *time.Timer // sends the queue linger after its first record
	armed  bool        // timer set for the queue's first record
	closed bool        // Close has sent the queue: records go at once
	// held is len(queue) until the queue is in franz-go (it drops to 0
	// after the last one is produced, with mu held), read without mu by
	// the other produce calls: zero means nothing held to go before them.
	held atomic.Int32
}

// initBackground sets up the held records of a client with linger > 0.
func (c *Client) initBackground(linger time.Duration) {
	if linger <= 0 {
		return
	}
	c.bg.linger = linger
	c.bg.timer = time.AfterFunc(time.Hour, c.SendBackground)
	c.bg.timer.Stop()
}

// ProduceBackground produces r as Produce does (done as there, the
// record's bytes unchanged until it runs), but lets it wait in the client
// for up to Config.BackgroundLinger, and for company, before it goes to
// franz-go: for records that nobody waits for. Any other produce call of
// the client sends the held records first, so they keep their order.
func (c *Client) ProduceBackground(r *Record, done func(*Record, error)) {
	b := &c.bg
	if b.linger <= 0 {
		c.Produce(context.Background(), r, done)
		return
	}
	st := c.recordState(r, done)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		c.produce(context.Background(), st) // fails: the client is closed
		return
	}
	b.queue = append(b.queue, st)
	b.held.Store(int32(len(b.queue)))
	switch {
	case len(b.queue) >= BackgroundMaxHeld:
		c.sendHeld()
	case !b.armed:
		b.armed = true
		b.timer.Reset(b.linger)
	}
}

// SendBackground hands the records ProduceBackground holds to franz-go
// now, for a caller about to wait for one of them.
func (c *Client) SendBackground() {
	b := &c.bg
	if b.held.Load() == 0 {
		return
	}
	b.mu.Lock()
	c.sendHeld()
	b.mu.Unlock()
}

// sendHeld produces the queue in order; bg.mu is held. A produce may wait
// for room in the buffer: what makes room (franz-go's requests and the
// promises) never takes bg.mu.
func (c *Client) sendHeld() {
	b := &c.bg
	for i, st := range b.queue {
		c.produce(context.Background(), st)
		b.queue[i] = nil
	}
	b.queue = b.queue[:0]
	b.armed = false
	b.held.Store(0)
}

// closeBackground sends the held records and makes later background
// records go at once; Close then fails what is not acknowledged.
func (c *Client) closeBackground() {
	b := &c.bg
	if b.linger <= 0 {
		return
	}
	b.mu.Lock()
	b.closed = true
	c.sendHeld()
	b.mu.Unlock()
	b.timer.Stop()
}
