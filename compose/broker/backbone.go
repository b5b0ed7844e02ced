package broker

import (
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/shoal-mqtt/shoal/compose/store/cqlstore"
	"github.com/shoal-mqtt/shoal/compose/store/pebblestore"
	"github.com/shoal-mqtt/shoal/gateway"
	"github.com/shoal-mqtt/shoal/gateway/acl"
	"github.com/shoal-mqtt/shoal/gateway/auth"
	"github.com/shoal-mqtt/shoal/gateway/listener"
	"github.com/shoal-mqtt/shoal/kafka"
	routersvc "github.com/shoal-mqtt/shoal/router-svc"
	sessionsvc "github.com/shoal-mqtt/shoal/session-svc"
)

// views is what the router and the session service store their views in.
type views interface {
	routersvc.Store
	sessionsvc.Store
}

// backbone is what the roles of one process stand on: the Kafka clients
// (of the embedded backbone or an external cluster), the topics, and the
// view store. close releases it all, in reverse.
type backbone struct {
	client      *kafka.Client
	gwClient    *kafka.Client // the gateway's producer: client, or one that lingers
	views       views
	leaser      gateway.SlotLeaser
	auth        gateway.Auth // how the gateway authenticates CONNECTs
	acl         *acl.ACL     // auth.acl_file's rules; nil without one
	reloadables []reloadable // the auth files, reloaded when they change and on SIGHUP

	closers []func() error // run in reverse by close
}

// close releases what openBackbone opened, last opened first, and returns
// the first error.
func (bb *backbone) close() error {
	var errs []error
	for i := len(bb.closers) - 1; i >= 0; i-- {
		if err := bb.closers[i](); err != nil {
			errs = append(errs, err)
		}
	}
	bb.closers = nil
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// openBackbone starts the embedded Kafka when no brokers are configured,
// creates the Kafka clients and the topics, and opens the view store. On
// error, what it had opened is closed again.
func (b *Broker) openBackbone(ctx context.Context) (_ *backbone, err error) {
	bb := &backbone{}
	defer func() {
		if err != nil {
			_ = bb.close() // bb, not the result: that is nil on error
		}
	}()
	cfg := b.cfg
	if len(cfg.Kafka.Brokers) == 0 || len(cfg.CQL.Hosts) == 0 {
		if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
			return nil, fmt.Errorf("data dir: %w", err)
		}
	}
	if err := b.openKafka(ctx, bb); err != nil {
		return nil, err
	}
	if err := bb.client.EnsureTopics(ctx); err != nil {
		return nil, fmt.Errorf("kafka topics: %w", err)
	}
	if err := b.openViews(ctx, bb); err != nil {
		return nil, err
	}
	if err := b.openAuth(bb); err != nil {
		return nil, err
	}
	return bb, nil
}

// Failed authentications from one address wait base, doubled per failure
// up to cap; at most maxDelayed addresses are remembered.
const (
	delayBase  = 100 * time.Millisecond
	delayCap   = 5 * time.Second
	maxDelayed = 10_000
)

// reloadable is a file the broker reloads when it changes and on SIGHUP:
// the password file, the JWT keys, the ACL file.
type reloadable interface {
	Reload() error
	Watch(ctx context.Context, interval time.Duration)
}

// openAuth opens the authentication and authorization sources of a
// gateway: the password file, the JWT keys, client certificates (their
// identity field) and the ACL file. Errors name the key.
func (b *Broker) openAuth(bb *backbone) error {
	if b.roles&RoleGateway == 0 {
		return nil
	}
	cfg := b.cfg.Auth
	a := gateway.Auth{AllowAnonymous: cfg.AllowAnonymous, ACLDenyDisconnect: cfg.ACLDenyDisconnect}
	if cfg.PasswordFile != "" {
		pw, err := auth.OpenPasswords(cfg.PasswordFile, b.log)
		if err != nil {
			return fmt.Errorf("auth.password_file: %w", err)
		}
		a.Passwords = pw
		bb.reloadables = append(bb.reloadables, pw)
	}
	if cfg.JWT.Configured() {
		j, err := auth.OpenJWT(cfg.JWT, b.clock, b.log)
		if err != nil {
			return fmt.Errorf("auth.jwt: %w", err)
		}
		a.Tokens = jwtVerifier{j}
		bb.reloadables = append(bb.reloadables, j)
	}
	if tls := b.cfg.Gateway.TLS; tls.ClientCAFile != "" {
		field := tls.Identity
		a.CertIdentity = func(c *x509.Certificate) (string, error) { return listener.CertIdentity(c, field) }
	}
	if cfg.ACLFile != "" {
		rules, err := acl.Open(cfg.ACLFile, b.log)
		if err != nil {
			return fmt.Errorf("auth.acl_file: %w", err)
		}
		a.ACL = aclAuthorizer{rules}
		bb.acl = rules
		bb.reloadables = append(bb.reloadables, rules)
	}
	if a.Passwords != nil || a.Tokens != nil {
		a.Delay = auth.NewDelay(maxDelayed, delayBase, delayCap, b.clock)
	}
	bb.auth = a
	return nil
}

// jwtVerifier gives the gateway the identity a JWT proves.
type jwtVerifier struct{ j *auth.JWT }

func (v jwtVerifier) VerifyToken(token []byte) (gateway.Identity, error) {
	id, err := v.j.Verify(token)
	if err != nil {
		return gateway.Identity{}, err
	}
	gid := gateway.Identity{Name: id.User, Expires: id.Expires}
	if id.HasTenant {
		gid.Tenant = id.Tenant
	}
	return gid, nil
}

// aclAuthorizer gives the gateway each client's permissions.
type aclAuthorizer struct{ a *acl.ACL }

