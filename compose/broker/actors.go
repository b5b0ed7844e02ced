package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/oklog/run"

	"github.com/shoal-mqtt/shoal/gateway"
	routersvc "github.com/shoal-mqtt/shoal/router-svc"
)

// group runs the broker's actors: each role's Run(ctx) error with the
// interrupt that stops it (an oklog/run group, as Thanos and Loki run
// theirs). When one actor returns, every other is interrupted, in the
// order they were added, and run returns the first actor's error.
//
// Shutdown has two phases. The gateway stops first and reports every
// connection's end to the log (wills, session ends) while the router and
// the session service still consume; the producer is flushed; only then
// are the router and the session service stopped. So the back roles'
// interrupt waits for the gateway (added before them) to return.
type group struct {
	g run.Group

	gwDone   chan struct{} // closed when the gateway's Run returned (or at once without one)
	stopBack func()        // once: waits for gwDone, flushes, stops the back roles
}

// actors builds the run group for the roles newRoles created.
func (b *Broker) actors(ctx context.Context, bb *backbone) (*group, error) {
	b.mu.Lock()
	gw, router, session, br := b.gateway, b.router, b.session, b.bridge
	b.mu.Unlock()
	grp := &group{gwDone: make(chan struct{})}

	// The context: the process was told to stop.
	stop := make(chan struct{})
	grp.g.Add(func() error {
		select {
		case <-ctx.Done():
		case <-stop:
		}
		return nil
	}, func(error) { close(stop) })

	if err := b.addHTTP(grp); err != nil {
		return nil, err
	}
	if err := b.addAdmin(ctx, grp, bb); err != nil { // admin.go
		return nil, err
	}

	for _, r := range bb.reloadables {
		// The auth files are reloaded when they change (and on SIGHUP:
		// Broker.Reload).
		wctx, stopWatch := context.WithCancel(ctx)
		grp.g.Add(func() error {
			r.Watch(wctx, time.Second)
			return nil
		}, func(error) { stopWatch() })
	}
	b.mu.Lock()
	b.reloadables = bb.reloadables
	b.mu.Unlock()
	if gw != nil {
		b.addGateway(ctx, grp, gw, router)
	} else {
		close(grp.gwDone)
	}

	// The back roles run on a context of their own that outlives ctx:
	// they stop in the second phase.
	backCtx, cancelBack := context.WithCancel(context.WithoutCancel(ctx))
	var once sync.Once
	grp.stopBack = func() {
		once.Do(func() {
			<-grp.gwDone
			fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := bb.client.Flush(fctx); err != nil {
				b.log.Warn("flush kafka at shutdown", "err", err)
			}
			// The gateway's own producer holds the express path's
			// records back (gateway.express_linger): they go now.
			if bb.gwClient != bb.client {
				if err := bb.gwClient.Flush(fctx); err != nil {
					b.log.Warn("flush the gateway's kafka producer at shutdown", "err", err)
				}
			}
			cancel()
			cancelBack()
		})
	}
	addBack := func(name string, f func(context.Context) error) {
		grp.g.Add(func() error {
			if err := f(backCtx); err != nil {
				err = fmt.Errorf("%s: %w", name, err)
				b.log.Error("role failed", "err", err)
				return err
			}
			return nil
		}, func(error) { grp.stopBack() })
	}
	if router != nil {
		addBack("router", router.Run)
	}
	if session != nil {
		addBack("session", session.Run)
	}
	if br != nil {
		addBack("bridge", br.Run)
	}
	return grp, nil
}

// addGateway adds the gateway, and the watch that returns memory to the
// system after each wave of connections and each burst of traffic when
// idle connections are parked; with the router of the process (or nil),
// whose free buffers it lets go first.
func (b *Broker) addGateway(ctx context.Context, grp *group, gw *gateway.Gateway, router *routersvc.Router) {
	gwCtx, stopGW := context.WithCancel(ctx)
	grp.g.Add(func() error {
		defer close(grp.gwDone)
		if b.cfg.Gateway.ParkIdle > 0 {
			total := func() int64 { return gw.Stats.Load(gateway.ConnectionsTotal) }
			messages := func() int64 {
				return gw.Stats.Load(gateway.MessagesReceived) + gw.Stats.Load(gateway.MessagesSent)
			}
			trim := func() {}
			if router != nil {
				trim = router.Trim
			}
			go releaseAfterWaves(gwCtx, total, gw.Parked, messages, trim, b.log)
		}
		// The gateway's errors name it already ("gateway: listen …").
		return gw.Run(gwCtx)
	}, func(error) { stopGW() })
}

// addHTTP listens on http_listen (when set) for /healthz, /readyz,
// /metrics and pprof; the server stops within a second at shutdown.
func (b *Broker) addHTTP(grp *group) error {
	if b.cfg.HTTPListen == "" {
		return nil
	}
	ln, err := net.Listen("tcp", b.cfg.HTTPListen)
	if err != nil {
		return fmt.Errorf("listen http %s: %w", b.cfg.HTTPListen, err)
	}
	b.mu.Lock()
	b.httpAddr = ln.Addr()
	b.mu.Unlock()
	b.log.Info("http listening", "addr", ln.Addr().String())
	srv := &http.Server{Handler: b.httpHandler(), ReadHeaderTimeout: 5 * time.Second}
	grp.g.Add(func() error {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http: %w", err)
		}
		return nil
	}, func(error) {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = srv.Shutdown(sctx)
		cancel()
	})
	return nil
}

// run runs every actor until the first returns, stops the rest, and
// returns the first one's error. The back roles are stopped even when no
// actor of theirs is left to interrupt (a gateway alone).
func (grp *group) run() error {
	err := grp.g.Run()
	if grp.stopBack != nil {
		grp.stopBack()
	}
	return err
}
