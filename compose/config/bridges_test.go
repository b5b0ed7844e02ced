package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/shoal-mqtt/shoal/bridge"
)

// bridgesYAML is the bridges section as the documentation writes it.
const bridgesYAML = `
bridges:
  kafka:
    brokers: []            # optional: another cluster; empty = Shoal's own Kafka (kafka.*)
    out:
      - name: telemetry
        tenant: acme                       # "" = default tenant
        mqtt_filter: "plant/+/telemetry"   # any MQTT filter, + and #
        kafka_topic: "iot.telemetry"       # {tenant}, {topic}, {topic[N]}, {client_id}
        key: "{topic}"                     # same placeholders, or "" for no key
    in:
      - name: commands
        tenant: acme
        kafka_topic: "iot.commands"
        mqtt_topic: "plant/{key}/command"  # {key}, {header.NAME}
        qos: 1
        dead_letter_topic: ""              # optional
`

func TestBridgesSection(t *testing.T) {
	c, err := loadYAML(t, bridgesYAML)
	if err != nil {
		t.Fatal(err)
	}
	want := bridge.Config{
		Brokers: []string{},
		Out:     []bridge.OutMapping{{Name: "telemetry", Tenant: "acme", MQTTFilter: "plant/+/telemetry", KafkaTopic: "iot.telemetry", Key: "{topic}"}},
		In:      []bridge.InMapping{{Name: "commands", Tenant: "acme", KafkaTopic: "iot.commands", MQTTTopic: "plant/{key}/command", QoS: 1}},
	}
	if diff := cmp.Diff(want, c.Bridges.Kafka.Config); diff != "" {
		t.Errorf("bridges.kafka (-want +got):\n%s", diff)
	}
	m, err := c.Bridges.Kafka.Compile()
	if err != nil {
		t.Fatal(err)
	}
	if got := m.MatchOut("acme", "plant/3/telemetry", nil); len(got) != 1 || got[0].Name != "telemetry" {
		t.Errorf("MatchOut: %v, want the telemetry mapping", got)
	}

	// Another cluster, secured as kafka.* is.
	c, err = loadYAML(t, `
bridges:
  kafka:
    brokers: [k1:9093, k2:9093]
    sasl: {mechanism: SCRAM-SHA-512, user: bridge, password_file: /run/secrets/bridge}
    tls: {enabled: true, ca_file: /etc/ca.pem}
`)
	if err != nil {
		t.Fatal(err)
	}
	k := c.Bridges.Kafka
	if !cmp.Equal(k.Brokers, []string{"k1:9093", "k2:9093"}) || k.SASL.User != "bridge" || !k.TLS.Enabled || k.TLS.CAFile != "/etc/ca.pem" {
		t.Errorf("bridges.kafka: %+v", k)
	}

	none, err := loadYAML(t, "log_level: info\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(none.Bridges.Kafka.Out)+len(none.Bridges.Kafka.In) != 0 {
		t.Errorf("without the section: %+v, want no mappings", none.Bridges)
	}
}

// TestBridgesNamesBadKeys: each kind of mistake in the section is refused
// at load, naming its key.
func TestBridgesNamesBadKeys(t *testing.T) {
	for _, c := range []struct {
		name, from, to, want string
	}{
		{"no name", "- name: commands", `- name: ""`, "bridges.kafka.in[0].name: required"},
		{"repeated name", "- name: commands", "- name: telemetry\n        kafka_topic: other\n      - name: telemetry", "bridges.kafka.in[1].name: \"telemetry\" is in[0]'s already"},
		{"bad filter", `"plant/+/telemetry"`, `"plant/+x/telemetry"`, "bridges.kafka.out[0].mqtt_filter: \"plant/+x/telemetry\": topic filter"},
		{"shared filter", `"plant/+/telemetry"`, `"$share/g/plant/+/telemetry"`, "bridges.kafka.out[0].mqtt_filter: \"$share/g/plant/+/telemetry\": a shared subscription"},
		{"unknown placeholder", `key: "{topic}"`, `key: "{topic}/{clientid}"`, "bridges.kafka.out[0].key: \"{topic}/{clientid}\" at offset 8: unknown placeholder {clientid}"},
		{"unknown in placeholder", `"plant/{key}/command"`, `"plant/{topic}/command"`, "bridges.kafka.in[0].mqtt_topic: \"plant/{topic}/command\" at offset 6: unknown placeholder {topic}"},
		{"invalid rendered topic", `"plant/{key}/command"`, `"{key}"`, "bridges.kafka.in[0].mqtt_topic: \"{key}\" can render an empty topic"},
		{"wildcard in topic", `"plant/{key}/command"`, `"plant/{key}/#"`, "bridges.kafka.in[0].mqtt_topic: \"plant/{key}/#\""},
		{"kafka topic", `"iot.telemetry"`, `"iot/telemetry"`, "bridges.kafka.out[0].kafka_topic: \"iot/telemetry\": '/' at offset 3"},
		{"qos", "qos: 1", "qos: 3", "bridges.kafka.in[0].qos: must be 0, 1 or 2; is 3"},
		{"qos type", "qos: 1", "qos: high", `bridges.kafka.in[0].qos (line 16): "high" is not a whole number`},
		{"two in on one topic", "- name: commands", "- name: first\n        kafka_topic: iot.commands\n      - name: commands", "bridges.kafka.in[1].kafka_topic: \"iot.commands\" is in[0]'s already"},
		{"loop", `kafka_topic: "iot.commands"`, `kafka_topic: "iot.telemetry"`, "bridges.kafka.in[0].kafka_topic: \"iot.telemetry\" may be written by out[0]"},
		{"dead letter", `dead_letter_topic: ""`, `dead_letter_topic: "iot.commands"`, "bridges.kafka.in[0].dead_letter_topic: \"iot.commands\" is read by in[0]"},
		{"unknown key in a mapping", "        qos: 1", "        qos: 1\n        retain: true", "bridges.kafka.in[0].retain (line 17): unknown key"},
		{"unknown key in kafka", "    brokers: []", "    brokers: []\n    partitions: 3", "bridges.kafka.partitions (line 5): unknown key"},
		{"unknown bridge", "bridges:\n", "bridges:\n  mqtt: {}\n", "bridges.mqtt (line 3): unknown key"},
		{"security without brokers", "    brokers: []", "    brokers: []\n    tls: {enabled: true}", "bridges.kafka.sasl, bridges.kafka.tls: they secure bridges.kafka.brokers"},
		{"security's own checks", "    brokers: []", "    brokers: [k1:9093]\n    sasl: {mechanism: MD5, user: u, password_file: f}", `bridges.kafka.sasl.mechanism: "MD5" is not`},
		{"half a certificate", "    brokers: []", "    brokers: [k1:9093]\n    tls: {enabled: true, cert_file: c.pem}", "bridges.kafka.tls.cert_file, bridges.kafka.tls.key_file: give both or neither"},
	} {
		if !strings.Contains(bridgesYAML, c.from) {
			t.Fatalf("%s: %q is not in the YAML", c.name, c.from)
		}
		yml := strings.Replace(bridgesYAML, c.from, c.to, 1)
		_, err := loadYAML(t, yml)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v\nwant %q", c.name, err, c.want)
		}
	}
}
