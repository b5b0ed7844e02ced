// Package internal is Shoal's ground floor: what every role stands on and
// nothing outside the module may import. The MQTT codec
// (internal/mqtt/packet), topic names, filters and the subscription trie
// (internal/mqtt/topic), trace context in Kafka headers (tracectx), string
// interning (intern), the first n of a stream for a listing's page
// (firstn), real servers as local processes for tests and the
// distributed benchmark (localserver), and test helpers (testutil).
//
// Nothing here imports a role, kafka/ or the composition layer (compose/):
// imports only point down, cmd → compose → roles → kafka/ → internal/.
package internal
