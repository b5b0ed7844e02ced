package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shoal-mqtt/shoal/bridge"
	"github.com/shoal-mqtt/shoal/compose/config"
	"github.com/shoal-mqtt/shoal/compose/telemetry"
	"github.com/shoal-mqtt/shoal/gateway"
	"github.com/shoal-mqtt/shoal/gateway/acl"
	"github.com/shoal-mqtt/shoal/internal/obs"
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
	// RoleBridge is the Kafka data bridge (package bridge): in `shoal all`
	// it runs when bridges.kafka has mappings.
	RoleBridge
	// RolesAll is `shoal all`.
	RolesAll = RoleGateway | RoleRouter | RoleSession | RoleBridge
)

// String names the roles of r, joined by "+": "gateway+router".
func (r Role) String() string {
	var names []string
	for _, x := range []struct {
		role Role
		name string
	}{{RoleGateway, "gateway"}, {RoleRouter, "router"}, {RoleSession, "session"}, {RoleBridge, "bridge"}} {
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
	adminUI AdminUI // WithAdminUI: the web console

	mu       sync.Mutex
	gateway  *gateway.Gateway
	router   *routersvc.Router
	session  *sessionsvc.Service
	bridge   *bridge.Bridge // nil without mappings (bridges.kafka)
	httpAddr net.Addr
	// tel is the process's telemetry: given with WithTelemetry, or made
	// by Run from the configuration.
	tel *telemetry.Telemetry
	// prov are tel's providers, shared by the roles (Run sets it).
	prov obs.Providers
	// adminAddr is the admin API's bound address (admin.go); nil when off.
	adminAddr net.Addr
	// reloadables are the gateway's auth files (password file, JWT keys,
	// ACL file).
	reloadables []reloadable
	started     chan struct{}
}

// New returns a broker running every role for cfg (already validated by
// config.Load).
func New(cfg config.Config, log *slog.Logger, version string, opts ...Option) *Broker {
	return NewRoles(cfg, RolesAll, log, version, opts...)
}

// NewRoles returns a broker running roles for cfg.
func NewRoles(cfg config.Config, roles Role, log *slog.Logger, version string, opts ...Option) *Broker {
	b := &Broker{cfg: cfg, roles: roles, log: log, version: version, clock: time.Now, started: make(chan struct{})}
	if off := cfg.ClockOffset; off != 0 {
		// Fault tests only (config.Config.ClockOffset).
		log.Warn("clock_offset: every role reads its clock off by this much", "clock_offset", off)
		b.clock = func() time.Time { return time.Now().Add(off) }
	}
	for _, o := range opts {
		o(b)
	}
	return b
}

// Option is a dependency given to New instead of made by Run.
type Option func(*Broker)

// WithTelemetry gives the broker the telemetry it reports through; the
// caller shuts it down. Without it, Run makes one from the configuration's
// telemetry section and shuts it down when it returns.
func WithTelemetry(t *telemetry.Telemetry) Option { return func(b *Broker) { b.tel = t } }

// Ready reports whether every role is ready.
func (b *Broker) Ready() bool { return b.notReady() == "" }

func (b *Broker) notReady() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var not []string
	for _, r := range b.readiness() {
		if r.ready == nil || !r.ready() {
			not = append(not, r.name)
		}
	}
	return strings.Join(not, ", ")
}

// roleReady is one role's readiness probe, nil until the role exists.
type roleReady struct {
	name  string
	ready func() bool
}

// readiness lists the readiness probe of each role this broker runs;
// b.mu is held.
func (b *Broker) readiness() []roleReady {
	var rs []roleReady
	if b.roles&RoleRouter != 0 {
		r := roleReady{name: "router"}
		if b.router != nil {
			r.ready = b.router.Ready
		}
		rs = append(rs, r)
	}
	if b.roles&RoleSession != 0 {
		r := roleReady{name: "session"}
		if b.session != nil {
			r.ready = b.session.Ready
		}
		rs = append(rs, r)
	}
	if b.roles&RoleGateway != 0 {
		r := roleReady{name: "gateway"}
		if b.gateway != nil {
			r.ready = b.gateway.Ready
		}
		rs = append(rs, r)
	}
	if b.roles == RoleBridge || b.bridge != nil {
		r := roleReady{name: "bridge"}
		if b.bridge != nil {
			r.ready = b.bridge.Ready
		}
		rs = append(rs, r)
	}
	return rs
}

