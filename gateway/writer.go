package gateway

import (
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Writing to clients. A connection with bytes in its out buffer is queued
// once (conn.flushing) on the gateway's writeQueue; a few writer goroutines
// take connections off the queue and write each one's buffer without
// blocking. A socket that cannot take everything at once (a slow client,
// a full send buffer) gets a goroutine of its own that writes the rest with
// the write timeout and keeps the connection until its buffer is empty, as
// every connection had before; the writers go on with the others. So a
// fan-out to a thousand subscribers costs a queue push per subscriber, not
// a goroutine per subscriber, and one slow client never holds up the rest.
//
// Connections whose net.Conn cannot write without blocking (WebSocket)
// always take the blocking path.

// nonBlockingWriter writes what it can of bufs at once and never waits: it
// reports how many bytes it wrote and whether the rest would have blocked.
// Connections read from their TCP socket directly (conn.tcp) get one
// (writenb_linux.go); test connections may implement it themselves.
type nonBlockingWriter interface {
	writeNB(bufs [][]byte) (n int, blocked bool, err error)
}

// writeQueue holds the connections waiting for a writer.
type writeQueue struct {
	mu      sync.Mutex
	conns   []*conn // conns[head:] are waiting
	head    int
	running int // writer goroutines running
	max     int
	// helpers counts the goroutines that will write what is queued
	// themselves (help) once their call is over: while there are any,
	// push starts no writer.
	helpers atomic.Int32

	blocked atomic.Int64 // writes handed to the blocking path (slow clients)
}

func newWriteQueue() *writeQueue {
	return &writeQueue{max: max(2, runtime.GOMAXPROCS(0))}
}

// push queues connections that have just been marked flushing, and starts
// writers while there are fewer than max and more connections waiting
// than writers, unless a helper is to come.
func (q *writeQueue) push(cs ...*conn) {
	if len(cs) == 0 {
		return
	}
	q.mu.Lock()
	q.conns = append(q.conns, cs...)
	start := 0
	// Read with q.mu held, after the append: a helper that has not
	// counted itself out yet takes these connections after it has.
	if q.helpers.Load() == 0 {
		start = q.startLocked()
	}
	q.mu.Unlock()
	for range start {
		go q.work()
	}
}

// startLocked counts the writers to start for what is waiting. Holds q.mu.
func (q *writeQueue) startLocked() int {
	start := 0
	for q.running < q.max && q.running < len(q.conns)-q.head {
		q.running++
		start++
	}
	return start
}

// writerBatch is how many connections a writer takes off the queue at once.
const writerBatch = 32

// takeLocked moves up to len(batch) waiting connections into batch and
// returns how many. Holds q.mu.
func (q *writeQueue) takeLocked(batch []*conn) int {
	n := copy(batch, q.conns[q.head:])
	clear(q.conns[q.head : q.head+n])
	q.head += n
	if q.head == len(q.conns) {
		q.conns, q.head = q.conns[:0], 0
		if cap(q.conns) > 64<<10 {
			q.conns = nil // do not keep a burst's queue forever
		}
	}
	return n
}

// work writes queued connections until the queue is empty.
func (q *writeQueue) work() {
	var batch [writerBatch]*conn
	for {
		q.mu.Lock()
		n := q.takeLocked(batch[:])
		if n == 0 {
			q.running--
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		q.write(batch[:n])
	}
}

// write writes each connection of batch once, queueing again those that
// got more meanwhile, and empties batch.
func (q *writeQueue) write(batch []*conn) {
	var bytes int64
	var g *Gateway
	for i, c := range batch {
		batch[i] = nil
		more, written := c.writeOnce()
		bytes += written
		g = c.g
		if more {
			q.push(c) // more came meanwhile: behind the others
		}
	}
	// The gateway-wide count once per batch: every writer adding to one
	// counter per write would make its cache line bounce.
	if g != nil {
		g.Stats.c[BytesSent].Add(bytes)
	}
}

// willHelp counts the calling goroutine as a helper until its help: what
// it queues meanwhile (an express publish's deliveries) waits for it
// rather than for a writer goroutine of its own.
func (q *writeQueue) willHelp() { q.helpers.Add(1) }

// helpMax is how many connections a helper writes itself.
const helpMax = 4

// help ends willHelp: the calling goroutine writes up to helpMax waiting
// connections itself, and starts writers for the rest as push would. At a
// moderate rate an express publish has a subscriber or two, whose writes
// then cost no goroutine to wake (measured: waking one per message was
// the largest cost the express path added at 10,000 msg/s); a larger
// fan-out still gets the writers' parallel writes.
func (q *writeQueue) help() {
	q.helpers.Add(-1)
	var batch [helpMax]*conn
	q.mu.Lock()
	n := q.takeLocked(batch[:])
	// Writers for the rest, whether other helpers are to come or not:
	// they might each leave a rest too.
	start := q.startLocked()
	q.mu.Unlock()
	for range start {
		go q.work()
	}
	q.write(batch[:n])
}

// writeOnce writes c's out buffer once, without blocking. It reports
// whether more bytes arrived meanwhile (c stays flushing and must be queued
// again); otherwise c is no longer flushing, or a blocking goroutine has
// taken it over. It counts the bytes written in the tenant's BytesSent and
// returns them for the gateway-wide count.
func (c *conn) writeOnce() (more bool, written int64) {
	c.mu.Lock()
	if c.flow == nil || c.out.len() == 0 || c.closed {
		c.flushing = false
		c.restLocked()
		c.mu.Unlock()
		return false, 0
	}
	w := c.out
	c.out, c.spare = c.spare, outBuf{}
	c.mu.Unlock()

	if !c.nonBlockingKnown { // only the connection's writer gets here
		c.nonBlocking, c.nonBlockingKnown = newNonBlockingWriter(c.nc, c.tcp), true
	}
	if c.nonBlocking == nil {
		go c.flushLoop(w, nil)
		return false, 0
	}
	bufs := w.vectors()
	n, blocked, err := c.nonBlocking.writeNB(bufs)
	written = int64(n)
	if c.ts != nil {
		c.ts.c[BytesSent].Add(written)
	}
	if err == nil && blocked {
		c.g.writes.blocked.Add(1)
		go c.flushLoop(w, consumed(bufs, n))
		return false, written
	}
	w.reset()
	c.mu.Lock()
	c.spare = w
	if err != nil {
		c.flushing = false
		c.mu.Unlock()
		c.logWriteFailed(err)
		c.close()
		return false, written
	}
	more = c.out.len() > 0 && !c.closed
	if !more {
		c.flushing = false
		c.restLocked()
	}
	c.mu.Unlock()
	return more, written
}

// restLocked drops the flow state of a parked connection once its flush
// is over (what a PINGRESP to a parked connection needed), unless the
// connection receives deliveries: a subscriber that only listens parks
// like an idle one, and dropping its buffers after every flush made them
// again for every message (7% of all bytes allocated in the pairs
// benchmark). Its flow goes at its next park (park calls dropIdleFlow), the
// next time the client sends something, a PINGREQ at the latest. Holds c.mu.
func (c *conn) restLocked() {
	if c.resting && (c.flow == nil || !c.receiving) {
		c.dropIdleFlow()
	}
}

// consumed returns bufs without its first n bytes.
func consumed(bufs [][]byte, n int) net.Buffers {
	for len(bufs) > 0 && n >= len(bufs[0]) {
		n -= len(bufs[0])
		bufs = bufs[1:]
	}
	if len(bufs) > 0 {
		bufs[0] = bufs[0][n:]
	}
	return bufs
}

// writeNow writes b directly (before the connection is established).
func (c *conn) writeNow(b []byte) {
	n, _ := c.writeProgressing(net.Buffers{b})
	c.add(BytesSent, n)
}

// writeChunk is the most bytes one write with a fresh deadline carries.
const writeChunk = 64 << 10

// writeProgressing writes bufs (consuming them) with the socket's
// blocking writes, failing only when a chunk of at most writeChunk bytes
// makes no way for write_timeout: a client that fell behind and reads again
// is not cut, however long the whole write takes. It clears the deadline
// when it is done, because a deadline left on the socket outlives the
// write: the non-blocking writes (writeNB) would fail the first write after
// it passed, on a connection that had long recovered.
func (c *conn) writeProgressing(bufs net.Buffers) (int64, error) {
	var total int64
	for len(bufs) > 0 {
		k, size := 0, 0
		for k < len(bufs) && size+len(bufs[k]) <= writeChunk {
			size += len(bufs[k])
			k++
		}
		_ = c.nc.SetWriteDeadline(c.g.clock().Add(c.g.cfg.WriteTimeout))
		if k == 0 { // a buffer larger than a chunk: its first chunk
			m, err := c.nc.Write(bufs[0][:writeChunk])
			total += int64(m)
			bufs[0] = bufs[0][m:]
			if err != nil {
				return total, err
			}
			continue
		}
		part := bufs[:k:k]
		n, err := part.WriteTo(c.nc)
		total += n
		if err != nil {
			return total, err
		}
		bufs = bufs[k:]
	}
	_ = c.nc.SetWriteDeadline(time.Time{})
	return total, nil
}

// kickFlush queues the connection for a writer if it has bytes to write
// and none is on it already.
func (c *conn) kickFlush() {
	c.mu.Lock()
	start := c.startFlushLocked()
	c.mu.Unlock()
	if start {
		c.g.writes.push(c)
	}
}

// startFlushLocked marks the connection flushing and reports whether the
// caller must queue it (writeQueue.push): it has bytes to write, and no
// writer has it yet. Holds c.mu.
func (c *conn) startFlushLocked() bool {
	if c.flushing || c.closed || c.flow == nil || c.out.len() == 0 {
		return false
	}
	c.flushing = true
	return true
}

// flushLoop is the blocking path of a flushing connection: it writes the
// rest of w (rest, the part of w a non-blocking write left, or all of w
// when rest is nil) with the write timeout (writeProgressing), then the
// out buffer until it is empty. Writers append under mu while a write is
// in progress; the buffers are swapped, not copied.
func (c *conn) flushLoop(w outBuf, rest net.Buffers) {
	for {
		if rest == nil {
			rest = w.vectors()
		}
		n, err := c.writeProgressing(rest)
		rest = nil
		c.add(BytesSent, n)
		w.reset()
		c.mu.Lock()
		c.spare = w // the flow stays while a flush is under way
		if err != nil {
			c.flushing = false
			c.mu.Unlock()
			c.logWriteFailed(err)
			c.close()
			return
		}
		if c.flow == nil || c.out.len() == 0 || c.closed {
			c.flushing = false
			c.restLocked()
			c.mu.Unlock()
			return
		}
		w = c.out
		c.out, c.spare = c.spare, outBuf{}
		c.mu.Unlock()
	}
}

// flushNow waits for any running flusher and writes what is left, so that
// a final DISCONNECT leaves before the socket is shut down (closeWrite).
func (c *conn) flushNow() {
	deadline := c.g.clock().Add(c.g.cfg.WriteTimeout)
	for {
		c.mu.Lock()
		if !c.flushing {
			c.flushing = true
			var w outBuf
			if c.flow != nil {
				w, c.out = c.out, outBuf{}
			}
			c.mu.Unlock()
			if w.len() > 0 {
				_ = c.nc.SetWriteDeadline(deadline)
				n, _ := w.writeTo(c.nc)
				c.add(BytesSent, n)
			}
			c.mu.Lock()
			c.flushing = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		if c.g.clock().After(deadline) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}
