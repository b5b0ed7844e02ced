package gateway

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/shoal-mqtt/shoal/gateway/listener"
)

// Config configures one gateway. Zero values take the defaults of
// DefaultConfig through Normalize.
type Config struct {
	// ID names this gateway instance in events (envelope.gateway).
	ID string `yaml:"id"`
	// Slot is the partition of shoal.deliveries this gateway owns; -1
	// takes a free one by lease (see SlotLeaser). With a leaser, an
	// explicit slot (a StatefulSet ordinal) is leased too, so two gateways
	// never own one slot.
	Slot int32 `yaml:"slot"`
	// SlotLease is the time-to-live of the slot lease; it is renewed every
	// third of it, and a gateway that cannot renew it in time stops.
	SlotLease time.Duration `yaml:"slot_lease"`
	// MQTTListen is the TCP address of the MQTT listener ("" disables it).
	MQTTListen string `yaml:"mqtt_listen"`
	// WSListen is the address of the MQTT-over-WebSocket listener, path
	// /mqtt, subprotocol "mqtt" ("" disables it).
	WSListen string `yaml:"ws_listen"`
	// MQTTSListen is the address of the MQTT-over-TLS listener ("", the
	// default, disables it; 8883 is its conventional port). It needs
	// TLS.CertFile and TLS.KeyFile.
	MQTTSListen string `yaml:"mqtts_listen"`
	// WSSListen is the address of the MQTT-over-WebSocket-over-TLS
	// listener, path /mqtt ("", the default, disables it; 8084 is its
	// conventional port). It needs TLS.CertFile and TLS.KeyFile.
	WSSListen string `yaml:"wss_listen"`
	// WSAllowedOrigins are the origins besides their own whose web pages
	// may open a WebSocket to the ws and wss listeners: host patterns
	// ("*.example.com"), or scheme and host ("https://*.example.com"), of
	// path.Match. Empty allows none: only clients that send no Origin
	// (not browsers) and pages served from the listener's own host
	// connect; a browser's upgrade from any other origin gets 403, so a
	// web page its visitor opens cannot reach a broker on their machine
	// or network.
	WSAllowedOrigins []string `yaml:"ws_allowed_origins"`
	// ProxyProtocol is whether the listeners (all four) read a PROXY
	// protocol header (v1 or v2) from a load balancer in front: off (the
	// default), optional (a trusted peer's header is used when sent) or
	// required (no connection is served without a trusted peer's header).
	// A header from a peer outside ProxyTrusted always closes the
	// connection. See package listener for the rules.
	ProxyProtocol string `yaml:"proxy_protocol"`
	// ProxyTrusted are the CIDR networks of the load balancers allowed to
	// send a PROXY header ("10.0.0.0/8"); optional and required need at
	// least one.
	ProxyTrusted []string `yaml:"proxy_trusted"`
	// TLS is the material of the TLS listeners. It is the top-level tls
	// section of the configuration file, not one of gateway's (the
	// composition layer fills it).
	TLS TLS `yaml:"-"`
	// TenantSeparator splits a client identifier into tenant and rest; the
	// tenant is the prefix up to the first separator. "" switches tenancy
	// off: every client belongs to the default tenant "".
	TenantSeparator string `yaml:"tenant_separator"`

	// ConnectTimeout bounds the wait for CONNECT after accepting a socket.
	ConnectTimeout time.Duration `yaml:"connect_timeout"`
	// SessionTimeout bounds the wait for the session service's answer.
	SessionTimeout time.Duration `yaml:"session_timeout"`
	// MaxKeepAlive caps the client's keep alive (sent back as Server Keep
	// Alive in 5.0); 0 leaves it to the client.
	MaxKeepAlive time.Duration `yaml:"max_keep_alive"`
	// MaxPacketSize is the largest packet accepted from a client.
	MaxPacketSize uint32 `yaml:"max_packet_size"`
	// ReceiveMaximum is how many QoS 1 and 2 publishes a client may have
	// unacknowledged towards the gateway.
	ReceiveMaximum uint16 `yaml:"receive_maximum"`
	// TopicAliasMaximum is the number of topic aliases a client may use
	// towards the gateway.
	TopicAliasMaximum uint16 `yaml:"topic_alias_maximum"`
	// MaxQueued bounds the QoS 1 and 2 messages waiting for a free slot of a
	// client's receive maximum; beyond it messages are dropped and counted.
	MaxQueued int `yaml:"max_queued"`
	// MaxOutBuffer bounds the bytes waiting to be written to one client;
	// QoS 0 messages beyond it are dropped and counted.
	MaxOutBuffer int `yaml:"max_out_buffer"`
	// WriteTimeout bounds one write to a client socket.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// ParkIdle is how long a TCP connection may send nothing before its
	// reader goroutine and read buffer are released and the gateway's
	// poller watches the socket instead, until a byte arrives (Linux; see
	// docs/gateway.md, "Idle connections park"). 0 keeps a reader goroutine per connection.
	ParkIdle time.Duration `yaml:"park_idle"`
	// parkQuiet is how long a connection that has sent nothing since its
	// CONNECT waits before it parks (connectParkIdle by default; never
	// longer than ParkIdle). Tests set it; it has no key.
	parkQuiet time.Duration
	// SysInterval is the period of the $SYS/broker topics; 0 disables them.
	SysInterval time.Duration `yaml:"sys_interval"`
	// ExposeMessageID adds the user property MessageIDProperty to every
	// message delivered to a 5.0 client (the configuration's
	// audit.expose_message_id).
	ExposeMessageID bool `yaml:"-"`
	// RecordAcks writes a DeliveryAck to the log for every QoS 1 or 2
	// delivery a client acknowledges that is not an inbox entry (those are
	// always reported, as InboxAck): the configuration's
	// audit.record_acks.
	RecordAcks bool `yaml:"-"`
	// ProduceLinger is how long a record the gateway produces (a PUBLISH
	// above all) may wait for others to share its Kafka request. Many
	// clients publishing a little each make many tiny requests; a short
	// linger makes them few, at the price of that much latency (see
	// bench/README.md). 0 sends every record at once.
	ProduceLinger time.Duration `yaml:"produce_linger"`
	// ExpressLinger is how long the records of the express path of
	// `shoal all` (a QoS 0 publish routed before it was written, and the
	// deliveries made with it) may wait in the process to share a Kafka
	// request. They are the log's copy of what happened already, so
	// nobody waits for them, and every request costs the embedded log a
	// round of work. Any other record of the gateway's producer (a QoS 1
	// publish, a subscription) sends them first, so they keep their
	// order; a crash loses at most this long of them, as it loses QoS 0
	// messages. 0 sends them as every other record.
	ExpressLinger time.Duration `yaml:"express_linger"`
	// Heartbeat is the period of the GatewayHeartbeat written to each
	// partition of shoal.sessions; the session service ends the
	// connections of a gateway silent for session.gateway_timeout.
	Heartbeat time.Duration `yaml:"heartbeat"`
	// KafkaTimeout is how long no broker of the log may answer before the
	// gateway reports not ready, moves its clients to other gateways
	// (DISCONNECT 0x9C) and refuses new ones (0x88) until one answers
	// again (kafkawatch.go); 0 turns the watch off. It outlasts a
	// broker's failover: only a partition or a whole cluster down
	// trips it.
	KafkaTimeout time.Duration `yaml:"kafka_timeout"`
}