func (z aclAuthorizer) For(user, clientID string, anonymous bool) gateway.Permissions {
	return z.a.For(user, clientID, anonymous)
}

// bridgeACL applies the ACL file to what the bridge's in mappings publish,
// as to an anonymous client of the mapping's client id ($bridge/<name>).
type bridgeACL struct {
	a       *acl.ACL
	mu      sync.Mutex
	clients map[string]*acl.Client
}

func (z *bridgeACL) AllowPublish(clientID string, topic []byte) bool {
	z.mu.Lock()
	c := z.clients[clientID]
	if c == nil {
		c = z.a.For("", clientID, true)
		z.clients[clientID] = c
	}
	z.mu.Unlock()
	return c.AllowPublish(topic)
}

// openKafka connects the Kafka clients, to the embedded backbone (started
// here, reached in-process) when kafka.brokers is empty.
func (b *Broker) openKafka(ctx context.Context, bb *backbone) error {
	cfg := b.cfg
	var embedded *kafka.Embedded
	if len(cfg.Kafka.Brokers) == 0 {
		emb, err := kafka.StartEmbedded(kafka.EmbeddedConfig{
			Dir:        filepath.Join(cfg.DataDir, "kafka"),
			Addr:       cfg.Kafka.EmbeddedAddr,
			Socket:     cfg.Kafka.EmbeddedSocket,
			SyncWrites: cfg.DataSync,
		}, b.log)
		if err != nil {
			return fmt.Errorf("embedded kafka: %w", err)
		}
		bb.closers = append(bb.closers, func() error {
			if err := emb.Close(); err != nil {
				return fmt.Errorf("close embedded kafka: %w", err)
			}
			return nil
		})
		embedded = emb
	}
	// Every topic takes a record of the largest packet the gateways accept
	// (gateway.max_packet_size, which every role of a deployment shares),
	// with its event around it.
	cat := cfg.Kafka.Catalogue()
	cat.SetMaxMessageBytes(kafka.MaxMessageBytesFor(cfg.Gateway.MaxPacketSize))
	kcfg := kafka.Config{
		Brokers: cfg.Kafka.Brokers, ClientID: "shoal-" + strings.ReplaceAll(b.roles.String(), "+", "-"), Catalogue: cat,
		GroupSessionTimeout: cfg.Kafka.GroupSessionTimeout,
		RequestTimeout:      cfg.Kafka.RequestTimeout,
		Telemetry:           b.prov,
		AdoptPartitions:     cfg.Kafka.AdoptPartitions(),
	}
	if embedded != nil {
		kcfg = embedded.ClientConfig(kcfg)
		if !cfg.Kafka.LocalDelivery {
			kcfg.Feed = nil // every consumer fetches
		}
	} else {
		var err error
		if kcfg.SASL, kcfg.TLS, err = cfg.Kafka.Security(); err != nil {
			return err
		}
	}
	if b.roles == RoleGateway {
		kcfg.Linger = cfg.Gateway.ProduceLinger
	}
	client, err := kafka.NewClient(ctx, kcfg, b.log)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	bb.closers = append(bb.closers, closeNil(client.Close))
	bb.client, bb.gwClient = client, client
	// Every client of the process has the same catalogue: the partition
	// counts this one adopted from existing topics, or the new topics'.
	kcfg.Catalogue, kcfg.AdoptPartitions = client.Catalogue(), false
	// The gateway's records linger (gateway.produce_linger) to share
	// requests; the router's and the session service's are sent at once,
	// so next to other roles the gateway has a producer of its own.
	if b.roles&RoleGateway != 0 && b.roles != RoleGateway && cfg.Gateway.ProduceLinger > 0 {
		gcfg := kcfg
		gcfg.ClientID, gcfg.Linger = "shoal-gateway", cfg.Gateway.ProduceLinger
		// The express path's records wait longer (gateway.express_linger):
		// it produces through this client (broker.go), and only in a
		// process with every role on the embedded backbone.
		gcfg.BackgroundLinger = cfg.Gateway.ExpressLinger
		gw, err := kafka.NewClient(ctx, gcfg, b.log)
		if err != nil {
			return fmt.Errorf("kafka client of the gateway: %w", err)
		}
		bb.closers = append(bb.closers, closeNil(gw.Close))
		bb.gwClient = gw
	}
	return nil
}

// closeNil adapts a Close without an error to the closers' signature.
func closeNil(f func()) func() error { return func() error { f(); return nil } }

// openViews opens the view store: the CQL database when cql.hosts is set
// (also the gateways' slot leases), else Pebble under data_dir. A gateway
// alone with an explicit slot has none.
func (b *Broker) openViews(ctx context.Context, bb *backbone) error {
	cfg := b.cfg
	if len(cfg.CQL.Hosts) > 0 {
		st, err := cqlstore.Open(ctx, cfg.CQL, b.log)
		if err != nil {
			return fmt.Errorf("cql view store: %w", err)
		}
		bb.closers = append(bb.closers, wrapClose("close view store", st.Close))
		bb.views, bb.leaser = st, st
		return nil
	}
	if b.roles&(RoleRouter|RoleSession) == 0 {
		return nil
	}
	db, err := pebblestore.OpenWith(filepath.Join(cfg.DataDir, "views"), pebblestore.Options{NoSync: !cfg.DataSync}, b.log)
	if err != nil {
		return fmt.Errorf("view store: %w", err)
	}
	bb.closers = append(bb.closers, wrapClose("close view store", db.Close))
	bb.views = db
	return nil
}

// wrapClose names what failed to close.
func wrapClose(what string, f func() error) func() error {
	return func() error {
		if err := f(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
}
