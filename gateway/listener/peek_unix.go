//go:build unix

package listener

import (
	"errors"
	"io"
	"syscall"
)

// peek waits, in the runtime's poller and within the socket's read
// deadline, for a byte to read, and returns it without taking it.
func peek(rc syscall.RawConn) (byte, error) {
	var b [1]byte
	var n int
	var perr error
	err := rc.Read(func(fd uintptr) bool {
		for {
			n, _, perr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK)
			if !errors.Is(perr, syscall.EINTR) {
				return !errors.Is(perr, syscall.EAGAIN) // EAGAIN: wait for readiness
			}
		}
	})
	switch {
	case err != nil:
		return 0, err // the deadline passed, or the socket was closed
	case perr != nil:
		return 0, perr
	case n == 0:
		return 0, io.EOF
	}
	return b[0], nil
}
