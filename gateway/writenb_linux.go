//go:build linux

package gateway

import (
	"errors"
	"net"
	"syscall"
	"unsafe"
)

// maxIovecs is the most buffers one writev takes (IOV_MAX on Linux).
const maxIovecs = 1024

// tcpWriter writes to a TCP socket without blocking: the socket is in
// non-blocking mode (as every socket of Go's netpoller), so write and
// writev return EAGAIN where a blocking write would wait.
type tcpWriter struct {
	rc  syscall.RawConn
	iov []syscall.Iovec
}

// newNonBlockingWriter returns the non-blocking writer of nc, or nil when
// it has none; tc is nc's TCP socket when nc's bytes are the socket's own
// (conn.tcp), else nil.
func newNonBlockingWriter(nc net.Conn, tc *net.TCPConn) nonBlockingWriter {
	if w, ok := nc.(nonBlockingWriter); ok {
		return w
	}
	if tc == nil {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return &tcpWriter{rc: rc}
}

func (t *tcpWriter) writeNB(bufs [][]byte) (n int, blocked bool, err error) {
	// i, off: the next byte to write is bufs[i][off]; bufs itself is not
	// modified (the caller consumes the n bytes written).
	i, off := 0, 0
	rerr := t.rc.Write(func(fd uintptr) bool {
		for {
			for i < len(bufs) && off == len(bufs[i]) {
				i, off = i+1, 0
			}
			if i == len(bufs) {
				return true
			}
			var m int
			var e error
			if i == len(bufs)-1 {
				m, e = syscall.Write(int(fd), bufs[i][off:])
			} else {
				m, e = t.writev(fd, bufs[i:], off)
			}
			switch {
			case errors.Is(e, syscall.EINTR):
				continue
			case errors.Is(e, syscall.EAGAIN):
				blocked = true
				return true // never wait for the socket here
			case e != nil:
				err = e
				return true
			}
			n += m
			for m > 0 {
				k := min(m, len(bufs[i])-off)
				m -= k
				off += k
				if off == len(bufs[i]) && m > 0 {
					i, off = i+1, 0
				}
			}
		}
	})
	if rerr != nil && err == nil {
		err = rerr
	}
	return n, blocked, err
}

// writev writes bufs, the first from off (up to maxIovecs of them), with
// one system call.
func (t *tcpWriter) writev(fd uintptr, bufs [][]byte, off int) (int, error) {
	t.iov = t.iov[:0]
	for j, b := range bufs[:min(len(bufs), maxIovecs)] {
		if j == 0 {
			b = b[off:]
		}
		if len(b) == 0 {
			continue
		}
		v := syscall.Iovec{Base: &b[0]}
		v.SetLen(len(b))
		t.iov = append(t.iov, v)
	}
	r, _, errno := syscall.Syscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&t.iov[0])), uintptr(len(t.iov)))
	clear(t.iov) // drop the references to the buffers
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}
