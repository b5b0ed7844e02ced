package config

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/shoal-mqtt/shoal/bridge"
	"github.com/shoal-mqtt/shoal/compose/store/cqlstore"
	"github.com/shoal-mqtt/shoal/compose/telemetry"
	"github.com/shoal-mqtt/shoal/gateway"
	"github.com/shoal-mqtt/shoal/gateway/auth"
	"github.com/shoal-mqtt/shoal/kafka"
	routersvc "github.com/shoal-mqtt/shoal/router-svc"
	sessionsvc "github.com/shoal-mqtt/shoal/session-svc"
)

// Audit is what Shoal adds for audit and debugging (shoal replay, shoal
// trace).
type Audit struct {
	// ExposeMessageID adds the user property shoal-message-id, the
	// message's identifier as shoal replay prints it, to every message the
	// gateways deliver to an MQTT 5.0 client, so that an operator can
	// trace what a subscriber received. Off by default: subscribers see
	// one property more than the publisher sent.
	ExposeMessageID bool `yaml:"expose_message_id"`
	// RecordAcks makes the gateways write a DeliveryAck event for every
	// QoS 1 or 2 delivery a client acknowledges that is not an inbox entry
	// (a persistent session's are always in the log, as InboxAck), so that
	// shoal trace shows every acknowledgement. Off by default: one more
	// record per acknowledged delivery (its cost is in bench/README.md).
	RecordAcks bool `yaml:"record_acks"`
}

