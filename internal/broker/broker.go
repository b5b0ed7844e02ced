package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/shoal-mqtt/shoal/gateway"
	"github.com/shoal-mqtt/shoal/internal/config"
	"github.com/shoal-mqtt/shoal/internal/store/pebblestore"
	"github.com/shoal-mqtt/shoal/kafka"
	routersvc "github.com/shoal-mqtt/shoal/router-svc"
	sessionsvc "github.com/shoal-mqtt/shoal/session-svc"
)

// Broker is `shoal all`: every role in one process.
type Broker struct {
	cfg     config.Config
	log     *slog.Logger
	version string
	clock   func() time.Time

	mu       sync.Mutex
	gateway  *gateway.Gateway
	router   *routersvc.Router
	session  *sessionsvc.Service
	httpAddr net.Addr
	started  chan struct{}
}

// New returns a broker for cfg (already validated by config.Load).
func New(cfg config.Config, log *slog.Logger, version string) *Broker {
	return &Broker{cfg: cfg, log: log, version: version, clock: time.Now, started: make(chan struct{})}
}

// Ready reports whether every role is ready.
func (b *Broker) Ready() bool { return b.notReady() == "" }

func (b *Broker) notReady() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var not []string
	if b.router == nil || !b.router.Ready() {
		not = append(not, "router")
	}
	if b.session == nil || !b.session.Ready() {
		not = append(not, "session")
	}
	if b.gateway == nil || !b.gateway.Ready() {
		not = append(not, "gateway")
	}
	return strings.Join(not, ", ")
}

// Started is closed once every role has been created (listeners may still
// be opening: poll Ready).
func (b *Broker) Started() <-chan struct{} { return b.started }

// Addr returns a bound listener address: "mqtt", "ws" or "http".
func (b *Broker) Addr(name string) net.Addr {
	b.mu.Lock()
	defer b.mu.Unlock()
	if name == "http" {
		return b.httpAddr
	}
	if b.gateway == nil {
		return nil
	}
	return b.gateway.Addr(name)
}

// Run runs the broker until ctx is done or a role fails.
func (b *Broker) Run(ctx context.Context) (err error) {
	cfg := b.cfg
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}

	brokers := cfg.Kafka.Brokers
	if len(brokers) == 0 {
		emb, err := kafka.StartEmbedded(kafka.EmbeddedConfig{
			Dir:  filepath.Join(cfg.DataDir, "kafka"),
			Addr: cfg.Kafka.EmbeddedAddr,
		}, b.log)
		if err != nil {
			return fmt.Errorf("embedded kafka: %w", err)
		}
		defer func() {
			if cerr := emb.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("close embedded kafka: %w", cerr)
			}
		}()
		brokers = emb.Addrs()
	}
	cat := kafka.DefaultCatalogue()
	for _, t := range []*kafka.TopicSpec{&cat.Messages, &cat.Sessions, &cat.Presence, &cat.Deliveries} {
		t.Partitions = cfg.Kafka.Partitions
	}
	client, err := kafka.NewClient(ctx, kafka.Config{Brokers: brokers, ClientID: "shoal-all", Catalogue: cat}, b.log)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer client.Close()
	if err := client.EnsureTopics(ctx); err != nil {
		return fmt.Errorf("kafka topics: %w", err)
	}

	db, err := pebblestore.Open(filepath.Join(cfg.DataDir, "views"), b.log)
	if err != nil {
		return fmt.Errorf("view store: %w", err)
	}
	defer func() {
		if cerr := db.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close view store: %w", cerr)
		}
	}()

	router, err := routersvc.New(cfg.Router, client, db, b.log, b.clock)
	if err != nil {
		return err
	}
	session, err := sessionsvc.New(cfg.Session, client, db, b.log, b.clock)
	if err != nil {
		return err
	}
	gw, err := gateway.NewVersion(cfg.Gateway, client, b.log, b.clock, b.version)
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.router, b.session, b.gateway = router, session, gw
	b.mu.Unlock()

	// Phase 2 roles: stop after the gateway.
	backCtx, stopBack := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBack()
	errc := make(chan error, 4)
	var back sync.WaitGroup
	run := func(name string, f func(context.Context) error) {
		back.Add(1)
		go func() {
			defer back.Done()
			if err := f(backCtx); err != nil {
				errc <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	run("router", router.Run)
	run("session", session.Run)

	var srv *http.Server
	if cfg.HTTPListen != "" {
		ln, err := net.Listen("tcp", cfg.HTTPListen)
		if err != nil {
			stopBack()
			back.Wait()
			return fmt.Errorf("listen http %s: %w", cfg.HTTPListen, err)
		}
		b.mu.Lock()
		b.httpAddr = ln.Addr()
		b.mu.Unlock()
		srv = &http.Server{Handler: b.httpHandler(), ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("http: %w", err)
			}
		}()
	}

	gwCtx, stopGW := context.WithCancel(ctx)
	defer stopGW()
	gwDone := make(chan error, 1)
	go func() { gwDone <- gw.Run(gwCtx) }()
	close(b.started)

	select {
	case <-ctx.Done():
	case err = <-errc:
		b.log.Error("role failed", "err", err)
	case err = <-gwDone:
		gwDone <- err
		if err != nil {
			err = fmt.Errorf("gateway: %w", err)
		}
	}
	stopGW()
	if gerr := <-gwDone; gerr != nil && err == nil {
		err = fmt.Errorf("gateway: %w", gerr)
	}
	if srv != nil {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = srv.Shutdown(sctx)
		cancel()
	}
	fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	if ferr := client.Flush(fctx); ferr != nil {
		b.log.Warn("flush kafka at shutdown", "err", ferr)
	}
	cancel()
	stopBack()
	back.Wait()
	return err
}
