package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// inprocListener is the embedded broker's listener. It accepts in-process
// connections from Embedded.Dial, which skip the kernel's loopback (two
// system calls per request and per response on each side, a quarter of
// `shoal all`'s CPU at moderate load), and, when configured, connections
// of other processes on a Unix socket and on a loopback TCP address. All
// speak the same Kafka protocol to the same broker.
type inprocListener struct {
	addr   net.Addr       // advertised: the TCP address, or EmbeddedHost's
	ls     []net.Listener // the TCP and Unix listeners, if any
	socket string         // the Unix socket's path, removed by Close
	conns  chan net.Conn  // accepted connections and dialled pipes

	closeOnce sync.Once
	done      chan struct{} // closed by Close
}

// embeddedAddr is the address the broker advertises without TCP.
type embeddedAddr struct{}

func (embeddedAddr) Network() string { return "inproc" }
func (embeddedAddr) String() string  { return net.JoinHostPort(EmbeddedHost, "9092") }

// listenEmbedded opens the broker's listener: TCP on tcpAddr and a Unix
// socket at socket when they are not empty, in-process connections always.
func listenEmbedded(tcpAddr, socket string) (*inprocListener, error) {
	l := &inprocListener{addr: embeddedAddr{}, conns: make(chan net.Conn), done: make(chan struct{})}
	if tcpAddr != "" {
		tcp, err := net.Listen("tcp", tcpAddr)
		if err != nil {
			return nil, err
		}
		l.addr = tcp.Addr()
		l.ls = append(l.ls, tcp)
	}
	if socket != "" {
		ul, err := listenSocket(socket)
		if err != nil {
			_ = l.closeListeners()
			return nil, err
		}
		l.socket = socket
		l.ls = append(l.ls, ul)
	}
	for _, nl := range l.ls {
		go l.acceptFrom(nl)
	}
	return l, nil
}

// listenSocket listens on a Unix socket at path that only the process's
// user may connect to (mode 0600). The socket is made in a directory of
// mode 0700 first and renamed into place, so that there is no moment in
// which it exists with looser permissions. A file left at path by a
// process that was killed is replaced (the directory lock says no other
// broker uses it).
func listenSocket(path string) (net.Listener, error) {
	tmp, err := os.MkdirTemp(filepath.Dir(path), ".sock-")
	if err != nil {
		return nil, fmt.Errorf("unix socket: %w", err)
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	bound := filepath.Join(tmp, "s")
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: bound, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("unix socket: %w", err)
	}
	ul.SetUnlinkOnClose(false) // it is renamed; Close removes path itself
	if err := os.Chmod(bound, 0o600); err != nil {
		_ = ul.Close()
		return nil, fmt.Errorf("unix socket: %w", err)
	}
	if err := os.Rename(bound, path); err != nil {
		_ = ul.Close()
		return nil, fmt.Errorf("unix socket: %w", err)
	}
	return ul, nil
}

// socketPathFits reports whether path fits a Unix socket address (108
// bytes on Linux, 104 elsewhere, with room for the temporary name).
func socketPathFits(path string) bool {
	return len(filepath.Dir(path))+len("/.sock-1234567890/s") < 104 && len(path) < 104
}

// acceptFrom hands the connections of nl to Accept until the listener
// closes. A failed accept (out of file descriptors) is tried again after
// a pause: the broker stops listening at the first error Accept returns,
// which would end the in-process connections too.
func (l *inprocListener) acceptFrom(nl net.Listener) {
	var delay time.Duration
	for {
		c, err := nl.Accept()
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

// Close stops every kind of connection from being accepted and removes
// the Unix socket.
func (l *inprocListener) Close() error {
	var err error
	l.closeOnce.Do(func() {
		close(l.done)
		err = l.closeListeners()
	})
	return err
}

func (l *inprocListener) closeListeners() error {
	var errs []error
	for _, nl := range l.ls {
		if err := nl.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	if l.socket != "" {
		if err := os.Remove(l.socket); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Addr is the address the broker advertises: the TCP one, or
// EmbeddedHost's.
func (l *inprocListener) Addr() net.Addr { return l.addr }

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
