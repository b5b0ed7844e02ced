package gateway

import (
	"context"
	"fmt"
	"net"
	"sync"

	"github.com/shoal-mqtt/shoal/gateway/listener"
)

// The listeners the configuration opens (package listener is the layer
// that accepts connections): MQTT over TCP at Config.MQTTListen, named
// "mqtt", and over WebSocket at Config.WSListen, named "ws". Every
// connection they accept goes to serve, whichever listener it came from.

// openListeners binds the configured listeners. When one fails, those
// bound already are closed.
func (g *Gateway) openListeners() ([]listener.Listener, error) {
	var ls []listener.Listener
	if g.cfg.MQTTListen != "" {
		l, err := listener.ListenTCP("mqtt", g.cfg.MQTTListen, g.log)
		if err != nil {
			return nil, fmt.Errorf("gateway: listen mqtt %s: %w", g.cfg.MQTTListen, err)
		}
		g.setAddr(l.Name(), l.Addr())
		ls = append(ls, l)
	}
	if g.cfg.WSListen != "" {
		l, err := listener.ListenWebSocket("ws", g.cfg.WSListen, listener.WebSocketOptions{
			ReadLimit:     int64(g.cfg.MaxPacketSize) + 8,
			HeaderTimeout: g.cfg.ConnectTimeout,
		}, g.log)
		if err != nil {
			closeListeners(ls)
			return nil, fmt.Errorf("gateway: listen websocket %s: %w", g.cfg.WSListen, err)
		}
		g.setAddr(l.Name(), l.Addr())
		ls = append(ls, l)
	}
	return ls, nil
}

// serveListeners serves each listener on a goroutine of wg until ctx ends;
// a listener that fails sends its error to errc.
func (g *Gateway) serveListeners(ctx context.Context, ls []listener.Listener, wg *sync.WaitGroup, errc chan<- error) {
	for _, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.Serve(ctx, g.serve); err != nil {
				errc <- fmt.Errorf("gateway: %w", err)
			}
		}()
	}
}

// closeListeners stops every listener accepting.
func closeListeners(ls []listener.Listener) {
	for _, l := range ls {
		_ = l.Close()
	}
}

// Addr returns the bound address of a listener ("mqtt" or "ws"), or nil.
func (g *Gateway) Addr(name string) net.Addr {
	g.addrsMu.Lock()
	defer g.addrsMu.Unlock()
	return g.addrs[name]
}

func (g *Gateway) setAddr(name string, a net.Addr) {
	g.addrsMu.Lock()
	g.addrs[name] = a
	g.addrsMu.Unlock()
}
