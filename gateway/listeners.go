package gateway

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/shoal-mqtt/shoal/gateway/listener"
)

// The listeners the configuration opens (package listener is the layer
// that accepts connections): MQTT over TCP at Config.MQTTListen, named
// "mqtt"; over WebSocket at Config.WSListen, named "ws"; over TLS at
// Config.MQTTSListen, named "mqtts"; over WebSocket over TLS at
// Config.WSSListen, named "wss". Every connection they accept goes to
// serve, whichever listener it came from. The TLS listeners share one
// listener.Certificates, loaded when they open, watched while they serve
// and reloaded by ReloadTLS. Every listener reads PROXY protocol headers
// as Config.ProxyProtocol says (Config.Proxy): before the TLS handshake
// on mqtts, before the HTTP request on ws and wss.

// tlsWatchInterval is how often the TLS files are polled for a change.
const tlsWatchInterval = time.Second

// openListeners binds the configured listeners, after loading the TLS
// material when a TLS listener is configured. When one fails, those bound
// already are closed.
func (g *Gateway) openListeners() (ls []listener.Listener, err error) {
	defer func() {
		if err != nil {
			closeListeners(ls)
			ls = nil
		}
	}()
	proxy, err := g.cfg.Proxy()
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	var certs *listener.Certificates
	if g.cfg.MQTTSListen != "" || g.cfg.WSSListen != "" {
		if certs, err = listener.OpenCertificates(g.cfg.TLS.Files(), g.log); err != nil {
			return nil, fmt.Errorf("gateway: %w", err)
		}
		g.certs.Store(certs)
	}
	add := func(l listener.Listener, err error, what, addr string) error {
		if err != nil {
			return fmt.Errorf("gateway: listen %s %s: %w", what, addr, err)
		}
		g.setAddr(l.Name(), l.Addr())
		ls = append(ls, l)
		return nil
	}
	ws := func(name, addr string, withTLS *listener.Certificates) (listener.Listener, error) {
		opts := listener.WebSocketOptions{
			ReadLimit:      int64(g.cfg.MaxPacketSize) + 8,
			HeaderTimeout:  g.cfg.ConnectTimeout,
			AllowedOrigins: g.cfg.WSAllowedOrigins,
			Proxy:          proxy,
		}
		if withTLS != nil {
			opts.TLS = withTLS.ServerConfig()
		}
		return listener.ListenWebSocket(name, addr, opts, g.log)
	}
	if addr := g.cfg.MQTTListen; addr != "" {
		l, err := listener.ListenTCP("mqtt", addr, g.log)
		if err := add(l, err, "mqtt", addr); err != nil {
			return ls, err
		}
		l.AcceptProxy(proxy)
	}
	if addr := g.cfg.WSListen; addr != "" {
		l, err := ws("ws", addr, nil)
		if err := add(l, err, "websocket", addr); err != nil {
			return ls, err
		}
	}
	if addr := g.cfg.MQTTSListen; addr != "" {
		// The handshake is bounded by the connect timeout, as the wait for
		// CONNECT after it is.
		l, err := listener.ListenTLS("mqtts", addr, certs.ServerConfig(), g.cfg.ConnectTimeout, g.log)
		if err := add(l, err, "mqtts", addr); err != nil {
			return ls, err
		}
		l.AcceptProxy(proxy)
	}
	if addr := g.cfg.WSSListen; addr != "" {
		l, err := ws("wss", addr, certs)
		if err := add(l, err, "wss", addr); err != nil {
			return ls, err
		}
	}
	return ls, nil
}

// serveListeners serves each listener on a goroutine of wg until ctx ends,
// and watches the TLS files meanwhile; a listener that fails sends its
// error to errc.
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
	if certs := g.certs.Load(); certs != nil {
		wg.Go(func() { certs.Watch(ctx, tlsWatchInterval) })
	}
}

// ReloadTLS reads the TLS listeners' certificate, key and client CA files
// again (the process calls it on SIGHUP; a watch also reloads them when
// they change). New handshakes use the new material; established
// connections keep theirs. When the files do not load, the material in
// force stays and the error (naming the file) is logged and returned. It
// does nothing before the TLS listeners opened, or without them.
func (g *Gateway) ReloadTLS() error {
	certs := g.certs.Load()
	if certs == nil {
		return nil
	}
	return certs.Reload()
}

// closeListeners stops every listener accepting.
func closeListeners(ls []listener.Listener) {
	for _, l := range ls {
		_ = l.Close()
	}
}

// Addr returns the bound address of a listener ("mqtt", "ws", "mqtts" or
// "wss"), or nil.
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
