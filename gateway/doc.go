// Package gateway is Shoal's MQTT front end: the listeners (TCP and
// WebSocket; TLS and PROXY protocol v2 are not built yet), the
// per-connection read loop (idle TCP connections park in an epoll poller,
// park.go), the writer pool that writes out buffers without blocking
// (writer.go), keepalive, inflight windows and topic aliases. A gateway keeps no durable
// state: it publishes every session, subscription and message event to the
// log (package kafka) and writes to its clients the deliveries that arrive on
// its own slot of the deliveries topic.
//
// Shutdown (Run's context ends): the listeners close, every connection gets
// a DISCONNECT (Server shutting down, MQTT 5; after its CONNACK if that was
// not queued yet) and its end is reported to the log (its Disconnect record,
// its unacknowledged messages) before Run returns, each bounded by
// gateway.session_timeout; a connection accepted meanwhile is refused or shut
// down at once.
//
// Every close the gateway makes with a reason code (DISCONNECT or a refusing
// CONNACK) half-closes the socket after the packet and discards what the
// client still sends, until it closes its side or for at most 2 s, before
// closing: a socket closed with unread input resets the connection, and the
// client may never read the reason (conn.closeWrite, ARCHITECTURE.md).
//
// What the gateway reads first takes effect first: a PUBLISH waits, before
// it is written, for the SUBSCRIBEs and UNSUBSCRIBEs read before it on any
// connection (order.go). A persistent session's QoS 2 PUBLISH carries its
// packet identifier for the router, which drops a resend after a reconnect;
// PUBCOMP follows the durable PublishRelease (inbound.go, ARCHITECTURE.md
// "Exactly once for QoS 2").
//
// The gateway meets the router and session services only through the log; it
// never imports them. It builds on the codec in internal/mqtt/packet.
package gateway
