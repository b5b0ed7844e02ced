//go:build !unix

package listener

import (
	"errors"
	"syscall"
)

// peek is not implemented here: a PROXY protocol listener refuses every
// connection (the gateway runs on Linux; this keeps the package building).
func peek(syscall.RawConn) (byte, error) {
	return 0, errors.ErrUnsupported
}
