//go:build linux

package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// poller watches the sockets of parked connections with an epoll set of
// its own and one goroutine (park.go has the design). Each parked socket
// is registered with EPOLLIN | EPOLLRDHUP | EPOLLONESHOT and the
// connection's id as its token; the poller finds the connection by its id
// in Gateway.byID (a parked connection is always registered there: it
// parks after its handshake, and leaves byID only when it ends, which a
// parked connection does not). An event that arrives after the connection
// stopped being parked (woken, closed, its descriptor reused) finds it not
// parked, or wakes a connection that reads nothing and parks again: both
// harmless. Every epoll_ctl on a connection's descriptor runs inside
// syscall.RawConn.Control, which keeps the descriptor open meanwhile, so
// it never reaches a descriptor number reused by another socket.
//
// Locks: poller.mu guards every conn.parking and the wheel; it is never held
// with Gateway.mu or conn.mu.
type poller struct {
	g     *Gateway
	ctx   context.Context // the gateway's: for connections the poller starts
	epfd  int
	wakeR int // read end of the pipe that interrupts EpollWait (stop)
	wakeW int
	done  chan struct{}
	once  sync.Once // stop

	mu      sync.Mutex
	wheel   wheel
	stopped bool
	// queue holds the woken connections that were idle for park_idle or
	// longer, for the workers (conn.quickServe); work signals it.
	queue   []*conn
	work    sync.Cond
	workers sync.WaitGroup
}

// wakeToken is the epoll token of the stop pipe; connection ids are never
// 0 (they start at the gateway's epoch shifted left, plus one).
const wakeToken = 0

// newPoller opens the epoll set and starts the poller's goroutine.
func newPoller(ctx context.Context, g *Gateway) (*poller, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll create: %w", err)
	}
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_NONBLOCK|syscall.O_CLOEXEC); err != nil {
		_ = syscall.Close(epfd)
		return nil, fmt.Errorf("poller pipe: %w", err)
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN}
	setToken(&ev, wakeToken)
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, fds[0], &ev); err != nil {
		_ = syscall.Close(epfd)
		_ = syscall.Close(fds[0])
		_ = syscall.Close(fds[1])
		return nil, fmt.Errorf("epoll add pipe: %w", err)
	}
	p := &poller{
		g: g, ctx: ctx, epfd: epfd, wakeR: fds[0], wakeW: fds[1],
		done: make(chan struct{}),
	}
	p.work.L = &p.mu
	p.wheel.now = g.clock().Unix()
	for range max(4, 2*runtime.GOMAXPROCS(0)) {
		p.workers.Add(1)
		go p.worker()
	}
	go p.run()
	return p, nil
}

// errWouldBlock is what a non-blocking read returns when no byte is
// waiting.
var errWouldBlock = errors.New("no data to read")

// readNow reads what is waiting on the socket without waiting for more:
// errWouldBlock when nothing is, io.EOF when the peer closed.
func (c *conn) readNow(p []byte) (int, error) {
	tc := c.tcp
	if tc == nil {
		return 0, errors.ErrUnsupported
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("read: %w", err)
	}
	var n int
	var rerr error
	err = raw.Read(func(fd uintptr) bool {
		for {
			n, rerr = syscall.Read(int(fd), p)
			if !errors.Is(rerr, syscall.EINTR) {
				return true // never wait in the netpoller
			}
		}
	})
	switch {
	case err != nil:
		return 0, fmt.Errorf("read: %w", err) // closed
	case errors.Is(rerr, syscall.EAGAIN):
		return 0, errWouldBlock
	case rerr != nil:
		return 0, os.NewSyscallError("read", rerr)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// writeSome writes what the socket takes of b without waiting and returns
// how much that was.
func (c *conn) writeSome(b []byte) int {
	tc := c.tcp
	if tc == nil {
		return 0
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return 0
	}
	var n int
	_ = raw.Write(func(fd uintptr) bool {
		for {
			m, err := syscall.Write(int(fd), b)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			n = max(m, 0)
			return true // never wait in the netpoller
		}
	})
	return n
}

// worker serves the connections of the queue until the poller stops.
func (p *poller) worker() {
	defer p.workers.Done()
	buf := make([]byte, readBufferSize) // lent to each connection in turn
	p.mu.Lock()
	for {
		for len(p.queue) == 0 && !p.stopped {
			p.work.Wait()
		}
		if len(p.queue) == 0 {
			p.mu.Unlock()
			return
		}
		c := p.queue[0]
		p.queue[0] = nil
		p.queue = p.queue[1:]
		if len(p.queue) == 0 {
			p.queue = nil // do not keep a wave's backing array
		}
		p.mu.Unlock()
		c.quickServe(p.ctx, buf)
		p.mu.Lock()
	}
}

func setToken(ev *syscall.EpollEvent, tok uint64) {
	ev.Fd, ev.Pad = int32(uint32(tok)), int32(uint32(tok>>32))
}

func token(ev *syscall.EpollEvent) uint64 {
	return uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
}

// park registers c's socket (or re-arms it) and marks c parked;
// due is its keep alive deadline in unix seconds (0: none). It reports
// false when the poller stopped or the socket is closed.
func (p *poller) park(c *conn, due int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	// A connection being closed does not park: closing is set before
	// serverClose looks for a parked connection under p.mu (closed), so
	// either it finds this one parked or this one sees closing.
	if p.stopped || c.closing.Load() {
		return false
	}
	tc := c.tcp // never nil, for a parkable connection
	if tc == nil {
		return false
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return false // closed: the caller's next read says so
	}
	var ctlErr error
	err = raw.Control(func(fd uintptr) {
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLONESHOT}
		setToken(&ev, c.id)
		op := syscall.EPOLL_CTL_MOD
		if !c.parking.registered {
			op = syscall.EPOLL_CTL_ADD
		}
		ctlErr = syscall.EpollCtl(p.epfd, op, int(fd), &ev)
		if errors.Is(ctlErr, syscall.ENOENT) && op == syscall.EPOLL_CTL_MOD {
			ctlErr = syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_ADD, int(fd), &ev)
		}
	})
	if err != nil {
		return false // closed: the caller's next read says so
	}
	if ctlErr != nil {
		c.logWarn(context.Background(), "park connection", "err", fmt.Errorf("epoll ctl: %w", ctlErr))
		return false
	}
	c.parking.registered, c.parking.parked, c.parking.due = true, true, due
	p.g.parked.Add(1)
	p.g.parks.Add(1)
	if due > 0 {
		p.wheel.add(c)
	}
	return true
}

