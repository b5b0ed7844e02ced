package kafka

import (
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// memPipe returns the two ends of an in-memory, full-duplex connection.
// Unlike net.Pipe a write never waits for the reader: it appends to the
// other end's buffer and wakes its reader, which takes all there is. The
// embedded broker's clients write whole requests and read whole
// responses, so a request costs one hand-off each way.
func memPipe() (net.Conn, net.Conn) {
	a := &pipeBuf{ready: make(chan struct{}, 1)}
	b := &pipeBuf{ready: make(chan struct{}, 1)}
	return &memConn{in: a, out: b}, &memConn{in: b, out: a}
}

// pipeChunk is the size of the chunks a pipe direction buffers in; they
// come from chunkPool and go back once read, so a busy pipe allocates
// nothing in steady state and holds only what is unread: a drained pipe
// holds no chunk, and an idle process's pipes hold nothing once the pool
// has let its chunks go (two collections).
const pipeChunk = 64 << 10

var chunkPool = sync.Pool{New: func() any { return new([pipeChunk]byte) }}

// pipeBuf is one direction of a memPipe: the bytes written and not yet
// read, in chunks[0][r:] … chunks[last][:w].
type pipeBuf struct {
	mu     sync.Mutex
	chunks []*[pipeChunk]byte
	r, w   int
	closed bool          // no more data will come
	ready  chan struct{} // a token when data arrived or the pipe closed
}

func (p *pipeBuf) write(b []byte) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return net.ErrClosed
	}
	for len(b) > 0 {
		if len(p.chunks) == 0 || p.w == pipeChunk {
			c, _ := chunkPool.Get().(*[pipeChunk]byte)
			p.chunks = append(p.chunks, c)
			p.w = 0
		}
		n := copy(p.chunks[len(p.chunks)-1][p.w:], b)
		p.w += n
		b = b[n:]
	}
	p.mu.Unlock()
	p.wake()
	return nil
}

func (p *pipeBuf) wake() {
	select {
	case p.ready <- struct{}{}:
	default:
	}
}

// close ends the direction; its chunks go back to the pool once read (or
// now, for the reader's own end, whose Read fails from now on).
func (p *pipeBuf) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.wake()
}

// take copies what is buffered into b (from the first chunk), returning
// read chunks to the pool. Holds p.mu.
func (p *pipeBuf) take(b []byte) int {
	end := pipeChunk
	if len(p.chunks) == 1 {
		end = p.w
	}
	n := copy(b, p.chunks[0][p.r:end])
	p.r += n
	if p.r == end {
		// Read to its end: the chunk goes back to the pool, the last one
		// too (drained), so that a pipe at rest holds no memory.
		chunkPool.Put(p.chunks[0])
		p.chunks[0] = nil
		p.chunks = append(p.chunks[:0], p.chunks[1:]...)
		p.r = 0
		if len(p.chunks) == 0 {
			p.w = 0
		}
	}
	return n
}

// buffered reports whether there is something to read. Holds p.mu.
func (p *pipeBuf) buffered() bool {
	return len(p.chunks) > 1 || (len(p.chunks) == 1 && p.r < p.w)
}

// read copies what is buffered into b, waiting until there is some, the
// pipe closes or the deadline (zero: none) passes.
func (p *pipeBuf) read(b []byte, deadline func() time.Time) (int, error) {
	for {
		p.mu.Lock()
		if p.buffered() {
			n := p.take(b)
			p.mu.Unlock()
			return n, nil
		}
		closed := p.closed
		p.mu.Unlock()
		if closed {
			return 0, io.EOF
		}
		d := deadline()
		if d.IsZero() {
			<-p.ready
			continue
		}
		wait := time.Until(d)
		if wait <= 0 {
			return 0, os.ErrDeadlineExceeded
		}
		t := time.NewTimer(wait)
		select {
		case <-p.ready:
			t.Stop()
		case <-t.C:
		}
	}
}

// memConn is one end of a memPipe. Reads honour the read deadline; writes
// never block, so the write deadline has nothing to bound.
type memConn struct {
	in, out *pipeBuf

	mu         sync.Mutex
	rdDeadline time.Time
	closeOnce  sync.Once
}

func (c *memConn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	return c.in.read(b, c.readDeadline)
}

func (c *memConn) readDeadline() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rdDeadline
}

func (c *memConn) Write(b []byte) (int, error) {
	if err := c.out.write(b); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Close ends both directions: the other end reads what was written
// before, then EOF, and its writes fail.
func (c *memConn) Close() error {
	c.closeOnce.Do(func() {
		c.out.close()
		c.in.close()
	})
	return nil
}

func (c *memConn) SetDeadline(t time.Time) error {
	return c.SetReadDeadline(t)
}

func (c *memConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.rdDeadline = t
	c.mu.Unlock()
	c.in.wake() // a waiting Read looks at the new deadline
	return nil
}

func (c *memConn) SetWriteDeadline(time.Time) error { return nil }

func (c *memConn) LocalAddr() net.Addr  { return memAddr{} }
func (c *memConn) RemoteAddr() net.Addr { return memAddr{} }

// memAddr is the address of both ends of a memPipe.
type memAddr struct{}

func (memAddr) Network() string { return "mem" }
func (memAddr) String() string  { return "in-process" }
