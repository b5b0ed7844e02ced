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

func (p *poller) park(*conn, int64) bool { return false }
func (p *poller) closed(*conn)           {}
func (p *poller) stop()                  {}