// TLS configures the TLS listeners (mqtts_listen, wss_listen): files in
// PEM, reloaded when they change and on SIGHUP (Gateway.ReloadTLS).
type TLS struct {
	// CertFile is the server's certificate chain, leaf first, and KeyFile
	// its private key.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ClientCAFile holds the CAs of client certificates (mutual TLS): with
	// it a client may present a certificate, which must verify; "" asks
	// for none.
	ClientCAFile string `yaml:"client_ca_file"`
	// RequireClientCert refuses, in the TLS handshake, a client without a
	// certificate of ClientCAFile's CAs.
	RequireClientCert bool `yaml:"require_client_cert"`
	// Identity is the field of a client certificate that names its
	// identity (listener.CertIdentity): cn (the default), san-dns,
	// san-email or san-uri (the first of the kind).
	Identity string `yaml:"identity"`
}

// Files returns the files of the TLS material as the listeners take them.
func (t TLS) Files() listener.TLSFiles {
	return listener.TLSFiles{
		CertFile: t.CertFile, KeyFile: t.KeyFile,
		ClientCAFile: t.ClientCAFile, RequireClientCert: t.RequireClientCert,
	}
}

// DefaultExpressLinger is Config.ExpressLinger's default: long enough that
// a steady QoS 0 rate's background records share few requests, short
// enough to leave the p99 as it was (bench/HISTORY.md has the figures).
const DefaultExpressLinger = 10 * time.Millisecond

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		ID:                "gateway-0",
		MQTTListen:        ":1883",
		WSListen:          ":8083",
		ProxyProtocol:     string(listener.ProxyOff),
		TenantSeparator:   "-",
		ConnectTimeout:    10 * time.Second,
		SessionTimeout:    10 * time.Second,
		MaxPacketSize:     1 << 20,
		ReceiveMaximum:    1024,
		TopicAliasMaximum: 64,
		MaxQueued:         10_000,
		MaxOutBuffer:      4 << 20,
		WriteTimeout:      30 * time.Second,
		ParkIdle:          time.Second,
		SysInterval:       10 * time.Second,
		Heartbeat:         time.Second,
		KafkaTimeout:      10 * time.Second,
		ProduceLinger:     time.Millisecond,
		ExpressLinger:     DefaultExpressLinger,
		SlotLease:         15 * time.Second,
		TLS:               TLS{Identity: listener.IdentityCN},
	}
}