// Started is closed once every role has been created (listeners may still
// be opening: poll Ready).
func (b *Broker) Started() <-chan struct{} { return b.started }

// Addr returns a bound listener address: "mqtt", "ws", "http" or
// "admin".
func (b *Broker) Addr(name string) net.Addr {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch name {
	case "http":
		return b.httpAddr
	case "admin":
		return b.adminAddr
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

// Run runs the broker's roles until ctx is done or a role fails. It opens
// the backbone (backbone.go), creates the roles, and runs each as an actor
// of a run group (actors.go); when one actor returns, every other is
// interrupted, in the order of shutdown the package doc describes.
func (b *Broker) Run(ctx context.Context) (err error) {
	if err := b.checkRoles(); err != nil {
		return err
	}
	b.mu.Lock()
	tel := b.tel
	b.mu.Unlock()
	if tel == nil {
		if tel, err = telemetry.New(ctx, b.cfg.Telemetry, telemetry.Options{Role: b.roles.String(), Version: b.version}); err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if serr := tel.Shutdown(sctx); serr != nil {
				b.log.Warn("telemetry shutdown", "err", serr)
			}
		}()
		b.mu.Lock()
		b.tel = tel
		b.mu.Unlock()
	}
	b.prov = tel.Providers()
	if tel.Tracing() {
		b.log.Info("tracing on", "sample_ratio", b.cfg.Telemetry.Traces.SampleRatio)
	}
	bb, err := b.openBackbone(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := bb.close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if err := b.newRoles(ctx, bb); err != nil {
		return err
	}
	if err := b.registerMetrics(tel.MeterProvider().Meter(telemetry.Scope)); err != nil {
		return err
	}
	g, err := b.actors(ctx, bb)
	if err != nil {
		return err
	}
	close(b.started)
	return g.run()
}

// newRoles creates the roles this broker runs, over the backbone bb, each
// complete with what it needs; in `shoal all` they meet through the local
// path (local.go).
func (b *Broker) newRoles(ctx context.Context, bb *backbone) (err error) {
	cfg := b.cfg
	var router *routersvc.Router
	var session *sessionsvc.Service
	var gw *gateway.Gateway
	// shoal all, the gateway and the router in one process on the
	// embedded backbone: the roles hand each other what the log would
	// carry (docs/local-path.md).
	var local *localPath
	if b.roles&RoleGateway != 0 && b.roles&RoleRouter != 0 && cfg.Kafka.LocalDelivery && len(cfg.Kafka.Brokers) == 0 {
		local = &localPath{}
		// The gateway holds a publishing client while the router is too
		// far behind on its partition (kafka.Feed.Room, the gateway's
		// waitRoom), which needs the feed to keep the messages' order,
		// express path or not.
		bb.client.TrackOrder(cfg.Kafka.Catalogue().Messages.Name)
	}
	express := local != nil && cfg.Kafka.Express
	if b.roles&RoleRouter != 0 {
		rcfg := cfg.Router
		if b.roles != RolesAll && rcfg.Group == "" {
			rcfg.Group = "shoal-router"
		}
		opts := []routersvc.Option{routersvc.WithTelemetry(b.prov), routersvc.WithRetainedLimits(cfg.Tenants.RetainedLimits())}
		if local != nil {
			// The router hands its deliveries to the gateway before it
			// produces them (without effect with tracing on).
			opts = append(opts, routersvc.WithHandoff(local))
		}
		if express {
			// And takes the gateway's QoS 0 publishes before they are
			// produced (router-svc/express.go).
			opts = append(opts, routersvc.WithExpress(bb.gwClient))
		}
		if router, err = routersvc.New(rcfg, bb.client, bb.views, b.log, b.clock, opts...); err != nil {
			return err
		}
	}
	if b.roles&RoleSession != 0 {
		scfg := cfg.Session
		if b.roles != RolesAll && scfg.Group == "" {
			scfg.Group = "shoal-session"
		}
		opts := []sessionsvc.Option{sessionsvc.WithTelemetry(b.prov)}
		if local != nil {
			// The session service gives the gateway its answers once the
			// presence is durable, before it produces them.
			opts = append(opts, sessionsvc.WithAnswers(local))
		}
		if session, err = sessionsvc.New(scfg, bb.client, bb.views, b.log, b.clock, opts...); err != nil {
			return err
		}
	}
	if b.roles&RoleGateway != 0 {
		gcfg := cfg.Gateway
		gcfg.ExposeMessageID, gcfg.RecordAcks = cfg.Audit.ExposeMessageID, cfg.Audit.RecordAcks
		opts := []gateway.Option{gateway.WithTelemetry(b.prov), gateway.WithAuth(bb.auth), gateway.WithQuotas(b.quotas())}
		if bb.leaser != nil {
			opts = append(opts, gateway.WithSlotLeaser(bb.leaser))
		}
		if bb.gwClient != bb.client {
			// The gateway's producer lingers; a CONNECT waits for its
			// Connect: shoal.sessions is written at once, by the roles'
			// producer.
			opts = append(opts, gateway.WithSessionLog(bb.client))
		}
		if express {
			opts = append(opts, gateway.WithExpress(local))
		}
		if gw, err = gateway.New(gcfg, bb.gwClient, b.log, b.clock, b.version, opts...); err != nil {
			return err
		}
		b.logAuth()
	}
	if local != nil {
		local.gw, local.router = gw, router
	}
	br, err := b.newBridge(ctx, bb)
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.router, b.session, b.gateway, b.bridge = router, session, gw, br
	b.mu.Unlock()
	return nil
}

// newBridge makes the Kafka data bridge when the broker runs it (nil
// otherwise; `shoal bridge` without mappings is an error).
func (b *Broker) newBridge(ctx context.Context, bb *backbone) (*bridge.Bridge, error) {
	bk := b.cfg.Bridges.Kafka
	if b.roles&RoleBridge == 0 {
		return nil, nil
	}
	if len(bk.Out) == 0 && len(bk.In) == 0 && b.roles == RoleBridge {
		return nil, errors.New("bridges.kafka: `shoal bridge` has no mappings (bridges.kafka.out, bridges.kafka.in)")
	}
	// With other roles, the bridge runs even without mappings, idle: a
	// SIGHUP may bring some (ReloadBridges).
	m, err := bk.Compile()
	if err != nil {
		return nil, err
	}
	id := bk.InstanceID
	if id == "" && b.roles == RoleBridge {
		if id, err = os.Hostname(); err != nil {
			return nil, fmt.Errorf("bridges.kafka.instance_id: not set, and no host name to take: %w", err)
		}
	}
	// The embedded backbone ends a killed producer's transaction without
	// a marker (bridge.Options.FreshProducers).
	opts := bridge.Options{InstanceID: id, Telemetry: b.prov, FreshProducers: len(b.cfg.Kafka.Brokers) == 0}
	if len(bk.Brokers) > 0 {
		if opts.Target, err = b.bridgeTarget(ctx, bb); err != nil {
			return nil, err
		}
	}
	rules := bb.acl
	if rules == nil && b.cfg.Auth.ACLFile != "" {
		// shoal bridge alone: the gateway did not open the ACL file.
		if rules, err = acl.Open(b.cfg.Auth.ACLFile, b.log); err != nil {
			return nil, fmt.Errorf("auth.acl_file: %w", err)
		}
		bb.reloadables = append(bb.reloadables, rules)
	}
	if rules != nil {
		opts.Authorizer = &bridgeACL{a: rules, clients: make(map[string]*acl.Client)}
	}
	return bridge.New(m, bb.client, b.log, b.clock, opts)
}

// Reload reads the files this broker reloads on SIGHUP again: the
// password file, the JWT keys, the ACL file and the TLS material. A file
// that fails to parse keeps the one in force (the error is logged and
// returned, joined with the others').
func (b *Broker) Reload() error {
	b.mu.Lock()
	rs, gw := b.reloadables, b.gateway
	b.mu.Unlock()
	var errs []error
	for _, r := range rs {
		errs = append(errs, r.Reload())
	}
	if gw != nil {
		errs = append(errs, gw.ReloadTLS())
	}
	return errors.Join(errs...)
}

// bridgeTarget is the client of the cluster of the bridge's own
// (bridges.kafka.brokers, secured by bridges.kafka.sasl and .tls), closed
// with the backbone.
func (b *Broker) bridgeTarget(ctx context.Context, bb *backbone) (*kafka.Client, error) {
	bk := b.cfg.Bridges.Kafka
	sec := config.Kafka{Brokers: bk.Brokers, SASL: bk.SASL, TLS: bk.TLS}
	sasl, tlsCfg, err := sec.Security()
	if err != nil {
		return nil, fmt.Errorf("bridges.%w", err) // its keys are kafka.*'s under bridges.
	}
	cat := b.cfg.Kafka.Catalogue()
	cat.SetMaxMessageBytes(kafka.MaxMessageBytesFor(b.cfg.Gateway.MaxPacketSize))
	c, err := kafka.NewClient(ctx, kafka.Config{
		Brokers: bk.Brokers, ClientID: "shoal-bridge", Catalogue: cat, SASL: sasl, TLS: tlsCfg,
		GroupSessionTimeout: b.cfg.Kafka.GroupSessionTimeout, RequestTimeout: b.cfg.Kafka.RequestTimeout, Telemetry: b.prov,
	}, b.log.With("cluster", "bridges.kafka.brokers"))
	if err != nil {
		return nil, fmt.Errorf("bridges.kafka.brokers: %w", err)
	}
	bb.closers = append(bb.closers, closeNil(c.Close))
	return c, nil
}

// ReloadBridges makes the mappings of bk (the bridges.kafka section of the
// configuration read again) those of the running bridge. Mappings that do
// not compile are refused, naming their key, and those in force stay; a
// change of brokers or instance_id takes effect at the next start.
func (b *Broker) ReloadBridges(bk config.BridgeKafka) error {
	b.mu.Lock()
	br := b.bridge
	b.mu.Unlock()
	if br == nil {
		if len(bk.Out) > 0 || len(bk.In) > 0 {
			b.log.Warn("bridges.kafka: mappings not loaded: this process runs no kafka bridge (shoal all or shoal bridge runs one)")
		}
		return nil
	}
	m, err := bk.Compile()
	if err != nil {
		b.log.Error("bridges.kafka: mappings not reloaded; those in force stay", "err", err)
		return err
	}
	old := b.cfg.Bridges.Kafka
	if !slices.Equal(old.Brokers, bk.Brokers) || old.InstanceID != bk.InstanceID {
		b.log.Warn("bridges.kafka: brokers and instance_id take effect at the next start; the mappings are reloaded")
	}
	if len(m.Out) == 0 && len(m.In) == 0 && b.roles == RoleBridge {
		err := errors.New("bridges.kafka: no mappings left; `shoal bridge` keeps those in force")
		b.log.Error("bridges.kafka: mappings not reloaded", "err", err)
		return err
	}
	br.Reload(m)
	return nil
}

// logAuth says at start how clients are authenticated: with no source
// configured, every client is accepted, so each listener reachable from
// beyond this machine gets a warning.
func (b *Broker) logAuth() {
	cfg := b.cfg
	if cfg.AuthConfigured() {
		b.log.Info("clients must authenticate", "password_file", cfg.Auth.PasswordFile, "jwt", cfg.Auth.JWT.Configured(),
			"client_certificates", cfg.Gateway.TLS.ClientCAFile != "", "allow_anonymous", cfg.Auth.AllowAnonymous, "acl_file", cfg.Auth.ACLFile)
		return
	}
	if cfg.LoopbackOnly {
		b.log.Info("no authentication configured: MQTT listeners without an explicit address listen on loopback only",
			"mqtt_listen", cfg.Gateway.MQTTListen, "ws_listen", cfg.Gateway.WSListen)
	}
	for key, addr := range map[string]string{
		"gateway.mqtt_listen": cfg.Gateway.MQTTListen, "gateway.ws_listen": cfg.Gateway.WSListen,
		"gateway.mqtts_listen": cfg.Gateway.MQTTSListen, "gateway.wss_listen": cfg.Gateway.WSSListen,
	} {
		if addr != "" && !config.Loopback(addr) {
			b.log.Warn("no authentication configured: every client is accepted on a listener beyond loopback", "listener", key, "addr", addr)
		}
	}
}
