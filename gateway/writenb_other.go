//go:build !linux

package gateway

import "net"

// newNonBlockingWriter returns nc's own non-blocking writer, if it has one:
// elsewhere than on Linux every connection writes on the blocking path.
func newNonBlockingWriter(nc net.Conn, _ *net.TCPConn) nonBlockingWriter {
	if w, ok := nc.(nonBlockingWriter); ok {
		return w
	}
	return nil
}