// Config is the whole configuration of the shoal binary.
type Config struct {
	// DataDir holds the embedded backbone's log and view store.
	DataDir string `yaml:"data_dir"`
	// DataSync makes the embedded backbone fsync every produced batch and
	// the Pebble view store every commit. Off, both are in the operating
	// system's page cache when acknowledged: they survive a crash of the
	// process (kill -9) but not of the machine.
	DataSync bool `yaml:"data_sync"`
	// HTTPListen serves /metrics, /healthz and /readyz ("" disables).
	// Loopback by default, as every listener without authentication:
	// a scraper or a load balancer's health check on another machine
	// needs an address such as ":9090".
	HTTPListen string `yaml:"http_listen"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `yaml:"log_level"`
	// LogFormat is text or json.
	LogFormat string `yaml:"log_format"`
	// Pprof serves Go's profiles under /debug/pprof/ on HTTPListen. Off by
	// default: profiles reveal internals and cost CPU while taken.
	Pprof bool `yaml:"pprof"`
	// ClockOffset makes every role of the process read its clock this far
	// ahead (negative: behind), for fault tests of a skewed clock
	// (TestFaults/ClockSkew): never set it in production.
	ClockOffset time.Duration `yaml:"clock_offset"`
	Kafka       Kafka         `yaml:"kafka"`
	// CQL is the view store on a CQL database (ScyllaDB, Apache
	// Cassandra). Without hosts the views live in Pebble under data_dir,
	// which only `shoal all` may use.
	CQL cqlstore.Config `yaml:"cql"`
	// Gateway is the gateway section; its TLS is read from the top-level
	// tls section of the file (fileShape).
	Gateway gateway.Config    `yaml:"gateway"`
	Router  routersvc.Config  `yaml:"router"`
	Session sessionsvc.Config `yaml:"session"`
	Auth    Auth              `yaml:"auth"`
	Audit   Audit             `yaml:"audit"`

	// LoopbackOnly says that Load moved the MQTT listeners to loopback:
	// no authentication is configured and no listen address was given.
	LoopbackOnly bool `yaml:"-"`

	// Tenants are the quotas per tenant (tenants.go).
	Tenants Tenants `yaml:"tenants"`

	// Admin is the operators' HTTP API that `shoal ctl` talks to (admin.go).
	Admin Admin `yaml:"admin"`

	// Telemetry is OpenTelemetry: traces, metrics pushed besides
	// /metrics, the tenant label cap (the OTEL_* variables override it).
	Telemetry telemetry.Config `yaml:"telemetry"`

	// Bridges are the data bridges: bridges.kafka maps MQTT topics to
	// Kafka records and back (package bridge). YAML only, no flags.
	Bridges Bridges `yaml:"bridges"`
}

// Bridges is the bridges section.
type Bridges struct {
	Kafka BridgeKafka `yaml:"kafka"`
}

// BridgeKafka is bridges.kafka: the mappings (bridge.Config) and, for a
// cluster of their own (bridges.kafka.brokers), its SASL and TLS, as
// kafka.sasl and kafka.tls configure Shoal's cluster.
type BridgeKafka struct {
	bridge.Config `yaml:",inline"`
	SASL          KafkaSASL `yaml:"sasl"`
	TLS           KafkaTLS  `yaml:"tls"`
}

// validate checks bridges.kafka, naming the bad keys.
func (b BridgeKafka) validate() []error {
	var errs []error
	if err := b.Validate(); err != nil { // the mappings' (bridge.Config)
		errs = append(errs, err)
	}
	if len(b.Brokers) == 0 {
		if b.SASL != (KafkaSASL{}) || b.TLS != (KafkaTLS{}) {
			errs = append(errs, errors.New("bridges.kafka.sasl, bridges.kafka.tls: they secure bridges.kafka.brokers; without brokers the bridge uses kafka.* and its security"))
		}
		return errs
	}
	// kafka.*'s checks, under this section's keys.
	for _, err := range (Kafka{Brokers: b.Brokers, SASL: b.SASL, TLS: b.TLS}).validateSecurity() {
		errs = append(errs, errors.New(strings.ReplaceAll(err.Error(), "kafka.", "bridges.kafka.")))
	}
	return errs
}

// Auth configures how the gateway authenticates clients (gateway.Auth).
type Auth struct {
	// PasswordFile is a password file in Mosquitto's format (also bcrypt
	// and argon2id entries; `shoal passwd` writes one), reloaded on SIGHUP
	// and when it changes. "" configures no password file.
	PasswordFile string `yaml:"password_file"`
	// AllowAnonymous accepts clients without a user name when an
	// authentication source is configured (without one, every client is
	// anonymous and accepted).
	AllowAnonymous bool `yaml:"allow_anonymous"`
	// JWT verifies tokens carried in the CONNECT's password field
	// (auth.jwt.*: key files, issuer, audience, skew, claims).
	JWT auth.JWTConfig `yaml:"jwt"`
	// ACLFile is an ACL file in Mosquitto's format, applied inside each
	// client's tenant and reloaded like the password file. "" configures
	// none: every client may publish and subscribe to any topic of its
	// tenant.
	ACLFile string `yaml:"acl_file"`
	// ACLDenyDisconnect closes a 3.1.1 connection whose PUBLISH the ACL
	// refuses, instead of dropping the message (3.1.1 cannot say no).
	ACLDenyDisconnect bool `yaml:"acl_deny_disconnect"`
}

// Configured reports whether an authentication source of this section is
// configured (Config.AuthConfigured adds client certificates).
func (a Auth) Configured() bool { return a.PasswordFile != "" || a.JWT.Configured() }

// AuthConfigured reports whether any authentication source is configured:
// a password file, JWT keys, or a CA of client certificates (mTLS).
func (c Config) AuthConfigured() bool {
	return c.Auth.Configured() || c.Gateway.TLS.ClientCAFile != ""
}

// Kafka configures the log.
type Kafka struct {
	// Brokers of an external Kafka cluster; empty runs the embedded one.
	Brokers []string `yaml:"brokers"`
	// EmbeddedAddr, when set, is a loopback address on which the embedded
	// broker also listens over TCP, for stock Kafka tools; clients there
	// authenticate with SASL/SCRAM-SHA-512 and the credentials in
	// data_dir/kafka/client.properties. Empty (the default): no TCP.
	EmbeddedAddr string `yaml:"embedded_addr"`
	// EmbeddedSocket makes the embedded broker listen on the Unix socket
	// data_dir/kafka/kafka.sock (mode 0600), through which Shoal's own
	// tools attach to a running `shoal all` (default true).
	EmbeddedSocket bool `yaml:"embedded_socket"`
	// Partitions of each event topic Shoal creates (the deliveries topic
	// has one per gateway slot). 0 (the default) takes the backbone's
	// default: on an external Kafka kafka.DefaultPartitions (16); on the
	// embedded one the count the data directory's topics have, or for a
	// new data directory kafka.EmbeddedPartitions (twice the CPUs, 4 to
	// 16: fewer partitions make larger batches, and kfake's in-memory
	// index is per batch). A keyed topic's count cannot change once it
	// has records: an explicit count that differs from an existing
	// topic's is refused at start.
	Partitions int32 `yaml:"partitions"`
	// DeliveriesPartitions is the partitions of shoal.deliveries, one per
	// gateway slot, when it must differ from Partitions: the number of
	// gateways a deployment can run. 0 (the default) is Partitions'
	// count. Raised on an existing deployment, the first role to start
	// with it adds the partitions (the topic is unkeyed, so nothing
	// written moves): roll the routers and session services with it
	// before starting the gateways that take the new slots
	// (docs/deployment.md, "More gateways than partitions").
	DeliveriesPartitions int32 `yaml:"deliveries_partitions"`
	// ReplicationFactor of the topics Shoal creates: -1 (the default)
	// leaves it to the brokers' default.replication.factor (KIP-464; the
	// embedded backbone has one broker, so 1). An explicit factor of 3 or
	// more also sets min.insync.replicas=2 on the topics.
	ReplicationFactor int16 `yaml:"replication_factor"`
	// Retention of the event topics Shoal creates (messages, sessions,
	// deliveries: retention.ms), the window `shoal replay` can read; 0
	// keeps records without a time limit. The compacted presence topic
	// keeps each key's newest record whatever this says.
	Retention time.Duration `yaml:"retention"`
	// RetentionBytes is how many bytes each partition of those event
	// topics keeps at most (retention.bytes, per partition as Kafka
	// defines it; the oldest segments are deleted beyond it). 0 (the
	// default) takes the backbone's default: on the embedded one
	// kafka.EmbeddedRetentionBudget (320 MiB) per topic, split over its
	// partitions (20 MiB each of 16, 80 MiB each of 4), on an external
	// Kafka -1. -1 keeps records without a size limit. The compacted
	// topics never delete by size.
	RetentionBytes int64 `yaml:"retention_bytes"`
	// LocalDelivery lets the roles of `shoal all` pass records to each
	// other inside the process (default true): each record the process
	// produces reaches its own consumers when the embedded broker has
	// acknowledged it, without a fetch, the router hands its deliveries to
	// the gateway before it produces them, and routes a QoS 0 publish
	// before the gateway produces it (docs/local-path.md). false makes every record go through a
	// fetch, as between the processes of a distributed deployment; it has
	// no effect there.
	LocalDelivery bool `yaml:"local_delivery"`
	// Express lets the router of `shoal all` route a QoS 0 publish that is
	// not retained before the gateway produces it, with local_delivery
	// (default true; docs/local-path.md, "The express path"): a moderate
	// rate's messages arrive about four times sooner, for about a fifth
	// more CPU (bench/HISTORY.md). false routes every publish from the log.
	Express bool `yaml:"express"`
	// GroupSessionTimeout is how soon the partitions of a router or session
	// service that died move to the others (0: 10s).
	GroupSessionTimeout time.Duration `yaml:"group_session_timeout"`
	// RequestTimeout is how long a request to one Kafka broker may go
	// unanswered before it is sent again, to a partition's new leader if
	// it moved (0: 10s): the longest a frozen broker stalls its
	// partitions' producers and consumers (kafka.Config.RequestTimeout).
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// SASL and TLS secure the connections to an external cluster
	// (kafkasec.go).
	SASL KafkaSASL `yaml:"sasl"`
	TLS  KafkaTLS  `yaml:"tls"`
}

// Default returns the defaults.
func Default() Config {
	return Config{
		DataDir:    "./shoal-data",
		HTTPListen: "127.0.0.1:9090",
		LogLevel:   "info",
		LogFormat:  "text",
		Kafka: Kafka{
			EmbeddedSocket: true, LocalDelivery: true, Express: true,
			ReplicationFactor: kafka.DefaultReplication, Retention: kafka.DefaultRetention,
		},
		CQL:       cqlstore.DefaultConfig(),
		Gateway:   gateway.DefaultConfig(),
		Router:    routersvc.DefaultConfig(),
		Session:   sessionsvc.DefaultConfig(),
		Admin:     DefaultAdmin(),
		Telemetry: telemetry.DefaultConfig(),
	}
}

// Validate reports every invalid setting, each naming its key.
func (c *Config) Validate() error {
	var errs []error
	if c.DataDir == "" {
		errs = append(errs, errors.New("data_dir: must not be empty"))
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("log_level: %q is not debug, info, warn or error", c.LogLevel))
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		errs = append(errs, fmt.Errorf("log_format: %q is not text or json", c.LogFormat))
	}
	if c.Kafka.EmbeddedAddr != "" {
		if err := kafka.CheckEmbeddedAddr(c.Kafka.EmbeddedAddr); err != nil {
			errs = append(errs, fmt.Errorf("kafka.embedded_addr: %w", err))
		}
	}
	// The catalogue's own checks (kafka.TopicSpec), under this file's keys.
	if err := c.Auth.JWT.Validate(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.Kafka.validateSecurity()...)
	if c.Kafka.Partitions < 0 {
		errs = append(errs, fmt.Errorf("kafka.partitions: must be ≥ 1, or 0 for the backbone's default; is %d", c.Kafka.Partitions))
	}
	if c.Kafka.DeliveriesPartitions < 0 {
		errs = append(errs, fmt.Errorf("kafka.deliveries_partitions: must be ≥ 1, or 0 for kafka.partitions' count; is %d", c.Kafka.DeliveriesPartitions))
	}
	if err := kafka.CheckReplication(c.Kafka.ReplicationFactor); err != nil {
		errs = append(errs, fmt.Errorf("kafka.replication_factor: %w", err))
	}
	if err := kafka.CheckRetention(c.Kafka.Retention); err != nil {
		errs = append(errs, fmt.Errorf("kafka.retention: %w", err))
	}
	if c.Kafka.RetentionBytes < -1 {
		errs = append(errs, fmt.Errorf("kafka.retention_bytes: must be a number of bytes per partition, 0 for the backbone's default or -1 for no size limit; is %d", c.Kafka.RetentionBytes))
	}
	if len(c.CQL.Hosts) > 0 {
		if err := c.CQL.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.Tenants.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Admin.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Telemetry.Validate(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.Bridges.Kafka.validate()...)
	for _, err := range []error{c.Gateway.Validate(), c.Router.Validate(), c.Session.Validate()} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Catalogue returns the topic catalogue of this configuration: Kafka's
// partitions and replication factor for every topic, its retention by time
// and size for the event topics (the compacted presence topic keeps its
// policy). The gateways' shoal.quotas takes the replication factor only:
// it keeps its few partitions (kafka.DefaultQuotaPartitions) and its
// compaction.
func (k Kafka) Catalogue() kafka.Catalogue {
	cat := kafka.DefaultCatalogue()
	for _, t := range []*kafka.TopicSpec{&cat.Messages, &cat.Sessions, &cat.Presence, &cat.Deliveries} {
		t.Partitions = k.partitions()
		t.Replication = k.ReplicationFactor
		if !t.Compacted {
			t.Retention = k.Retention
			t.RetentionBytes, t.RetentionBytesTotal = k.retentionBytes()
		}
	}
	if k.DeliveriesPartitions > 0 {
		cat.Deliveries.Partitions = k.DeliveriesPartitions
	}
	cat.Quotas.Replication = k.ReplicationFactor
	return cat
}

// retentionBytes is kafka.retention_bytes with its default resolved, per
// partition or (the second) per topic: on the embedded backbone (no
// kafka.brokers) kafka.EmbeddedRetentionBudget per topic, none (the
// default catalogue's) on Kafka.
func (k Kafka) retentionBytes() (perPartition, perTopic int64) {
	if k.RetentionBytes == 0 && len(k.Brokers) == 0 {
		return 0, kafka.EmbeddedRetentionBudget
	}
	return k.RetentionBytes, 0
}

// partitions is kafka.partitions with its default resolved: the count of
// new topics (AdoptPartitions).
func (k Kafka) partitions() int32 {
	switch {
	case k.Partitions > 0:
		return k.Partitions
	case len(k.Brokers) > 0:
		return kafka.DefaultPartitions
	}
	return kafka.EmbeddedPartitions(runtime.GOMAXPROCS(0))
}

// AdoptPartitions says whether the catalogue's partition counts are those
// of new topics only, existing ones keeping theirs
// (kafka.Config.AdoptPartitions): on the embedded backbone without
// kafka.partitions, whose default depends on the machine.
func (k Kafka) AdoptPartitions() bool { return k.Partitions == 0 && len(k.Brokers) == 0 }

// option is one setting reachable by flag and environment variable.
type option struct {
	flag, usage string
	set         func(c *Config, v string) error
}

func options() []option {
	opts := []option{
		{"mqtt-listen", "MQTT TCP listen address (gateway.mqtt_listen)", strOpt(func(c *Config) *string { return &c.Gateway.MQTTListen })},
		{"ws-listen", "MQTT over WebSocket listen address, path /mqtt (gateway.ws_listen)", strOpt(func(c *Config) *string { return &c.Gateway.WSListen })},
		{"mqtts-listen", "MQTT over TLS listen address, e.g. :8883; empty (the default) disables it (gateway.mqtts_listen)", strOpt(func(c *Config) *string { return &c.Gateway.MQTTSListen })},
		{"wss-listen", "MQTT over WebSocket over TLS listen address, path /mqtt, e.g. :8084; empty (the default) disables it (gateway.wss_listen)", strOpt(func(c *Config) *string { return &c.Gateway.WSSListen })},
		{"ws-allowed-origins", "comma-separated origins (host patterns, e.g. *.example.com or https://app.example.com) whose web pages may connect to the WebSocket listeners besides their own; empty allows no other (gateway.ws_allowed_origins)", func(c *Config, v string) error {
			c.Gateway.WSAllowedOrigins = splitList(v)
			return nil
		}},
		{"proxy-protocol", "PROXY protocol (v1 or v2) from a load balancer in front, on every listener: off, optional (a trusted peer's header is used when sent) or required (every connection must come from a trusted peer with a header) (gateway.proxy_protocol)", strOpt(func(c *Config) *string { return &c.Gateway.ProxyProtocol })},
		{"proxy-trusted", "comma-separated CIDR networks of the load balancers allowed to send a PROXY header, e.g. 10.0.0.0/8; needed by optional and required (gateway.proxy_trusted)", func(c *Config, v string) error {
			c.Gateway.ProxyTrusted = splitList(v)
			return nil
		}},
		{"tls-cert-file", "PEM certificate chain of the TLS listeners, reloaded when it changes and on SIGHUP (tls.cert_file)", strOpt(func(c *Config) *string { return &c.Gateway.TLS.CertFile })},
		{"tls-key-file", "PEM private key of tls.cert_file (tls.key_file)", strOpt(func(c *Config) *string { return &c.Gateway.TLS.KeyFile })},
		{"tls-client-ca-file", "PEM CAs of client certificates (mutual TLS): clients may present one, which must verify (tls.client_ca_file)", strOpt(func(c *Config) *string { return &c.Gateway.TLS.ClientCAFile })},
		{"tls-require-client-cert", "true refuses TLS clients without a certificate of tls.client_ca_file (tls.require_client_cert)", boolOpt("tls.require_client_cert", func(c *Config) *bool { return &c.Gateway.TLS.RequireClientCert })},
		{"tls-identity", "field of a client certificate that names the client's identity: cn, san-dns, san-email or san-uri (tls.identity)", strOpt(func(c *Config) *string { return &c.Gateway.TLS.Identity })},
		{"admin-listen", "address of the admin API that shoal ctl talks to, never an MQTT listener; empty disables it (admin.listen)", strOpt(func(c *Config) *string { return &c.Admin.Listen })},
		{"admin-token-file", "file holding the admin API's bearer token; empty: shoal all makes one in data_dir/admin.token, a distributed role serves no admin API (admin.token_file)", strOpt(func(c *Config) *string { return &c.Admin.TokenFile })},
		{"admin-console", "true serves the web console at / of admin.listen, behind a login with the admin token or a tenant's console token (admin.console)", boolOpt("admin.console", func(c *Config) *bool { return &c.Admin.Console })},
		{"admin-console-tokens-file", "file of the tenants' console tokens, lines TENANT:sha256:HEX (`shoal console-token` writes one): each sees and changes only its tenant (admin.console_tokens_file)", strOpt(func(c *Config) *string { return &c.Admin.ConsoleTokensFile })},
		{"admin-console-servers", "comma-separated admin APIs of the deployment's other processes, which the console asks beside this one's roles (admin.console_servers)", func(c *Config, v string) error {
			c.Admin.ConsoleServers = splitList(v)
			return nil
		}},
		{"admin-tls-cert-file", "PEM certificate chain that serves the admin listener over TLS (admin.tls_cert_file)", strOpt(func(c *Config) *string { return &c.Admin.TLSCertFile })},
		{"admin-tls-key-file", "PEM private key of admin.tls_cert_file (admin.tls_key_file)", strOpt(func(c *Config) *string { return &c.Admin.TLSKeyFile })},
		{"http-listen", "HTTP address of /metrics, /healthz, /readyz and, with --pprof, /debug/pprof/, none of them authenticated; loopback by default, :9090 serves every interface; empty disables it (http_listen)", strOpt(func(c *Config) *string { return &c.HTTPListen })},
		{"data-dir", "directory of the embedded backbone (data_dir)", strOpt(func(c *Config) *string { return &c.DataDir })},
		{"data-sync", "true fsyncs the embedded log and view store on every write (data_sync)", boolOpt("data_sync", func(c *Config) *bool { return &c.DataSync })},
		{"password-file", "password file (mosquitto_passwd format, bcrypt, argon2id; `shoal passwd` writes one): clients must authenticate (auth.password_file)", strOpt(func(c *Config) *string { return &c.Auth.PasswordFile })},
		{"allow-anonymous", "true accepts clients without a user name although authentication is configured (auth.allow_anonymous)", boolOpt("auth.allow_anonymous", func(c *Config) *bool { return &c.Auth.AllowAnonymous })},
		{"acl-file", "ACL file in Mosquitto's format, applied inside each client's tenant (auth.acl_file)", strOpt(func(c *Config) *string { return &c.Auth.ACLFile })},
		{"jwt-jwks-file", "JSON Web Key Set file whose keys verify JWTs sent as passwords (auth.jwt.jwks_file)", strOpt(func(c *Config) *string { return &c.Auth.JWT.JWKSFile })},
		{"jwt-public-key-file", "PEM public key (RSA, ECDSA, Ed25519) that verifies JWTs sent as passwords (auth.jwt.public_key_file)", strOpt(func(c *Config) *string { return &c.Auth.JWT.PublicKeyFile })},
		{"jwt-hmac-secret-file", "file holding the HMAC secret (≥ 32 bytes; one trailing line break dropped) that verifies JWTs sent as passwords (auth.jwt.hmac_secret_file)", strOpt(func(c *Config) *string { return &c.Auth.JWT.HMACSecretFile })},
		{"jwt-issuer", "required iss of JWTs (auth.jwt.issuer)", strOpt(func(c *Config) *string { return &c.Auth.JWT.Issuer })},
		{"jwt-audience", "required aud of JWTs (auth.jwt.audience)", strOpt(func(c *Config) *string { return &c.Auth.JWT.Audience })},
		{"tenant-separator", "client-id tenant separator; empty switches tenancy off (gateway.tenant_separator)", strOpt(func(c *Config) *string { return &c.Gateway.TenantSeparator })},
		{"log-level", "debug, info, warn or error (log_level)", strOpt(func(c *Config) *string { return &c.LogLevel })},
		{"log-format", "text or json (log_format)", strOpt(func(c *Config) *string { return &c.LogFormat })},
		{"pprof", "true serves Go's profiles under /debug/pprof/ on the HTTP address (pprof)", boolOpt("pprof", func(c *Config) *bool { return &c.Pprof })},
		{"clock-offset", "for fault tests only: every role reads its clock this far ahead, e.g. 30s (negative: behind) (clock_offset)", func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("clock_offset: %w", err)
			}
			c.ClockOffset = d
			return nil
		}},
		{"audit-expose-message-id", "true adds the user property shoal-message-id to every message delivered to an MQTT 5.0 client (audit.expose_message_id)", boolOpt("audit.expose_message_id", func(c *Config) *bool { return &c.Audit.ExposeMessageID })},
		{"audit-record-acks", "true writes every acknowledgement of a QoS 1/2 delivery to the log, for shoal trace (audit.record_acks)", boolOpt("audit.record_acks", func(c *Config) *bool { return &c.Audit.RecordAcks })},
		{"kafka-brokers", "comma-separated brokers of an external Kafka; empty runs the embedded one (kafka.brokers)", func(c *Config, v string) error {
			c.Kafka.Brokers = splitList(v)
			return nil
		}},
		{"kafka-embedded-addr", "loopback host:port on which the embedded Kafka also listens over TCP, with SASL/SCRAM (credentials in data_dir/kafka/client.properties); empty: in-process and Unix socket only (kafka.embedded_addr)", strOpt(func(c *Config) *string { return &c.Kafka.EmbeddedAddr })},
		{"cql-hosts", "comma-separated host:port of a CQL database (ScyllaDB, Cassandra) for the views; empty keeps them in Pebble under data_dir (cql.hosts)", func(c *Config, v string) error {
			c.CQL.Hosts = splitList(v)
			return nil
		}},
		{"cql-username", "user name for the CQL database's password authentication (cql.username)", strOpt(func(c *Config) *string { return &c.CQL.Username })},
		{"cql-password-file", "file holding the CQL password, trailing line breaks dropped (cql.password_file)", strOpt(func(c *Config) *string { return &c.CQL.PasswordFile })},
		{"cql-keyspace", "CQL keyspace of the views, created when missing (cql.keyspace)", strOpt(func(c *Config) *string { return &c.CQL.Keyspace })},
		{"cql-replication-factor", "replication factor of the keyspace Shoal creates, at most the cluster's nodes: 1 for a single node (cql.replication_factor)", func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("cql.replication_factor: %w", err)
			}
			c.CQL.ReplicationFactor = n
			return nil
		}},
		{"gateway-id", "name of this gateway instance in events and its slot lease (gateway.id)", strOpt(func(c *Config) *string { return &c.Gateway.ID })},
		{"gateway-slot", "partition of shoal.deliveries this gateway owns; -1 takes a free one by lease (gateway.slot)", func(c *Config, v string) error {
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil {
				return fmt.Errorf("gateway.slot: %w", err)
			}
			c.Gateway.Slot = int32(n)
			return nil
		}},
		{"kafka-partitions", "partitions of each event topic Shoal creates; 0: 16 on Kafka, on the embedded backbone the data directory's count or, for a new one, twice the CPUs from 4 to 16 (kafka.partitions)", func(c *Config, v string) error {
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil {
				return fmt.Errorf("kafka.partitions: %w", err)
			}
			c.Kafka.Partitions = int32(n)
			return nil
		}},
		{"kafka-deliveries-partitions", "partitions of shoal.deliveries, one per gateway slot, when not kafka.partitions' count; raised, the topic grows (kafka.deliveries_partitions)", func(c *Config, v string) error {
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil {
				return fmt.Errorf("kafka.deliveries_partitions: %w", err)
			}
			c.Kafka.DeliveriesPartitions = int32(n)
			return nil
		}},
		{"kafka-replication-factor", "replication factor of the topics Shoal creates; -1 for the brokers' default.replication.factor (kafka.replication_factor)", func(c *Config, v string) error {
			n, err := strconv.ParseInt(v, 10, 16)
			if err != nil {
				return fmt.Errorf("kafka.replication_factor: %w", err)
			}
			c.Kafka.ReplicationFactor = int16(n)
			return nil
		}},
		{"kafka-retention", "retention of the event topics Shoal creates, e.g. 168h; 0 keeps records without a time limit (kafka.retention)", func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("kafka.retention: %w", err)
			}
			c.Kafka.Retention = d
			return nil
		}},
		{"kafka-retention-bytes", "bytes each partition of the event topics Shoal creates keeps at most, e.g. 20MiB or 20971520; 0: 320 MiB per topic split over its partitions on the embedded backbone, no limit on Kafka; -1: no size limit (kafka.retention_bytes)", func(c *Config, v string) error {
			n, err := ParseByteSize(v)
			if err != nil {
				return fmt.Errorf("kafka.retention_bytes: %w", err)
			}
			c.Kafka.RetentionBytes = int64(n)
			return nil
		}},
		{"kafka-local-delivery", "false makes the roles of shoal all read every record through a fetch instead of passing them inside the process (kafka.local_delivery)", boolOpt("kafka.local_delivery", func(c *Config) *bool { return &c.Kafka.LocalDelivery })},
		{"kafka-express", "false makes the router of shoal all route QoS 0 publishes from the log only, not before they are written (kafka.express)", boolOpt("kafka.express", func(c *Config) *bool { return &c.Kafka.Express })},
	}
	return append(opts, kafkaSecurityOptions()...)
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(v string) []string {
	var out []string
	for _, b := range strings.Split(v, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// envName is the environment variable of a flag: SHOAL_MQTT_LISTEN.
func envName(flagName string) string {
	return "SHOAL_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Load builds the configuration from defaults, the YAML file named by
// --config or SHOAL_CONFIG, SHOAL_* variables (lookupEnv, as os.LookupEnv;
// a variable set to the empty string sets the empty value) and the flags in
// args, in that order of precedence (flags win). name is the command, as
// the user types it ("shoal all"). -h prints the flags to out and returns
// flag.ErrHelp; a command line that does not parse is an error of one
// line that says where the flags are listed, and nothing is printed.
func Load(name string, args []string, lookupEnv func(string) (string, bool), out io.Writer) (Config, error) {
	c := Default()
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	opts := options()
	vals := make(map[string]*string, len(opts))
	for _, o := range opts {
		vals[o.flag] = fs.String(o.flag, "", o.usage+"; env "+envName(o.flag))
	}
	cfgFile := fs.String("config", "", "YAML configuration file; env SHOAL_CONFIG")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(out, "usage: %s [flags]\n\n"+
				"Every flag is also the SHOAL_* environment variable it names, and the key\n"+
				"in parentheses of the YAML file of --config; flags win over variables,\n"+
				"variables over the file.\n\n", name)
			fs.SetOutput(out)
			fs.PrintDefaults()
			return c, err
		}
		return c, commandLineError(name, err)
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q; see %s -h", fs.Arg(0), name)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	var yamlListens listenKeys // which listen addresses the file sets
	file := *cfgFile
	if !set["config"] {
		file, _ = lookupEnv("SHOAL_CONFIG")
	}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return c, fmt.Errorf("config: %w", err)
		}
		if b, err = sizesInBytes(b); err != nil {
			return c, fmt.Errorf("config %s: %w", file, err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		f := fileShape{Config: c, TLS: c.Gateway.TLS}
		if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
			return c, fmt.Errorf("config %s: %w", file, fileErrors(b, err))
		}
		c = f.Config
		c.Gateway.TLS = f.TLS
		if err := yaml.Unmarshal(b, &yamlListens); err != nil {
			return c, fmt.Errorf("config %s: %w", file, err)
		}
	}
	for _, o := range opts {
		if v, ok := lookupEnv(envName(o.flag)); ok {
			if err := o.set(&c, v); err != nil {
				return c, fmt.Errorf("%s: %w", envName(o.flag), err)
			}
		}
	}
	for _, o := range opts {
		if set[o.flag] {
			if err := o.set(&c, *vals[o.flag]); err != nil {
				return c, fmt.Errorf("--%s: %w", o.flag, err)
			}
		}
	}
	c.loopbackWithoutAuth(listenGiven(set, lookupEnv, yamlListens))
	return c, c.Validate()
}

// commandLineError is the flag package's error about args, in one line
// that names the flag as the help spells it (--name) and the help to read.
func commandLineError(name string, err error) error {
	msg := err.Error()
	if flagName, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		msg = "unknown flag --" + flagName
	} else if flagName, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		msg = "flag needs an argument: --" + flagName
	}
	return fmt.Errorf("%s; see %s -h", msg, name)
}

// fileShape is the YAML file: Config, and the top-level tls section,
// which configures the gateway's TLS listeners (gateway.Config.TLS; the
// gateway section does not have it). The section is top-level because TLS
// belongs to the process rather than to one role's tuning, as auth does.
type fileShape struct {
	Config `yaml:",inline"`
	TLS    gateway.TLS `yaml:"tls"`
}

// listenKeys are the listen addresses a YAML file sets (nil: not set).
type listenKeys struct {
	Gateway struct {
		MQTTListen  *string `yaml:"mqtt_listen"`
		WSListen    *string `yaml:"ws_listen"`
		MQTTSListen *string `yaml:"mqtts_listen"`
		WSSListen   *string `yaml:"wss_listen"`
	} `yaml:"gateway"`
}

// listenGiven reports, per listener flag, whether its address was given
// explicitly: by a flag, a SHOAL_* variable or the YAML file.
func listenGiven(flags map[string]bool, lookupEnv func(string) (string, bool), file listenKeys) map[string]bool {
	given := map[string]bool{}
	for flag, inFile := range map[string]bool{
		"mqtt-listen":  file.Gateway.MQTTListen != nil,
		"ws-listen":    file.Gateway.WSListen != nil,
		"mqtts-listen": file.Gateway.MQTTSListen != nil,
		"wss-listen":   file.Gateway.WSSListen != nil,
	} {
		_, inEnv := lookupEnv(envName(flag))
		given[flag] = flags[flag] || inEnv || inFile
	}
	return given
}

// loopbackWithoutAuth does what Mosquitto 2 does: with no authentication
// configured, a listener whose address was not given explicitly listens
// on loopback only (its default port on 127.0.0.1), and LoopbackOnly
// says so, for the log at start.
func (c *Config) loopbackWithoutAuth(given map[string]bool) {
	if c.AuthConfigured() {
		return
	}
	for flag, addr := range map[string]*string{
		"mqtt-listen": &c.Gateway.MQTTListen, "ws-listen": &c.Gateway.WSListen,
		"mqtts-listen": &c.Gateway.MQTTSListen, "wss-listen": &c.Gateway.WSSListen,
	} {
		if given[flag] || *addr == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(*addr); err == nil {
			*addr = net.JoinHostPort("127.0.0.1", port)
			c.LoopbackOnly = true
		}
	}
}