// take ends c's parking. Holds p.mu.
func (p *poller) take(c *conn) {
	c.parking.parked = false
	p.g.parked.Add(-1)
	if c.parking.due > 0 {
		p.wheel.remove(c)
		c.parking.due = 0
	}
}

// closed hands a connection whose socket the gateway closed, or whose
// close it began (closing), back to a reader, if it is parked.
func (p *poller) closed(c *conn) {
	p.mu.Lock()
	parked := c.parking.parked
	if parked {
		p.take(c)
	}
	p.mu.Unlock()
	if parked {
		go c.resume()
	}
}

// stop ends the poller: every connection still parked gets a reader back
// (which reads with a goroutine from then on), and later parks fail.
func (p *poller) stop() {
	p.once.Do(func() {
		_, _ = syscall.Write(p.wakeW, []byte{1})
		<-p.done
		p.workers.Wait()
		_ = syscall.Close(p.epfd)
		_ = syscall.Close(p.wakeR)
		_ = syscall.Close(p.wakeW)
	})
}

// run waits for events and advances the keep-alive wheel every second.
func (p *poller) run() {
	defer close(p.done)
	events := make([]syscall.EpollEvent, 256)
	var ready, woken, expired []*conn
	for {
		wait := int(time.Second/time.Millisecond) - int(time.Now().UnixMilli()%1000)
		n, err := syscall.EpollWait(p.epfd, events, wait)
		stop := false
		if err != nil && !errors.Is(err, syscall.EINTR) {
			p.g.log.Error("parked connections: poller stops", "err", fmt.Errorf("epoll wait: %w", err))
			n, stop = 0, true
		}
		p.g.mu.RLock()
		for i := range max(n, 0) {
			tok := token(&events[i])
			if tok == wakeToken {
				stop = true
			} else if c := p.g.byID[tok]; c != nil {
				ready = append(ready, c)
			}
		}
		p.g.mu.RUnlock()
		if stop {
			ready = p.g.appendConns(ready) // every parked one is among them
		}
		p.mu.Lock()
		now := p.g.clock().UnixNano()
		queued := false
		for _, c := range ready {
			if !c.parking.parked {
				continue
			}
			p.take(c)
			if !stop && now-c.lastPacket >= int64(p.g.cfg.ParkIdle) {
				// Idle for park_idle or more: a ping, a sporadic message.
				p.queue = append(p.queue, c)
				queued = true
			} else {
				woken = append(woken, c)
			}
		}
		if queued {
			p.work.Broadcast()
		}
		expired = p.wheel.advance(p.g.clock().Unix(), expired)
		for _, c := range expired {
			c.parking.due = 0 // out of the wheel already
			p.take(c)
		}
		p.stopped = stop
		if stop {
			p.work.Broadcast() // the workers drain the queue and end
		}
		p.mu.Unlock()
		for _, c := range woken {
			go c.resume()
		}
		for _, c := range expired {
			go c.expire()
		}
		clear(ready)
		clear(woken)
		clear(expired)
		ready, woken, expired = ready[:0], woken[:0], expired[:0]
		if stop {
			return
		}
	}
}
