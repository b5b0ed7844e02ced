package bridge

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func sample() Config {
	return Config{
		Out: []OutMapping{{Name: "telemetry", Tenant: "acme", MQTTFilter: "plant/+/telemetry", KafkaTopic: "iot.telemetry", Key: "{topic}"}},
		In:  []InMapping{{Name: "commands", Tenant: "acme", KafkaTopic: "iot.commands", MQTTTopic: "plant/{key}/command", QoS: 1}},
	}
}

func names(outs []*Out) []string {
	var ns []string
	for _, o := range outs {
		ns = append(ns, o.Name)
	}
	return ns
}

func TestCompile(t *testing.T) {
	m, err := sample().Compile()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Out) != 1 || len(m.In) != 1 {
		t.Fatalf("%d out, %d in mappings, want 1 and 1", len(m.Out), len(m.In))
	}
	o := m.Out[0]
	if got := string(o.KafkaTopic.Append(nil, "acme", "plant/7/telemetry", "c")); got != "iot.telemetry" {
		t.Errorf("kafka topic %q", got)
	}
	if got := string(o.Key.Append(nil, "acme", "plant/7/telemetry", "c")); got != "plant/7/telemetry" {
		t.Errorf("key %q", got)
	}
	in := m.InFor("iot.commands")
	if in == nil || in.Name != "commands" || in.Tenant != "acme" || in.QoS != 1 {
		t.Fatalf("InFor(iot.commands) = %+v", in)
	}
	if got := string(in.MQTTTopic.Append(nil, []byte("p7"), nil)); got != "plant/p7/command" {
		t.Errorf("mqtt topic %q", got)
	}
	if m.InFor("iot.telemetry") != nil {
		t.Error("InFor(iot.telemetry) is an in mapping")
	}
	for _, c := range []struct {
		tenant, name string
		want         []string
	}{
		{"acme", "plant/7/telemetry", []string{"telemetry"}},
		{"acme", "plant/7/command", nil},
		{"acme", "plant/7/telemetry/x", nil},
		{"", "plant/7/telemetry", nil}, // another tenant's
		{"beta", "plant/7/telemetry", nil},
	} {
		if got := names(m.MatchOut(c.tenant, c.name, nil)); !cmp.Equal(got, c.want) {
			t.Errorf("MatchOut(%q, %q) = %v, want %v", c.tenant, c.name, got, c.want)
		}
	}

	empty, err := Config{}.Compile()
	if err != nil || len(empty.Out) != 0 || len(empty.In) != 0 || empty.MatchOut("", "a", nil) != nil || empty.InFor("a") != nil {
		t.Errorf("empty configuration: %+v, %v", empty, err)
	}
}

// TestMatchOut: every out mapping whose filter matches, in the order of
// the configuration, only its tenant's; '$' topics only for filters that
// name them.
func TestMatchOut(t *testing.T) {
	c := Config{Out: []OutMapping{
		{Name: "all", MQTTFilter: "#", KafkaTopic: "all"},
		{Name: "plant", MQTTFilter: "plant/#", KafkaTopic: "plant"},
		{Name: "telemetry", MQTTFilter: "plant/+/telemetry", KafkaTopic: "telemetry"},
		{Name: "exact", MQTTFilter: "plant/1/telemetry", KafkaTopic: "exact"},
		{Name: "sys", MQTTFilter: "$SYS/#", KafkaTopic: "sys"},
		{Name: "acme", Tenant: "acme", MQTTFilter: "#", KafkaTopic: "acme"},
		{Name: "again", MQTTFilter: "plant/1/telemetry", KafkaTopic: "again"},
		{Name: "last", MQTTFilter: "+/+/telemetry", KafkaTopic: "last"},
		{Name: "wide", MQTTFilter: "#", KafkaTopic: "wide"},
	}}
	m, err := c.Compile()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tenant, name string
		want         []string
	}{
		{"", "plant/1/telemetry", []string{"all", "plant", "telemetry", "exact", "again", "last", "wide"}},
		{"", "plant/2/telemetry", []string{"all", "plant", "telemetry", "last", "wide"}},
		{"", "plant", []string{"all", "plant", "wide"}},
		{"", "other", []string{"all", "wide"}},
		{"", "$SYS/uptime", []string{"sys"}},
		{"acme", "plant/1/telemetry", []string{"acme"}},
		{"acme", "$SYS/uptime", nil},
	} {
		if got := names(m.MatchOut(c.tenant, c.name, nil)); !cmp.Equal(got, c.want) {
			t.Errorf("MatchOut(%q, %q) = %v, want %v", c.tenant, c.name, got, c.want)
		}
	}
	dst := make([]*Out, 0, 8)
	if n := testing.AllocsPerRun(100, func() {
		dst = m.MatchOut("", "plant/1/telemetry", dst[:0])
	}); n != 0 {
		t.Errorf("MatchOut: %v allocations, want 0", n)
	}
	if len(dst) != 7 {
		t.Errorf("MatchOut into dst: %d mappings, want 7", len(dst))
	}
}

