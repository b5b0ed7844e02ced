package config

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/gateway"
	"github.com/shoal-mqtt/shoal/kafka"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestLoadPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "shoal.yaml")
	yml := "data_dir: /from/yaml\nhttp_listen: 127.0.0.1:1\ngateway:\n  mqtt_listen: 127.0.0.1:2\n  connect_timeout: 3s\n"
	if err := os.WriteFile(file, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load("shoal", []string{"--config", file, "--mqtt-listen", "127.0.0.1:3"},
		env(map[string]string{"SHOAL_HTTP_LISTEN": "127.0.0.1:4", "SHOAL_MQTT_LISTEN": "127.0.0.1:5", "SHOAL_WS_LISTEN": ""}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "/from/yaml" {
		t.Errorf("data_dir = %q, want the YAML value", c.DataDir)
	}
	if c.HTTPListen != "127.0.0.1:4" {
		t.Errorf("http_listen = %q, want the environment's value over YAML", c.HTTPListen)
	}
	if c.Gateway.MQTTListen != "127.0.0.1:3" {
		t.Errorf("mqtt_listen = %q, want the flag's value over env and YAML", c.Gateway.MQTTListen)
	}
	if c.Gateway.WSListen != "" {
		t.Errorf("ws_listen = %q, want empty (set empty by env)", c.Gateway.WSListen)
	}
	if c.Gateway.ConnectTimeout != 3*time.Second {
		t.Errorf("connect_timeout = %v, want 3s", c.Gateway.ConnectTimeout)
	}
}

func TestLoadNamesBadKeys(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(file, []byte("gateway:\n  mqtt_lisen: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load("shoal", []string{"--config", file}, env(nil), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "mqtt_lisen") {
		t.Fatalf("unknown YAML key: err = %v, want it named", err)
	}
	_, err = Load("shoal", []string{"--log-level", "loud"}, env(nil), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "log_level") {
		t.Fatalf("bad log level: err = %v, want log_level named", err)
	}
	_, err = Load("shoal", nil, env(map[string]string{"SHOAL_KAFKA_PARTITIONS": "many"}), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "SHOAL_KAFKA_PARTITIONS") {
		t.Fatalf("bad env: err = %v, want the variable named", err)
	}
	_, err = Load("shoal", []string{"--mqtt-listen", "", "--ws-listen", ""}, env(nil), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "gateway.mqtt_listen") {
		t.Fatalf("no listener: err = %v, want gateway.mqtt_listen named", err)
	}
}

// TestLoadNamesMistypedKeys checks that a value of the wrong type in the
// file is refused with its key's dotted path and what the key takes, not
// only a line and a Go type.
func TestLoadNamesMistypedKeys(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		yaml string
		want []string // all in the error
	}{
		{"gateway:\n  express_linger: fast\n", []string{`gateway.express_linger (line 2): "fast" is not a duration`, "500ms"}},
		{"gateway:\n  session_timeout: 12\n", []string{"gateway.session_timeout (line 2)", "12s is 12 seconds"}},
		{"kafka:\n  partitions: many\n", []string{`kafka.partitions (line 2): "many" is not a whole number`}},
		{"gateway:\n  max_packet_size: [1]\n", []string{"gateway.max_packet_size (line 2): a list is not a whole number"}},
		{"log_level: info\ngateway:\n  mqtt_lisen: x\n  connect_timeout: soon\n", []string{
			"gateway.mqtt_lisen (line 3): unknown key", `gateway.connect_timeout (line 4): "soon" is not a duration`}},
	} {
		file := filepath.Join(dir, "bad.yaml")
		if err := os.WriteFile(file, []byte(tc.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load("shoal", []string{"--config", file}, env(nil), io.Discard)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%q: err = %v, want it to say %q", tc.yaml, err, w)
			}
		}
	}
}

func TestLoadSwitches(t *testing.T) {
	c, err := Load("shoal", []string{"--pprof", "true"}, env(map[string]string{"SHOAL_DATA_SYNC": "1"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Pprof || !c.DataSync {
		t.Errorf("pprof %v, data_sync %v: want both on", c.Pprof, c.DataSync)
	}
	d := Default()
	if d.Pprof || d.DataSync {
		t.Errorf("defaults: pprof %v, data_sync %v: want both off", d.Pprof, d.DataSync)
	}
	_, err = Load("shoal", []string{"--data-sync", "maybe"}, env(nil), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "data_sync") {
		t.Fatalf("bad data_sync: err = %v, want data_sync named", err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "linger.yaml")
	if err := os.WriteFile(file, []byte("gateway:\n  produce_linger: 2s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load("shoal", []string{"--config", file}, env(nil), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "gateway.produce_linger") {
		t.Fatalf("produce_linger 2s: err = %v, want gateway.produce_linger named", err)
	}
}

func TestKafkaTopicKeys(t *testing.T) {
	c, err := Load("shoal", nil, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Kafka.ReplicationFactor != -1 || c.Kafka.Retention != 7*24*time.Hour {
		t.Errorf("defaults: replication_factor %d, retention %s; want -1 and 168h", c.Kafka.ReplicationFactor, c.Kafka.Retention)
	}
	// The embedded backbone bounds the event topics by size too
	// (kafka.retention_bytes 0: the backbone's default, a budget per
	// topic), Kafka does not; its new topics have twice the CPUs in
	// partitions (4 to 16), and existing ones keep theirs
	// (kafka.partitions 0: the backbone's default).
	want := kafka.DefaultCatalogue()
	for _, s := range []*kafka.TopicSpec{&want.Messages, &want.Sessions, &want.Presence, &want.Deliveries} {
		s.Partitions = kafka.EmbeddedPartitions(runtime.GOMAXPROCS(0))
		if !s.Compacted {
			s.RetentionBytesTotal = kafka.EmbeddedRetentionBudget
		}
	}
	if c.Kafka.RetentionBytes != 0 || c.Kafka.Partitions != 0 {
		t.Errorf("default kafka.retention_bytes %d, kafka.partitions %d: want 0 and 0 (the backbone's defaults)", c.Kafka.RetentionBytes, c.Kafka.Partitions)
	}
	if got := c.Kafka.Catalogue(); got != want {
		t.Errorf("the defaults' catalogue %+v differs from kafka.DefaultCatalogue() with the embedded partitions and size bound %+v", got, want)
	}
	if !c.Kafka.AdoptPartitions() {
		t.Error("the embedded backbone's default partitions: existing topics do not keep theirs")
	}
	if got := want.Messages.Partitions; got < 4 || got > kafka.DefaultPartitions {
		t.Errorf("embedded partitions %d on %d CPUs, want 4 to %d", got, runtime.GOMAXPROCS(0), kafka.DefaultPartitions)
	}
	ck, err := Load("shoal", []string{"--kafka-brokers", "k1:9092"}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ck.Kafka.Catalogue(), kafka.DefaultCatalogue(); got != want {
		t.Errorf("the defaults' catalogue on Kafka %+v differs from kafka.DefaultCatalogue() %+v", got, want)
	}
	if ck.Kafka.AdoptPartitions() {
		t.Error("on Kafka the catalogue's partitions are adopted from existing topics, want them checked")
	}
	// Refused like the catalogue refuses them, under this file's keys.
	c.Kafka.Partitions = -1
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "kafka.partitions: must be ≥ 1, or 0 for the backbone's default; is -1") {
		t.Errorf("kafka.partitions -1: %v", err)
	}

	c.Kafka.Partitions = 0
	c.Kafka.DeliveriesPartitions = -2
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "kafka.deliveries_partitions: must be ≥ 1, or 0 for kafka.partitions' count; is -2") {
		t.Errorf("kafka.deliveries_partitions -2: %v", err)
	}
	// More gateway slots than partitions: the deliveries topic alone.
	cd, err := Load("shoal", []string{"--kafka-brokers", "k1:9092", "--kafka-partitions", "8", "--kafka-deliveries-partitions", "24"}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cat := cd.Kafka.Catalogue(); cat.Deliveries.Partitions != 24 || cat.Messages.Partitions != 8 || cat.Sessions.Partitions != 8 || cat.Presence.Partitions != 8 {
		t.Errorf("kafka.deliveries_partitions 24 with kafka.partitions 8: %+v", cat)
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "shoal.yaml")
	if err := os.WriteFile(file, []byte("kafka:\n  partitions: 6\n  replication_factor: 2\n  retention: 36h\n  retention_bytes: 1048576\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err = Load("shoal", []string{"--config", file}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Kafka.ReplicationFactor != 2 || c.Kafka.Retention != 36*time.Hour || c.Kafka.RetentionBytes != 1<<20 {
		t.Errorf("YAML: replication_factor %d, retention %s, retention_bytes %d; want 2, 36h and 1048576",
			c.Kafka.ReplicationFactor, c.Kafka.Retention, c.Kafka.RetentionBytes)
	}
	c, err = Load("shoal", []string{"--config", file, "--kafka-replication-factor", "3", "--kafka-retention-bytes", "4194304"},
		env(map[string]string{"SHOAL_KAFKA_REPLICATION_FACTOR": "5", "SHOAL_KAFKA_RETENTION": "48h", "SHOAL_KAFKA_RETENTION_BYTES": "2097152"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Kafka.ReplicationFactor != 3 || c.Kafka.Retention != 48*time.Hour || c.Kafka.RetentionBytes != 4<<20 {
		t.Errorf("flag over env over YAML: replication_factor %d, retention %s, retention_bytes %d; want 3 (flag), 48h (env) and 4194304 (flag)",
			c.Kafka.ReplicationFactor, c.Kafka.Retention, c.Kafka.RetentionBytes)
	}

	// The catalogue the roles run with.
	cat := c.Kafka.Catalogue()
	for _, s := range cat.All() {
		wantRetention, wantBytes := 48*time.Hour, int64(4<<20)
		if s.Compacted {
			wantRetention, wantBytes = 0, 0
		}
		wantPartitions := int32(6)
		if s.Name == kafka.TopicQuotas {
			wantPartitions = kafka.DefaultQuotaPartitions
		}
		if s.Partitions != wantPartitions || s.Replication != 3 || s.Retention != wantRetention || s.RetentionBytes != wantBytes {
			t.Errorf("catalogue %s: %d partitions, replication %d, retention %s, retention bytes %d; want %d, 3, %s, %d",
				s.Name, s.Partitions, s.Replication, s.Retention, s.RetentionBytes, wantPartitions, wantRetention, wantBytes)
		}
	}
	if !cat.Presence.Compacted {
		t.Error("the presence topic lost its compaction")
	}
	if c.Kafka.AdoptPartitions() {
		t.Error("an explicit kafka.partitions is adopted from existing topics, want it checked")
	}
	if err := cat.Validate(); err != nil {
		t.Errorf("catalogue of a valid configuration: %v", err)
	}
	c, err = Load("shoal", []string{"--kafka-replication-factor", "-1", "--kafka-retention", "0"}, env(nil), io.Discard)
	if err != nil {
		t.Fatalf("replication -1, retention 0: %v", err)
	}
	if cat := c.Kafka.Catalogue(); cat.Messages.Replication != -1 || cat.Messages.Retention != 0 || cat.Validate() != nil {
		t.Errorf("catalogue with the brokers' replication and no time limit: %+v, %v", cat.Messages, cat.Validate())
	}
	// -1 lifts the embedded backbone's size bound.
	c, err = Load("shoal", []string{"--kafka-retention-bytes", "-1"}, env(nil), io.Discard)
	if err != nil {
		t.Fatalf("retention_bytes -1: %v", err)
	}
	if cat := c.Kafka.Catalogue(); cat.Messages.RetentionBytes != -1 || cat.Deliveries.RetentionBytes != -1 || cat.Validate() != nil {
		t.Errorf("catalogue without a size limit: %+v, %v", cat.Messages, cat.Validate())
	}
}

func TestKafkaTopicKeysRefused(t *testing.T) {
	dir := t.TempDir()
	yaml := func(body string) string {
		f := filepath.Join(dir, strings.ReplaceAll(body, "\n", "_")+".yaml")
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want []string // in the error
	}{
		{args: []string{"--kafka-replication-factor", "0"}, want: []string{"kafka.replication_factor", "is 0"}},
		{args: []string{"--kafka-replication-factor", "-2"}, want: []string{"kafka.replication_factor", "is -2"}},
		{args: []string{"--kafka-replication-factor", "40000"}, want: []string{"--kafka-replication-factor", "kafka.replication_factor", "out of range"}},
		{env: map[string]string{"SHOAL_KAFKA_REPLICATION_FACTOR": "three"}, want: []string{"SHOAL_KAFKA_REPLICATION_FACTOR", "kafka.replication_factor"}},
		{args: []string{"--kafka-retention", "-1h"}, want: []string{"kafka.retention", "is -1h0m0s"}},
		{args: []string{"--kafka-retention", "1us"}, want: []string{"kafka.retention", "at least 1ms"}},
		{env: map[string]string{"SHOAL_KAFKA_RETENTION": "a week"}, want: []string{"SHOAL_KAFKA_RETENTION", "kafka.retention"}},
		{args: []string{"--config", yaml("kafka:\n  replication_factor: 0\n")}, want: []string{"kafka.replication_factor", "is 0"}},
		{args: []string{"--config", yaml("kafka:\n  retention: -5m\n")}, want: []string{"kafka.retention", "is -5m0s"}},
		{args: []string{"--kafka-retention-bytes", "-2"}, want: []string{"kafka.retention_bytes", "is -2"}},
		{env: map[string]string{"SHOAL_KAFKA_RETENTION_BYTES": "1 GeB"}, want: []string{"SHOAL_KAFKA_RETENTION_BYTES", "kafka.retention_bytes", "unknown unit"}},
		{args: []string{"--config", yaml("kafka:\n  retention_bytes: -10\n")}, want: []string{"kafka.retention_bytes", "is -10"}},
	} {
		_, err := Load("shoal", tc.args, env(tc.env), io.Discard)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("Load(%q, env %v): err = %v, want it to contain %q", tc.args, tc.env, err, w)
			}
		}
	}
}

// TestCQLReplicationFactor: the factor of the keyspace Shoal creates is
// reachable by flag and environment (a single node needs 1: docs/deployment.md), and a
// bad value is refused with the key named.
func TestCQLReplicationFactor(t *testing.T) {
	if d := Default(); d.CQL.ReplicationFactor != 3 {
		t.Errorf("default cql.replication_factor %d, want 3", d.CQL.ReplicationFactor)
	}
	hosts := []string{"--cql-hosts", "db1:9042"}
	c, err := Load("shoal", append(hosts, "--cql-replication-factor", "1"), env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.CQL.ReplicationFactor != 1 {
		t.Errorf("--cql-replication-factor 1: cql.replication_factor %d", c.CQL.ReplicationFactor)
	}
	c, err = Load("shoal", hosts, env(map[string]string{"SHOAL_CQL_REPLICATION_FACTOR": "2"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.CQL.ReplicationFactor != 2 {
		t.Errorf("SHOAL_CQL_REPLICATION_FACTOR=2: cql.replication_factor %d", c.CQL.ReplicationFactor)
	}
	for _, v := range []string{"three", "0"} {
		_, err = Load("shoal", append(hosts, "--cql-replication-factor", v), env(nil), io.Discard)
		if err == nil || !strings.Contains(err.Error(), "cql.replication_factor") {
			t.Errorf("--cql-replication-factor %s: err = %v, want cql.replication_factor named", v, err)
		}
	}
}

// TestLoopbackWithoutAuth: without authentication, listeners whose
// address was not given listen on loopback only (as Mosquitto 2 does); an
// address given by flag, variable or file, or a configured password file,
// keeps the address as it is.
func TestLoopbackWithoutAuth(t *testing.T) {
	file := filepath.Join(t.TempDir(), "shoal.yaml")
	if err := os.WriteFile(file, []byte("gateway:\n  ws_listen: \":8083\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name         string
		args         []string
		env          map[string]string
		mqtt, ws     string
		loopbackOnly bool
	}{
		{"defaults", nil, nil, "127.0.0.1:1883", "127.0.0.1:8083", true},
		{"flag", []string{"--mqtt-listen", ":1883"}, nil, ":1883", "127.0.0.1:8083", true},
		{"variable", nil, map[string]string{"SHOAL_WS_LISTEN": ":8083"}, "127.0.0.1:1883", ":8083", true},
		{"file", []string{"--config", file}, nil, "127.0.0.1:1883", ":8083", true},
		{"both given", []string{"--mqtt-listen", ":1883", "--ws-listen", ""}, nil, ":1883", "", false},
		{"password file", []string{"--password-file", "/etc/shoal/passwd"}, nil, ":1883", ":8083", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load("shoal", tc.args, env(tc.env), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if c.Gateway.MQTTListen != tc.mqtt || c.Gateway.WSListen != tc.ws || c.LoopbackOnly != tc.loopbackOnly {
				t.Fatalf("mqtt %q ws %q loopback only %v; want %q %q %v",
					c.Gateway.MQTTListen, c.Gateway.WSListen, c.LoopbackOnly, tc.mqtt, tc.ws, tc.loopbackOnly)
			}
		})
	}
}

// TestLoadTLS: the TLS listeners and the top-level tls section come from
// the file, the environment and flags (flags win), and reach the
// gateway's configuration; the gateway section has no tls of its own.
func TestLoadTLS(t *testing.T) {
	d := Default()
	if d.Gateway.MQTTSListen != "" || d.Gateway.WSSListen != "" || len(d.Gateway.WSAllowedOrigins) != 0 ||
		d.Gateway.TLS.Identity != "cn" || d.Gateway.TLS.RequireClientCert {
		t.Errorf("defaults: mqtts %q, wss %q, origins %v, tls %+v; want both off, no origin, identity cn",
			d.Gateway.MQTTSListen, d.Gateway.WSSListen, d.Gateway.WSAllowedOrigins, d.Gateway.TLS)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "shoal.yaml")
	yml := `gateway:
  mqtt_listen: ""
  mqtts_listen: ":8883"
  wss_listen: ":8084"
  ws_allowed_origins: ["https://*.example.com"]
tls:
  cert_file: /etc/shoal/server.pem
  key_file: /etc/shoal/server-key.pem
  client_ca_file: /etc/shoal/ca.pem
  require_client_cert: true
  identity: san-dns
`
	if err := os.WriteFile(file, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load("shoal", []string{"--config", file}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	g := c.Gateway
	want := gateway.TLS{CertFile: "/etc/shoal/server.pem", KeyFile: "/etc/shoal/server-key.pem",
		ClientCAFile: "/etc/shoal/ca.pem", RequireClientCert: true, Identity: "san-dns"}
	if g.MQTTListen != "" || g.MQTTSListen != ":8883" || g.WSSListen != ":8084" || g.TLS != want ||
		len(g.WSAllowedOrigins) != 1 || g.WSAllowedOrigins[0] != "https://*.example.com" {
		t.Errorf("from the file: mqtt %q, mqtts %q, wss %q, origins %v, tls %+v", g.MQTTListen, g.MQTTSListen, g.WSSListen, g.WSAllowedOrigins, g.TLS)
	}

	c, err = Load("shoal", []string{"--config", file, "--tls-identity", "san-uri", "--tls-require-client-cert", "false",
		"--ws-allowed-origins", "a.example.org, https://b.example.org", "--mqtts-listen", "127.0.0.1:18883"},
		env(map[string]string{"SHOAL_TLS_KEY_FILE": "/run/key.pem", "SHOAL_TLS_IDENTITY": "san-email", "SHOAL_TLS_CLIENT_CA_FILE": ""}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	g = c.Gateway
	want = gateway.TLS{CertFile: "/etc/shoal/server.pem", KeyFile: "/run/key.pem", Identity: "san-uri"}
	if g.TLS != want || g.MQTTSListen != "127.0.0.1:18883" ||
		strings.Join(g.WSAllowedOrigins, " ") != "a.example.org https://b.example.org" {
		t.Errorf("flags over env over file: mqtts %q, origins %q, tls %+v; want tls %+v", g.MQTTSListen, g.WSAllowedOrigins, g.TLS, want)
	}

	nested := filepath.Join(dir, "nested.yaml")
	if err := os.WriteFile(nested, []byte("gateway:\n  tls:\n    cert_file: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load("shoal", []string{"--config", nested}, env(nil), io.Discard); err == nil || !strings.Contains(err.Error(), "tls") {
		t.Errorf("gateway.tls in the file: %v, want an unknown key", err)
	}
}

// TestTLSRefused: a TLS listener without its files, a required client
// certificate without CAs, an unknown identity field or a malformed
// origin pattern are refused, the key named.
func TestTLSRefused(t *testing.T) {
	files := []string{"--tls-cert-file", "c.pem", "--tls-key-file", "k.pem"}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--mqtts-listen", ":8883"}, []string{"tls.cert_file: required by gateway.mqtts_listen", "tls.key_file: required by gateway.mqtts_listen"}},
		{[]string{"--wss-listen", ":8084", "--tls-cert-file", "c.pem"}, []string{"tls.key_file: required by gateway.wss_listen"}},
		{append([]string{"--mqtts-listen", ":8883", "--tls-require-client-cert", "true"}, files...), []string{"tls.require_client_cert", "tls.client_ca_file"}},
		{[]string{"--tls-require-client-cert", "yes please"}, []string{"--tls-require-client-cert", "tls.require_client_cert"}},
		{[]string{"--tls-identity", "serial"}, []string{"tls.identity", `"serial"`}},
		{[]string{"--ws-allowed-origins", "[a-"}, []string{"gateway.ws_allowed_origins", "[a-"}},
		{[]string{"--mqtt-listen", "", "--ws-listen", ""}, []string{"gateway.mqtt_listen", "mqtts_listen"}},
	} {
		_, err := Load("shoal", tc.args, env(nil), io.Discard)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("Load(%q): err = %v, want it to contain %q", tc.args, err, w)
			}
		}
	}
	// Only TLS listeners, the plain ones switched off.
	c, err := Load("shoal", append([]string{"--mqtt-listen", "", "--ws-listen", "", "--mqtts-listen", ":8883", "--wss-listen", ":8084"}, files...), env(nil), io.Discard)
	if err != nil {
		t.Fatalf("TLS listeners only: %v", err)
	}
	if c.Gateway.MQTTListen != "" || c.Gateway.WSListen != "" {
		t.Errorf("plain listeners %q %q, want both off", c.Gateway.MQTTListen, c.Gateway.WSListen)
	}
}

// TestLoopbackWithoutAuthTLS: the TLS listeners follow the loopback rule,
// and are off unless given, so an address given for one stays as given.
func TestLoopbackWithoutAuthTLS(t *testing.T) {
	file := filepath.Join(t.TempDir(), "shoal.yaml")
	if err := os.WriteFile(file, []byte("gateway:\n  wss_listen: \":8084\"\ntls:\n  cert_file: c.pem\n  key_file: k.pem\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load("shoal", []string{"--config", file, "--mqtts-listen", ":8883"}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Gateway.MQTTSListen != ":8883" || c.Gateway.WSSListen != ":8084" || c.Gateway.MQTTListen != "127.0.0.1:1883" || !c.LoopbackOnly {
		t.Errorf("mqtts %q wss %q mqtt %q loopback only %v; want the TLS addresses as given, mqtt on loopback",
			c.Gateway.MQTTSListen, c.Gateway.WSSListen, c.Gateway.MQTTListen, c.LoopbackOnly)
	}
}

// TestProxyProtocol: gateway.proxy_protocol and gateway.proxy_trusted from
// the file, the environment and flags; a bad mode or network, or a mode on
// without trusted networks, is refused with the key named.
func TestProxyProtocol(t *testing.T) {
	d, err := Load("shoal", nil, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := d.Gateway.Proxy(); err != nil || p != nil || d.Gateway.ProxyProtocol != "off" {
		t.Errorf("default: mode %q, policy %v, err %v; want off", d.Gateway.ProxyProtocol, p, err)
	}
	file := filepath.Join(t.TempDir(), "shoal.yaml")
	yml := "gateway:\n  proxy_protocol: optional\n  proxy_trusted: [10.0.0.0/8]\n"
	if err := os.WriteFile(file, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load("shoal", []string{"--config", file}, env(map[string]string{"SHOAL_PROXY_TRUSTED": "192.0.2.0/24, 2001:db8::/32"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Gateway.Proxy()
	if err != nil || p == nil || p.Mode != "optional" || len(p.Trusted) != 2 || p.Trusted[1].String() != "2001:db8::/32" ||
		p.Timeout != c.Gateway.ConnectTimeout {
		t.Errorf("file and env: policy %+v, err %v; want optional from the file, the env's networks", p, err)
	}
	c, err = Load("shoal", []string{"--config", file, "--proxy-protocol", "required"}, env(nil), io.Discard)
	if err != nil || c.Gateway.ProxyProtocol != "required" || strings.Join(c.Gateway.ProxyTrusted, " ") != "10.0.0.0/8" {
		t.Errorf("flag over file: %q %q, err %v", c.Gateway.ProxyProtocol, c.Gateway.ProxyTrusted, err)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--proxy-protocol", "on", "--proxy-trusted", "10.0.0.0/8"}, []string{"gateway.proxy_protocol", `"on"`}},
		{[]string{"--proxy-protocol", "optional", "--proxy-trusted", "10.0.0.0/33"}, []string{"gateway.proxy_trusted", "10.0.0.0/33"}},
		{[]string{"--proxy-protocol", "required"}, []string{"gateway.proxy_trusted", "forge its address"}},
		{[]string{"--proxy-protocol", "optional", "--proxy-trusted", ""}, []string{"gateway.proxy_trusted", "forge its address"}},
	} {
		_, err := Load("shoal", tc.args, env(nil), io.Discard)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("Load(%q): err = %v, want it to contain %q", tc.args, err, w)
			}
		}
	}
}
