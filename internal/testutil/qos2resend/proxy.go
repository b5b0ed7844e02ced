package qos2resend

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy forwards TCP connections from its loopback address to a target.
type Proxy struct {
	ln net.Listener

	mu     sync.Mutex
	target string
	muted  bool // bytes from the target are dropped
	paused bool // new connections are closed at once
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// NewProxy listens on a loopback port and forwards to target until the
// test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		p.Cut()
		p.wg.Wait()
	})
	return p
}

// Addr is the address clients connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetTarget points new connections at addr.
func (p *Proxy) SetTarget(addr string) {
	p.mu.Lock()
	p.target = addr
	p.mu.Unlock()
}

// Mute drops (on) or forwards again (off) what the target sends.
func (p *Proxy) Mute(on bool) {
	p.mu.Lock()
	p.muted = on
	p.mu.Unlock()
}

// Pause closes new connections at once (on), or forwards them again.
func (p *Proxy) Pause(on bool) {
	p.mu.Lock()
	p.paused = on
	p.mu.Unlock()
}

// Cut closes every connection through the proxy, on both sides.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		target, paused := p.target, p.paused
		p.mu.Unlock()
		if paused {
			_ = c.Close()
			continue
		}
		up, err := net.DialTimeout("tcp", target, 5*time.Second)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		ended := new(atomic.Int32)
		go p.pipe(up, c, false, ended)
		go p.pipe(c, up, true, ended)
	}
}

// pipe copies src to dst (dropping it while muted, if src is the
// target). When src ends with EOF, dst is only half-closed: the peer reads
// everything written before it, then EOF, and the other direction goes on
// until that peer closes. Closing dst instead, with bytes from it still
// unread, would make the kernel send a reset in place of the FIN and
// could drop what was just written (a client's last PUBLISH before its
// DISCONNECT). Both are closed once both directions ended (ended counts
// them), or at once on any other end (a reset, Cut).
func (p *Proxy) pipe(dst, src net.Conn, fromTarget bool, ended *atomic.Int32) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			drop := fromTarget && p.muted
			p.mu.Unlock()
			if !drop {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
		}
		if errors.Is(err, io.EOF) {
			if tc, ok := dst.(*net.TCPConn); ok && tc.CloseWrite() == nil && ended.Add(1) < 2 {
				return
			}
		}
		if err != nil {
			break
		}
	}
	_ = dst.Close()
	_ = src.Close()
}
