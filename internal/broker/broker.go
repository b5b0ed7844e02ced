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
	"github.com/shoal-mqtt/shoal/internal/store/cqlstore"
	"github.com/shoal-mqtt/shoal/internal/store/pebblestore"
	"github.com/shoal-mqtt/shoal/kafka"
	routersvc "github.com/shoal-mqtt/shoal/router-svc"
	sessionsvc "github.com/shoal-mqtt/shoal/session-svc"
)

// Role is one of Shoal's roles; a Broker runs a set of them.
type Role uint8

// The roles.
const (
	RoleGateway Role = 1 << iota
	RoleRouter
	RoleSession
	// RolesAll is `shoal all`.
	RolesAll = RoleGateway | RoleRouter | RoleSession
)

// String names the roles of r, joined by "+": "gateway+router".
func (r Role) String() string {
	var names []string
	for _, x := range []struct {
		role Role
		name string
	}{{RoleGateway, "gateway"}, {RoleRouter, "router"}, {RoleSession, "session"}} {
		if r&x.role != 0 {
			names = append(names, x.name)
		}
	}
	if r == RolesAll {
		return "all"
	}
	return strings.Join(names, "+")
}

// Broker runs a set of roles in one process: `shoal all` (every role, on
// the embedded backbone or an external one) or one role of a distributed
// deployment (`shoal gateway`, `shoal router`, `shoal session`).
type Broker struct {
	cfg     config.Config
	roles   Role
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

// New returns a broker running every role for cfg (already validated by
// config.Load).
func New(cfg config.Config, log *slog.Logger, version string) *Broker {
	return NewRoles(cfg, RolesAll, log, version)
}

// NewRoles returns a broker running roles for cfg.
func NewRoles(cfg config.Config, roles Role, log *slog.Logger, version string) *Broker {
	return &Broker{cfg: cfg, roles: roles, log: log, version: version, clock: time.Now, started: make(chan struct{})}
}

// Ready reports whether every role is ready.
func (b *Broker) Ready() bool { return b.notReady() == "" }

func (b *Broker) notReady() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var not []string
	if b.roles&RoleRouter != 0 && (b.router == nil || !b.router.Ready()) {
		not = append(not, "router")
	}
	if b.roles&RoleSession != 0 && (b.session == nil || !b.session.Ready()) {
		not = append(not, "session")
	}
	if b.roles&RoleGateway != 0 && (b.gateway == nil || !b.gateway.Ready()) {
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

// checkRoles reports a configuration the roles cannot run with: a role of
// a distributed deployment needs the external Kafka and, but for the
// gateway with an explicit slot, the CQL database; the embedded backbone
// is for `shoal all` alone.
func (b *Broker) checkRoles() error {
	cfg := b.cfg
	if b.roles == RolesAll {
		return nil
	}
	if len(cfg.Kafka.Brokers) == 0 {
		return fmt.Errorf("kafka.brokers: `shoal %s` needs an external Kafka (--kafka-brokers); the embedded backbone is for `shoal all`", b.roles)
	}
	if b.roles&(RoleRouter|RoleSession) != 0 && len(cfg.CQL.Hosts) == 0 {
		return fmt.Errorf("cql.hosts: `shoal %s` needs a CQL database for its views (--cql-hosts)", b.roles)
	}
	return nil
}

// Run runs the broker's roles until ctx is done or a role fails.
func (b *Broker) Run(ctx context.Context) (err error) {
	if err := b.checkRoles(); err != nil {
		return err
	}
	cfg := b.cfg
	brokers := cfg.Kafka.Brokers
	if len(brokers) == 0 || len(cfg.CQL.Hosts) == 0 {
		if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
			return fmt.Errorf("data dir: %w", err)
		}
	}
	// The roles of this process reach its embedded backbone in-process.
	var dial func(ctx context.Context, network, host string) (net.Conn, error)
	if len(brokers) == 0 {
		emb, err := kafka.StartEmbedded(kafka.EmbeddedConfig{
			Dir:        filepath.Join(cfg.DataDir, "kafka"),
			Addr:       cfg.Kafka.EmbeddedAddr,
			SyncWrites: cfg.DataSync,
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
		dial = emb.Dial
	}
	kcfg := kafka.Config{
		Brokers: brokers, ClientID: "shoal-" + strings.ReplaceAll(b.roles.String(), "+", "-"), Catalogue: cfg.Kafka.Catalogue(),
		GroupSessionTimeout: cfg.Kafka.GroupSessionTimeout,
		Dial:                dial,
	}
	if b.roles == RoleGateway {
		kcfg.Linger = cfg.Gateway.ProduceLinger
	}
	client, err := kafka.NewClient(ctx, kcfg, b.log)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer client.Close()
	// The gateway's records linger (gateway.produce_linger) to share
	// requests; the router's and the session service's are sent at once,
	// so next to other roles the gateway has a producer of its own.
	gwClient := client
	if b.roles&RoleGateway != 0 && b.roles != RoleGateway && cfg.Gateway.ProduceLinger > 0 {
		gcfg := kcfg
		gcfg.ClientID, gcfg.Linger = "shoal-gateway", cfg.Gateway.ProduceLinger
		if gwClient, err = kafka.NewClient(ctx, gcfg, b.log); err != nil {
			return fmt.Errorf("kafka client of the gateway: %w", err)
		}
		defer gwClient.Close()
	}
	if err := client.EnsureTopics(ctx); err != nil {
		return fmt.Errorf("kafka topics: %w", err)
	}

	views, leaser, closeViews, err := b.openViews(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := closeViews(); cerr != nil && err == nil {
			err = fmt.Errorf("close view store: %w", cerr)
		}
	}()

	var router *routersvc.Router
	var session *sessionsvc.Service
	var gw *gateway.Gateway
	if b.roles&RoleRouter != 0 {
		rcfg := cfg.Router
		if b.roles != RolesAll && rcfg.Group == "" {
			rcfg.Group = "shoal-router"
		}
		if router, err = routersvc.New(rcfg, client, views, b.log, b.clock); err != nil {
			return err
		}
	}
	if b.roles&RoleSession != 0 {
		scfg := cfg.Session
		if b.roles != RolesAll && scfg.Group == "" {
			scfg.Group = "shoal-session"
		}
		if session, err = sessionsvc.New(scfg, client, views, b.log, b.clock); err != nil {
			return err
		}
	}
	if b.roles&RoleGateway != 0 {
		if gw, err = gateway.New(cfg.Gateway, gwClient, b.log, b.clock, b.version); err != nil {
			return err
		}
		if leaser != nil {
			gw.SetSlotLeaser(leaser)
		}
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
	if router != nil {
		run("router", router.Run)
	}
	if session != nil {
		run("session", session.Run)
	}

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
	if gw != nil {
		go func() { gwDone <- gw.Run(gwCtx) }()
		if cfg.Gateway.ParkIdle > 0 {
			total := func() int64 { return gw.Stats.Load(gateway.ConnectionsTotal) }
			go releaseAfterWaves(gwCtx, total, gw.Parked, b.log)
		}
	}
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
	if gw != nil {
		if gerr := <-gwDone; gerr != nil && err == nil {
			err = fmt.Errorf("gateway: %w", gerr)
		}
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

// views is what the router and the session service store their views in.
type views interface {
	routersvc.Store
	sessionsvc.Store
}

// openViews opens the view store: the CQL database when cql.hosts is set
// (also the gateways' slot leases), else Pebble under data_dir.
func (b *Broker) openViews(ctx context.Context) (views, gateway.SlotLeaser, func() error, error) {
	cfg := b.cfg
	if len(cfg.CQL.Hosts) > 0 {
		st, err := cqlstore.Open(ctx, cfg.CQL, b.log)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("cql view store: %w", err)
		}
		return st, st, st.Close, nil
	}
	if b.roles&(RoleRouter|RoleSession) == 0 {
		return nil, nil, func() error { return nil }, nil // a gateway with an explicit slot
	}
	db, err := pebblestore.OpenWith(filepath.Join(cfg.DataDir, "views"), pebblestore.Options{NoSync: !cfg.DataSync}, b.log)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("view store: %w", err)
	}
	return db, nil, db.Close, nil
}
