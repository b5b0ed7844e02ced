package kafka

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"
)

// inprocListener is the embedded broker's listener: it accepts TCP
// connections on its loopback address, for tools and other processes, and
// in-process connections from Embedded.Dial, which skip the kernel's
// loopback (two system calls per request and per response on each side,
// a quarter of `shoal all`'s CPU at moderate load). Both speak the same
// Kafka protocol to the same broker.
type inprocListener struct {
	tcp   net.Listener
	conns chan net.Conn // accepted TCP connections and dialled pipes

	closeOnce sync.Once
	done      chan struct{} // closed by Close
}

func newInprocListener(tcp net.Listener) *inprocListener {
	l := &inprocListener{tcp: tcp, conns: make(chan net.Conn), done: make(chan struct{})}
	go l.acceptTCP()
	return l
}

// acceptTCP hands TCP connections to Accept until the listener closes. A
// failed accept (out of file descriptors) is tried again after a pause:
// the broker stops listening at the first error Accept returns, which
// would end the in-process connections too.
func (l *inprocListener) acceptTCP() {
	var delay time.Duration
	for {
		c, err := l.tcp.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(delay):
				continue
			case <-l.done:
				return
			}
		}
		delay = 0
		select {
		case l.conns <- c:
		case <-l.done:
			_ = c.Close()
			return
		}
	}
}

// Accept returns the next connection, TCP or in-process, until Close.
func (l *inprocListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops both kinds of connections from being accepted.
func (l *inprocListener) Close() error {
	var err error
	l.closeOnce.Do(func() {
		close(l.done)
		err = l.tcp.Close()
	})
	return err
}

// Addr is the TCP address, which the broker advertises.
func (l *inprocListener) Addr() net.Addr { return l.tcp.Addr() }

// dial connects in-process: the broker accepts the other end of a pipe.
func (l *inprocListener) dial(ctx context.Context) (net.Conn, error) {
	client, server := memPipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
	case <-ctx.Done():
		_ = client.Close()
		_ = server.Close()
		return nil, ctx.Err()
	}
	_ = client.Close()
	_ = server.Close()
	return nil, errEmbeddedClosed
}

var errEmbeddedClosed = errors.New("embedded kafka is closed")

// inprocDialer dials the addresses of ls in-process and any other over
// the network.
type inprocDialer struct {
	mu sync.Mutex
	ls map[string]*inprocListener // by address
	nd net.Dialer
}

func (d *inprocDialer) add(l *inprocListener) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ls == nil {
		d.ls = make(map[string]*inprocListener)
	}
	d.ls[l.Addr().String()] = l
}

// DialContext is a kgo.Dialer.
func (d *inprocDialer) DialContext(ctx context.Context, network, host string) (net.Conn, error) {
	d.mu.Lock()
	l := d.ls[host]
	d.mu.Unlock()
	if l != nil {
		return l.dial(ctx)
	}
	return d.nd.DialContext(ctx, network, host)
}
