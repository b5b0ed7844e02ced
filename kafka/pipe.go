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

// maxIdlePipeBuf is the most buffer a drained pipe direction keeps.
const maxIdlePipeBuf = 1 << 20

// pipeBuf is one direction of a memPipe.
type pipeBuf struct {
	mu     sync.Mutex
	data   []byte
	off    int
	closed bool          // no more data will come
	ready  chan struct{} // a token when data arrived or the pipe closed
}

func (p *pipeBuf) write(b []byte) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return net.ErrClosed
	}
	switch {
	case p.off == len(p.data) && cap(p.data) > maxIdlePipeBuf:
		p.data, p.off = nil, 0 // drained after a burst: let the memory go
	case p.off == len(p.data):
		p.data, p.off = p.data[:0], 0
	case p.off >= len(p.data)/2:
		// The reader is behind but has taken most: move the rest to the
		// front, so a reader that never quite catches up does not grow
		// the buffer without bound.
		n := copy(p.data, p.data[p.off:])
		p.data, p.off = p.data[:n], 0
	}
	p.data = append(p.data, b...)
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

func (p *pipeBuf) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.wake()
}

// read copies what is buffered into b, waiting until there is some, the
// pipe closes or the deadline (zero: none) passes.
func (p *pipeBuf) read(b []byte, deadline func() time.Time) (int, error) {
	for {
		p.mu.Lock()
		if p.off < len(p.data) {
			n := copy(b, p.data[p.off:])
			p.off += n
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
