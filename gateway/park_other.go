//go:build !linux

package gateway

import (
	"context"
	"errors"
)

// poller parks idle connections where the gateway has an epoll
// implementation (park_linux.go). Elsewhere every connection keeps its
// reader goroutine: newPoller fails and Gateway.park stays nil.
type poller struct {
	ctx context.Context
}

func newPoller(context.Context, *Gateway) (*poller, error) {
	return nil, errors.ErrUnsupported
}

// errWouldBlock is what a non-blocking read returns when no byte is
// waiting; connections never read without blocking here.
var errWouldBlock = errors.New("no data to read")

func (c *conn) readNow([]byte) (int, error) { return 0, errors.ErrUnsupported }
func (c *conn) writeSome([]byte) int        { return 0 }

func (p *poller) park(*conn, int64) bool { return false }
func (p *poller) closed(*conn)           {}
func (p *poller) stop()                  {}
