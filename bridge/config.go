package bridge

import (
	"errors"
	"fmt"
	"slices"

	"github.com/shoal-mqtt/shoal/internal/mqtt/topic"
)

// Config is the bridges.kafka section: the mappings between MQTT topics
// and Kafka topics, in both directions. The security of Brokers
// (bridges.kafka.sasl, bridges.kafka.tls) is the composition's, of the
// same types as kafka.*'s.
//
//	bridges:
//	  kafka:
//	    out:
//	      - name: telemetry
//	        tenant: acme
//	        mqtt_filter: "plant/+/telemetry"
//	        kafka_topic: "iot.telemetry"
//	        key: "{topic}"
//	    in:
//	      - name: commands
//	        tenant: acme
//	        kafka_topic: "iot.commands"
//	        mqtt_topic: "plant/{key}/command"
//	        qos: 1
type Config struct {
	// Brokers of the cluster the mappings write to and read from; empty
	// (the default) is Shoal's own Kafka, kafka.*.
	Brokers []string `yaml:"brokers"`
	// Out are the mappings from MQTT to Kafka.
	Out []OutMapping `yaml:"out"`
	// In are the mappings from Kafka to MQTT.
	In []InMapping `yaml:"in"`
	// InstanceID names this bridge among the deployment's (Options):
	// stable across its restarts. Empty: "0" in shoal all, the host name
	// for shoal bridge (the pod's name in Kubernetes).
	InstanceID string `yaml:"instance_id"`
}

// OutMapping bridges the messages of one tenant whose topic matches
// MQTTFilter to records of KafkaTopic. Retained messages and wills are
// messages too.
type OutMapping struct {
	// Name identifies the mapping in metrics and logs: 1 to 64 characters
	// of a-z A-Z 0-9 . _ -, unique among the out mappings.
	Name string `yaml:"name"`
	// Tenant is the tenant whose messages it bridges; "" is the default
	// tenant.
	Tenant string `yaml:"tenant"`
	// MQTTFilter is any MQTT topic filter, with + and #; not a shared
	// subscription ($share/...).
	MQTTFilter string `yaml:"mqtt_filter"`
	// KafkaTopic is the template of the record's topic (OutTemplate:
	// {tenant}, {topic}, {topic[N]}, {client_id}); what it renders must
	// be a valid Kafka topic name, else the message is not bridged
	// (ValidKafkaTopic).
	KafkaTopic string `yaml:"kafka_topic"`
	// Key is the template of the record's key, of the same placeholders;
	// "" writes records without a key. "{topic}" keeps the order of each
	// MQTT topic's messages.
	Key string `yaml:"key"`
}

// InMapping publishes each record of KafkaTopic as an MQTT message of
// Tenant on the topic MQTTTopic renders.
type InMapping struct {
	// Name identifies the mapping in metrics, logs and its consumer
	// group, as OutMapping.Name; unique among the in mappings.
	Name string `yaml:"name"`
	// Tenant is the tenant the messages are published in; "" is the
	// default tenant.
	Tenant string `yaml:"tenant"`
	// KafkaTopic is the topic whose records it publishes; one in mapping
	// at most per topic, and none that an out mapping could write.
	KafkaTopic string `yaml:"kafka_topic"`
	// MQTTTopic is the template of the message's topic (InTemplate:
	// {key}, {header.NAME}). It must have text besides its placeholders,
	// without + or #, and must not start with $.
	MQTTTopic string `yaml:"mqtt_topic"`
	// QoS of the messages it publishes, 0 (the default) to 2; the
	// record's mqtt.qos header is not read.
	QoS int `yaml:"qos"`
	// DeadLetterTopic is where a record goes whose rendered topic is not
	// a valid topic name (ValidTopic), as it came; "" (the default)
	// counts, logs and skips it.
	DeadLetterTopic string `yaml:"dead_letter_topic"`
}

