// Package broker assembles `shoal all`: the embedded backbone (an
// in-process Kafka and a Pebble view store) or an external Kafka, and the
// gateway, router and session roles over it, with the HTTP endpoints
// /metrics, /healthz and /readyz (and, with pprof on, Go's profiles and
// the runtime's memory classes under /debug/). It wires; the roles
// implement.
//
// Files: broker.go (roles, readiness, Run, Reload on SIGHUP), backbone.go
// (the Kafka clients, topics and view store the roles stand on, and the
// gateway's authentication sources and ACL: password file, JWT keys,
// client certificates), actors.go (each role an actor of an oklog/run
// group with its interrupt; the watches of the auth files), quota.go (the
// tenants' quotas given to the gateway and the router, counted alone in
// `shoal all` and with the other gateways otherwise, and their metrics),
// http.go, memory.go, local.go (the local path as one value). In `shoal
// all` with kafka.local_delivery (the default) the clients share the
// embedded backbone's feed and the router hands its deliveries to the
// gateway (routersvc.WithHandoff), and the gateway gives the router its
// QoS 0 publishes before it produces them (routersvc.WithExpress,
// gateway.WithExpress). The session service gives its answers to the
// gateway once they may be given (sessionsvc.WithAnswers), and the
// gateway writes shoal.sessions through the producer that does not linger
// (gateway.WithSessionLog). docs/local-path.md has the whole path.
// brokertest starts `shoal all` inside a test (SHOAL_KAFKA_LOCAL_DELIVERY
// chooses the path).
//
// Start-up order: backbone, topics, view store, router and session service,
// then the gateway (which opens its listeners only once it consumes its
// slot). Shutdown is the reverse, in two phases: the gateway stops first and
// reports every connection's end to the log while the other roles still
// run, then the producer is flushed, the rest stop and the backbone closes.
package broker
