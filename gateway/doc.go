// Package gateway is Shoal's MQTT front end: the listeners (TCP, TLS,
// WebSocket, PROXY protocol v2), the per-connection read and write loops,
// keepalive, inflight windows and topic aliases. A gateway keeps no durable
// state: it publishes every session, subscription and message event to the
// log (package kafka) and writes to its clients the deliveries that arrive on
// its own slot of the deliveries topic.
//
// The gateway meets the router and session services only through the log; it
// never imports them. It builds on the codec in internal/mqtt/packet.
package gateway