// Validate reports the first invalid setting, naming its key.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, msg string) { errs = append(errs, fmt.Errorf("gateway.%s: %s", key, msg)) }
	if c.ID == "" {
		bad("id", "must not be empty")
	}
	if c.Slot < -1 {
		bad("slot", "must be ≥ 0, or -1 to lease a free one")
	}
	if c.SlotLease < time.Second {
		bad("slot_lease", "must be ≥ 1s")
	}
	if c.MQTTListen == "" && c.WSListen == "" && c.MQTTSListen == "" && c.WSSListen == "" {
		bad("mqtt_listen", "no listener: set mqtt_listen, ws_listen, mqtts_listen or wss_listen")
	}
	if err := listener.CheckOrigins(c.WSAllowedOrigins); err != nil {
		bad("ws_allowed_origins", err.Error())
	}
	errs = append(errs, c.validateTLS()...)
	if _, err := c.Proxy(); err != nil {
		errs = append(errs, err)
	}
	if c.Heartbeat <= 0 {
		bad("heartbeat", "must be > 0")
	}
	if c.KafkaTimeout != 0 && c.KafkaTimeout < time.Second {
		bad("kafka_timeout", "must be ≥ 1s, or 0 to not watch Kafka")
	}
	if c.ConnectTimeout <= 0 {
		bad("connect_timeout", "must be > 0")
	}
	if c.SessionTimeout <= 0 {
		bad("session_timeout", "must be > 0")
	}
	if c.MaxKeepAlive < 0 || c.MaxKeepAlive > 65535*time.Second {
		bad("max_keep_alive", "must be between 0 and 65535s")
	}
	if c.MaxPacketSize < 64 || c.MaxPacketSize > 268_435_460 {
		bad("max_packet_size", "must be between 64 and 268435460 bytes")
	}
	if c.ReceiveMaximum == 0 {
		bad("receive_maximum", "must be ≥ 1")
	}
	if c.MaxQueued < 0 {
		bad("max_queued", "must be ≥ 0")
	}
	if c.MaxOutBuffer < 1024 {
		bad("max_out_buffer", "must be ≥ 1024 bytes")
	}
	if c.WriteTimeout <= 0 {
		bad("write_timeout", "must be > 0")
	}
	if c.ParkIdle < 0 {
		bad("park_idle", "must be ≥ 0 (0 never parks)")
	}
	if c.SysInterval < 0 {
		bad("sys_interval", "must be ≥ 0")
	}
	if c.ProduceLinger < 0 || c.ProduceLinger > time.Second {
		bad("produce_linger", "must be between 0 and 1s")
	}
	if c.ExpressLinger < 0 || c.ExpressLinger > time.Second {
		bad("express_linger", "must be between 0 and 1s")
	}
	return errors.Join(errs...)
}

// validateTLS checks the tls section against the listeners that need it;
// its keys are top-level (tls.cert_file).
func (c *Config) validateTLS() []error {
	var errs []error
	bad := func(key, msg string) { errs = append(errs, fmt.Errorf("tls.%s: %s", key, msg)) }
	var needs string // the first TLS listener configured
	if c.WSSListen != "" {
		needs = "gateway.wss_listen"
	}
	if c.MQTTSListen != "" {
		needs = "gateway.mqtts_listen"
	}
	if needs != "" && c.TLS.CertFile == "" {
		bad("cert_file", "required by "+needs)
	}
	if needs != "" && c.TLS.KeyFile == "" {
		bad("key_file", "required by "+needs)
	}
	if c.TLS.RequireClientCert && c.TLS.ClientCAFile == "" {
		bad("require_client_cert", "needs tls.client_ca_file, the CAs the client certificates are verified against")
	}
	if err := listener.CheckIdentityField(c.TLS.Identity); err != nil {
		bad("identity", fmt.Sprintf("%q is not cn, san-dns, san-email or san-uri", c.TLS.Identity))
	}
	return errs
}

// Proxy returns the listeners' PROXY protocol policy (nil when off); its
// error names the key at fault. The header is awaited for as long as
// CONNECT is.
func (c *Config) Proxy() (*listener.Proxy, error) {
	mode, err := listener.ParseProxyMode(c.ProxyProtocol)
	if err != nil {
		return nil, fmt.Errorf("gateway.proxy_protocol: %w", err)
	}
	trusted, err := listener.ParseProxyTrusted(c.ProxyTrusted)
	if err != nil {
		return nil, fmt.Errorf("gateway.proxy_trusted: %w", err)
	}
	if mode == listener.ProxyOff {
		return nil, nil
	}
	if len(trusted) == 0 {
		return nil, fmt.Errorf("gateway.proxy_trusted: proxy_protocol %s needs the networks of the load balancers: "+
			"a header accepted from anyone would let any client forge its address", mode)
	}
	return &listener.Proxy{Mode: mode, Trusted: trusted, Timeout: c.ConnectTimeout}, nil
}

// Tenant returns the tenant of a client identifier: the prefix up to the
// first separator, or "" (the default tenant) when there is none or tenancy
// is off.
func Tenant(clientID, sep string) string {
	if sep == "" {
		return ""
	}
	tenant, _, found := strings.Cut(clientID, sep)
	if !found {
		return ""
	}
	return tenant
}
