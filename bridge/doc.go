// Package bridge is the Kafka data bridge role: it writes the MQTT messages
// of configured topics to Kafka topics as plain records, which any Kafka
// consumer can read without Shoal's schema, and publishes the records of
// configured Kafka topics as MQTT messages. Mappings are per tenant, in both
// directions (Config, the bridges.kafka section). docs/bridge.md is the
// design: how the out direction writes exactly once (Kafka transactions
// over shoal.messages, its QoS 2 state in StateTopic, state.go), how the
// in direction publishes, where the role runs.
//
// # Mappings
//
// An out mapping takes the messages of its tenant whose topic matches its
// mqtt_filter (Mappings.MatchOut, on the trie of package
// internal/mqtt/topic) and renders the record's topic and key from
// templates (OutTemplate); an in mapping reads one Kafka topic and renders
// each record's MQTT topic (InTemplate). Templates are compiled once and
// render by appending to a buffer, without allocating.
//
// Out templates take {tenant}, {topic} (the topic as its client published
// it, without the tenant), {topic[N]} (level N, counted from 0; a level the
// topic does not have renders as empty) and {client_id}; in templates take
// {key} and {header.NAME} (the record's first header NAME, or empty).
// Anything else between braces, or an unbalanced brace, is an error that
// names the placeholder and its offset.
//
// What a template renders is checked twice. At configuration time
// (Config.Validate) with what is known then: an out mapping's tenant, and
// the levels of its filter that are text, so that a kafka_topic that cannot
// render a valid Kafka topic name, or a {topic[N]} that is always empty, is
// refused; an mqtt_topic must have text besides its placeholders, without +
// or #, not starting with $. Then each rendered name, whose placeholders
// hold what a client or a producer sent: ValidKafkaTopic and ValidTopic.
// No mapping writes or reads Kafka's internal topics ("__…") or Shoal's own
// ("shoal.…").
//
// # No loops
//
// A Kafka topic is either written by out mappings or read by one in mapping,
// never both: Validate refuses an in mapping's kafka_topic that an out
// mapping's template may render, and a dead_letter_topic that an in mapping
// reads.
//
// # Record format
//
// A bridged-out record's value is the MQTT payload byte for byte; its
// headers (AppendHeaders) are mqtt.topic, mqtt.qos, mqtt.retain,
// mqtt.client_id, shoal.tenant, shoal.message_id, the MQTT 5.0 properties
// the message has (mqtt.content_type, mqtt.payload_format,
// mqtt.response_topic, mqtt.correlation_data, mqtt.message_expiry: the
// seconds left when the record was written), every user property as a
// header of its own name, and traceparent. Names that start with "mqtt."
// or "shoal.", and traceparent, are reserved (Reserved): a user property
// of such a name is not written. A bridged-in record's headers of the same
// names become the message's properties again (ReadHeaders), every header
// that is not reserved a user property; mqtt.retain true makes it retained,
// and mqtt.qos is not read: the mapping's qos is the message's.
package bridge