// TestValidateNamesKeys: each mistake is refused under the key that holds
// it.
func TestValidateNamesKeys(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(c *Config)
		want string
	}{
		{"no out name", func(c *Config) { c.Out[0].Name = "" }, "bridges.kafka.out[0].name: required"},
		{"no in name", func(c *Config) { c.In[0].Name = "" }, "bridges.kafka.in[0].name: required"},
		{"name for a label", func(c *Config) { c.Out[0].Name = "tele metry" }, `bridges.kafka.out[0].name: "tele metry": ' ' is not allowed`},
		{"name with a slash", func(c *Config) { c.In[0].Name = "a/b" }, `bridges.kafka.in[0].name: "a/b": '/' is not allowed`},
		{"long name", func(c *Config) { c.In[0].Name = strings.Repeat("n", 65) }, "bridges.kafka.in[0].name: " + `"` + strings.Repeat("n", 65) + `": longer than 64`},
		{"out names repeat", func(c *Config) { c.Out = append(c.Out, c.Out[0]) }, `bridges.kafka.out[1].name: "telemetry" is out[0]'s already`},
		{"in names repeat", func(c *Config) {
			c.In = append(c.In, c.In[0])
			c.In[1].KafkaTopic = "other"
		}, `bridges.kafka.in[1].name: "commands" is in[0]'s already`},
		{"bad filter", func(c *Config) { c.Out[0].MQTTFilter = "plant/+x" }, `bridges.kafka.out[0].mqtt_filter: "plant/+x": topic filter: '+' must occupy an entire level`},
		{"empty filter", func(c *Config) { c.Out[0].MQTTFilter = "" }, `bridges.kafka.out[0].mqtt_filter: "": topic filter: empty`},
		{"shared filter", func(c *Config) { c.Out[0].MQTTFilter = "$share/g/plant/#" }, `bridges.kafka.out[0].mqtt_filter: "$share/g/plant/#": a shared subscription`},
		{"unknown out placeholder", func(c *Config) { c.Out[0].KafkaTopic = "iot.{key}" }, `bridges.kafka.out[0].kafka_topic: "iot.{key}" at offset 4: unknown placeholder {key}`},
		{"unknown key placeholder", func(c *Config) { c.Out[0].Key = "{topic}/{clientid}" }, `bridges.kafka.out[0].key: "{topic}/{clientid}" at offset 8: unknown placeholder {clientid}`},
		{"unbalanced", func(c *Config) { c.Out[0].Key = "{topic" }, `bridges.kafka.out[0].key: "{topic" at offset 0: "{" without "}"`},
		{"no kafka topic", func(c *Config) { c.Out[0].KafkaTopic = "" }, "bridges.kafka.out[0].kafka_topic: must not be empty"},
		{"kafka topic with slash", func(c *Config) { c.Out[0].KafkaTopic = "iot.{topic}" }, "bridges.kafka.out[0].kafka_topic: \"iot.{topic}\": {topic} at offset 4 always renders '/'"},
		{"level always empty", func(c *Config) { c.Out[0].Key = "{topic[3]}" }, "bridges.kafka.out[0].key: \"{topic[3]}\": {topic[3]} is always empty"},
		{"shoal topic", func(c *Config) { c.Out[0].KafkaTopic = "shoal.messages" }, `bridges.kafka.out[0].kafka_topic: "shoal.messages" renders "shoal.messages": kafka topic: "shoal.messages" starts with "shoal."`},
		{"unknown in placeholder", func(c *Config) { c.In[0].MQTTTopic = "plant/{topic}" }, `bridges.kafka.in[0].mqtt_topic: "plant/{topic}" at offset 6: unknown placeholder {topic}`},
		{"in topic only placeholders", func(c *Config) { c.In[0].MQTTTopic = "{key}" }, `bridges.kafka.in[0].mqtt_topic: "{key}" can render an empty topic`},
		{"in topic empty", func(c *Config) { c.In[0].MQTTTopic = "" }, `bridges.kafka.in[0].mqtt_topic: must not be empty`},
		{"in topic wildcard", func(c *Config) { c.In[0].MQTTTopic = "plant/+/{key}" }, `bridges.kafka.in[0].mqtt_topic: "plant/+/{key}": its text at offset 6: topic name: contains wildcard`},
		{"in topic $SYS", func(c *Config) { c.In[0].MQTTTopic = "$SYS/{key}" }, `bridges.kafka.in[0].mqtt_topic: "$SYS/{key}": topic name: starts with '$'`},
		{"qos", func(c *Config) { c.In[0].QoS = 3 }, "bridges.kafka.in[0].qos: must be 0, 1 or 2; is 3"},
		{"negative qos", func(c *Config) { c.In[0].QoS = -1 }, "bridges.kafka.in[0].qos: must be 0, 1 or 2; is -1"},
		{"in kafka topic", func(c *Config) { c.In[0].KafkaTopic = "iot commands" }, `bridges.kafka.in[0].kafka_topic: "iot commands": kafka topic: ' ' at offset 3 is not allowed`},
		{"in kafka topic empty", func(c *Config) { c.In[0].KafkaTopic = "" }, `bridges.kafka.in[0].kafka_topic: "": kafka topic: empty`},
		{"in reads shoal's", func(c *Config) { c.In[0].KafkaTopic = "shoal.messages" }, `bridges.kafka.in[0].kafka_topic: "shoal.messages": kafka topic: "shoal.messages" starts with "shoal."`},
		{"two in on one topic", func(c *Config) {
			c.In = append(c.In, c.In[0])
			c.In[1].Name = "again"
		}, `bridges.kafka.in[1].kafka_topic: "iot.commands" is in[0]'s already: one in mapping per Kafka topic`},
		{"loop, literal", func(c *Config) { c.In[0].KafkaTopic = "iot.telemetry" }, `bridges.kafka.in[0].kafka_topic: "iot.telemetry" may be written by out[0] (kafka_topic "iot.telemetry")`},
		{"loop, template", func(c *Config) {
			c.Out[0].MQTTFilter = "#"
			c.Out[0].KafkaTopic = "iot.{topic[0]}"
		}, `bridges.kafka.in[0].kafka_topic: "iot.commands" may be written by out[0] (kafka_topic "iot.{topic[0]}")`},
		{"loop, other tenant", func(c *Config) {
			c.Out[0].Tenant = "beta"
			c.In[0].KafkaTopic = "iot.telemetry"
		}, `bridges.kafka.in[0].kafka_topic: "iot.telemetry" may be written by out[0]`},
		{"dead letter name", func(c *Config) { c.In[0].DeadLetterTopic = "dead letters" }, `bridges.kafka.in[0].dead_letter_topic: "dead letters": kafka topic: ' ' at offset 4`},
		{"dead letter read back", func(c *Config) { c.In[0].DeadLetterTopic = "iot.commands" }, `bridges.kafka.in[0].dead_letter_topic: "iot.commands" is read by in[0]`},
		{"empty broker", func(c *Config) { c.Brokers = []string{"k1:9092", ""} }, "bridges.kafka.brokers[1]: must not be empty"},
	} {
		cfg := sample()
		c.edit(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v\nwant %q", c.name, err, c.want)
		}
		if m, cerr := cfg.Compile(); m != nil || cerr == nil {
			t.Errorf("%s: Compile returned mappings", c.name)
		}
	}

	// What the checks allow.
	for _, c := range []struct {
		name string
		edit func(c *Config)
	}{
		{"default tenant, no key", func(c *Config) { c.Out[0].Tenant, c.Out[0].Key, c.In[0].Tenant = "", "", "" }},
		{"same name both ways", func(c *Config) { c.In[0].Name = "telemetry" }},
		{"not a loop", func(c *Config) {
			c.Out[0].MQTTFilter = "plant/#"
			c.Out[0].KafkaTopic = "iot.{topic[0]}"
		}},
		{"dead letter", func(c *Config) { c.In[0].DeadLetterTopic = "iot.commands.dead" }},
		{"brokers", func(c *Config) { c.Brokers = []string{"k1:9092"} }},
		{"header topic", func(c *Config) { c.In[0].MQTTTopic = "from-kafka/{header.mqtt.topic}" }},
		{"qos 0 and 2", func(c *Config) {
			c.In = append(c.In, c.In[0])
			c.In[1].Name, c.In[1].KafkaTopic, c.In[0].QoS, c.In[1].QoS = "two", "iot.two", 0, 2
		}},
	} {
		cfg := sample()
		c.edit(&cfg)
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// TestValidateReportsAll: one Validate names every bad key.
func TestValidateReportsAll(t *testing.T) {
	cfg := Config{
		Out: []OutMapping{{MQTTFilter: "a/#/b", KafkaTopic: "{x}"}},
		In:  []InMapping{{Name: "i", KafkaTopic: "t", MQTTTopic: "{key}", QoS: 9}},
	}
	err := cfg.Validate()
	for _, key := range []string{"out[0].name", "out[0].mqtt_filter", "out[0].kafka_topic", "in[0].mqtt_topic", "in[0].qos"} {
		if err == nil || !strings.Contains(err.Error(), "bridges.kafka."+key+": ") {
			t.Errorf("%v\ndoes not name %s", err, key)
		}
	}
}