// Out is an out mapping compiled.
type Out struct {
	Name       string
	Tenant     string
	Filter     string
	KafkaTopic OutTemplate
	// Key is the zero template for records without a key.
	Key OutTemplate
}

// In is an in mapping compiled.
type In struct {
	Name            string
	Tenant          string
	KafkaTopic      string
	MQTTTopic       InTemplate
	QoS             byte
	DeadLetterTopic string
}

// Mappings is a configuration compiled (Config.Compile): every mapping
// with its templates, and the out mappings indexed by tenant and filter.
// It does not change once compiled and is safe for concurrent use.
type Mappings struct {
	Out []Out
	In  []In
	// out holds each tenant's out mappings, by filter, each under its
	// index in Out.
	out map[string]*topic.Trie[int, *Out]
	// in is the index in In of the mapping of each Kafka topic.
	in map[string]int
}

// maxName bounds a mapping's name, which goes into consumer group ids and
// metric labels.
const maxName = 64

// Validate reports every invalid setting of the section, each naming its
// key: bridges.kafka.out[0].mqtt_filter.
func (c Config) Validate() error {
	_, err := c.Compile()
	return err
}

// Compile validates the configuration and compiles its mappings. The error
// names every bad key (Validate).
func (c Config) Compile() (*Mappings, error) {
	var errs []error
	bad := func(key string, err error) { errs = append(errs, fmt.Errorf("bridges.kafka.%s: %w", key, err)) }
	for i, b := range c.Brokers {
		if b == "" {
			bad(fmt.Sprintf("brokers[%d]", i), errors.New("must not be empty"))
		}
	}
	m := &Mappings{Out: make([]Out, 0, len(c.Out)), In: make([]In, 0, len(c.In)), out: map[string]*topic.Trie[int, *Out]{}, in: map[string]int{}}

	outNames := map[string]int{}
	patterns := make([][]seg, len(c.Out)) // what each out mapping's kafka_topic can render
	for i, o := range c.Out {
		key := func(k string) string { return fmt.Sprintf("out[%d].%s", i, k) }
		if err := checkName(o.Name, outNames, "out", i); err != nil {
			bad(key("name"), err)
		}
		filterOK := true
		if _, _, shared, err := topic.ParseShared(o.MQTTFilter); shared {
			bad(key("mqtt_filter"), fmt.Errorf("%q: a shared subscription; give the filter alone", o.MQTTFilter))
			filterOK = false
		} else if err != nil {
			bad(key("mqtt_filter"), fmt.Errorf("%q: %w", o.MQTTFilter, err))
			filterOK = false
		}
		kt, err := CompileOut(o.KafkaTopic)
		if err != nil {
			bad(key("kafka_topic"), err)
		} else if filterOK {
			if patterns[i], err = kt.pattern(o.Tenant, o.MQTTFilter); err == nil {
				err = checkKafkaTopic(kt, patterns[i])
			}
			if err != nil {
				bad(key("kafka_topic"), err)
			}
		}
		k, err := CompileOut(o.Key)
		if err == nil && filterOK {
			err = k.checkLevels(o.MQTTFilter)
		}
		if err != nil {
			bad(key("key"), err)
		}
		m.Out = append(m.Out, Out{Name: o.Name, Tenant: o.Tenant, Filter: o.MQTTFilter, KafkaTopic: kt, Key: k})
	}

	inNames := map[string]int{}
	for i, in := range c.In {
		key := func(k string) string { return fmt.Sprintf("in[%d].%s", i, k) }
		if err := checkName(in.Name, inNames, "in", i); err != nil {
			bad(key("name"), err)
		}
		if err := ValidKafkaTopic(in.KafkaTopic); err != nil {
			bad(key("kafka_topic"), fmt.Errorf("%q: %w", in.KafkaTopic, err))
		} else if j, dup := m.in[in.KafkaTopic]; dup {
			bad(key("kafka_topic"), fmt.Errorf("%q is in[%d]'s already: one in mapping per Kafka topic", in.KafkaTopic, j))
		} else {
			m.in[in.KafkaTopic] = i
			for j, p := range patterns {
				if p != nil && mayRender(p, in.KafkaTopic) {
					bad(key("kafka_topic"), fmt.Errorf("%q may be written by out[%d] (kafka_topic %q): a Kafka topic is written by out mappings or read by an in mapping, not both, so that no message goes round", in.KafkaTopic, j, c.Out[j].KafkaTopic))
				}
			}
		}
		t, err := CompileIn(in.MQTTTopic)
		if err == nil {
			err = t.checkTopic()
		}
		if err != nil {
			bad(key("mqtt_topic"), err)
		}
		if in.QoS < 0 || in.QoS > 2 {
			bad(key("qos"), fmt.Errorf("must be 0, 1 or 2; is %d", in.QoS))
		}
		if in.DeadLetterTopic != "" {
			if err := ValidKafkaTopic(in.DeadLetterTopic); err != nil {
				bad(key("dead_letter_topic"), fmt.Errorf("%q: %w", in.DeadLetterTopic, err))
			}
		}
		m.In = append(m.In, In{Name: in.Name, Tenant: in.Tenant, KafkaTopic: in.KafkaTopic, MQTTTopic: t, QoS: byte(in.QoS), DeadLetterTopic: in.DeadLetterTopic})
	}
	// A dead-letter topic that an in mapping reads would bring its
	// records back to the mapping that could not publish them.
	for i, in := range c.In {
		if j, ok := m.in[in.DeadLetterTopic]; ok && in.DeadLetterTopic != "" {
			bad(fmt.Sprintf("in[%d].dead_letter_topic", i), fmt.Errorf("%q is read by in[%d]: a dead letter would be read again", in.DeadLetterTopic, j))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	for i := range m.Out {
		o := &m.Out[i]
		t := m.out[o.Tenant]
		if t == nil {
			t = topic.New[int, *Out]()
			m.out[o.Tenant] = t
		}
		t.Subscribe(o.Filter, i, o)
	}
	return m, nil
}

// checkName checks a mapping's name and records it in seen, by index.
func checkName(name string, seen map[string]int, dir string, i int) error {
	if name == "" {
		return errors.New("required")
	}
	if len(name) > maxName {
		return fmt.Errorf("%q: longer than %d characters", name, maxName)
	}
	for j := 0; j < len(name); j++ {
		if !kafkaTopicChar(name[j]) {
			return fmt.Errorf("%q: %q is not allowed (only a-z A-Z 0-9 . _ -: it names the mapping in metrics and consumer groups)", name, name[j])
		}
	}
	if j, dup := seen[name]; dup {
		return fmt.Errorf("%q is %s[%d]'s already", name, dir, j)
	}
	seen[name] = i
	return nil
}

// matchScratch is how many matches MatchOut finds without allocating.
const matchScratch = 8

// MatchOut appends to dst the out mappings of tenant whose filter matches
// the topic name, in the order of the configuration. It allocates only
// when dst must grow or more than a few mappings match.
func (m *Mappings) MatchOut(tenant, name string, dst []*Out) []*Out {
	t := m.out[tenant]
	if t == nil {
		return dst
	}
	var scratch [matchScratch]topic.Entry[int, *Out]
	es := t.Match(name, scratch[:0])
	if len(es) > 1 {
		slices.SortFunc(es, func(a, b topic.Entry[int, *Out]) int { return a.Key - b.Key })
	}
	for _, e := range es {
		dst = append(dst, e.Val)
	}
	return dst
}

// InFor returns the in mapping of a Kafka topic, nil when it has none.
func (m *Mappings) InFor(kafkaTopic string) *In {
	if i, ok := m.in[kafkaTopic]; ok {
		return &m.In[i]
	}
	return nil
}

// inByName returns the in mapping named name, nil when there is none.
func (m *Mappings) inByName(name string) *In {
	for i := range m.In {
		if m.In[i].Name == name {
			return &m.In[i]
		}
	}
	return nil
}
