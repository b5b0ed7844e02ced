// Package gateway is Shoal's MQTT front end: the connections that its
// listeners accept (package gateway/listener: TCP, WebSocket, TLS and
// PROXY protocol v2), the per-connection read loop (idle
// TCP connections park in an epoll poller, park.go), the writer pool that
// writes out buffers without blocking (writer.go), keepalive, inflight
// windows and topic aliases. A gateway keeps no durable state: it
// publishes every session, subscription and message event to the log
// (package kafka) and writes to its clients the deliveries that arrive on
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
// client may never read the reason (conn.closeWrite; docs/gateway.md,
// "Server-initiated close").
//
// What the gateway reads first takes effect first: a PUBLISH waits, before
// it is written, for the SUBSCRIBEs and UNSUBSCRIBEs read before it on any
// connection (order.go). A persistent session's QoS 2 PUBLISH carries its
// packet identifier for the router, which drops a resend after a reconnect;
// PUBCOMP follows the durable PublishRelease (inbound.go; docs/gateway.md,
// "Exactly once for QoS 2"). In shoal all a PUBLISH also waits while the
// router of the process is kafka.FeedMaxBacklog records behind on its
// partition (waitRoom, inbound.go): the client is not read meanwhile, so
// TCP holds a client publishing faster than the router routes to its pace.
//
// The gateway meets the router and session services only through the log; it
// never imports them. It builds on the codec in internal/mqtt/packet.
//
// Files, in the order a connection meets them:
//
//   - gateway.go: Gateway, New, Run and its steps (slot, heartbeats,
//     listeners, shutdown), the counters.
//   - slot.go: leasing the gateway's slot of shoal.deliveries.
//   - listeners.go: which listeners the configuration opens; each accepted
//     connection goes to serve. The listeners themselves are package
//     gateway/listener, a layer of its own (a package, so that the compiler
//     keeps the boundary): the connection code gets a listener.Conn and
//     never learns which listener it came from.
//   - conn.go: conn, its state (flow, pending acknowledgements, messages
//     in flight) and serve, a connection's life from accept to end.
//   - authn.go: the handshake's authentication step (Auth, the
//     Authenticator the password file of gateway/auth implements) and the
//     tenant bound to the identity
//   - connect.go: CONNECT: the handshake, asking the session service
//     (askSession) and abandoning a connect it gave up on. In shoal all
//     every record for shoal.sessions goes through the process's producer
//     that does not linger (WithSessionLog), and the session service gives
//     the answer before producing it (Answer, handoff.go).
//   - read.go: the read loop, keep alive and the dispatch of client packets.
//   - inbound.go: client → log: PUBLISH, PUBREL, SUBSCRIBE, UNSUBSCRIBE and
//     the acknowledgements that wait for the log; order.go: what is read
//     first takes effect first.
//   - deliveries.go: the slot consumer: the records of the gateway's slot
//     (deliveries, answers to Connect, kicks, run markers); decode.go decodes
//     them into reused structs; handoff.go: in shoal all, the router's
//     delivery records handed over before they are produced, delivered at
//     once and skipped when the slot consumer reads them; and the Express
//     interface, through which a QoS 0 publish is routed before it is
//     produced.
//   - outbound.go: log → client: a delivery into a connection's out buffer,
//     inflight windows, topic aliases; outbuf.go: the out buffer.
//   - writer.go: the writer pool and the flushes; writenb_linux.go: writes
//     that never block.
//   - park.go: parking idle connections (the epoll poller in park_linux.go,
//     none elsewhere: park_other.go).
//   - quota.go: the tenants' quotas (package gateway/quota): connections
//     and new connections per second at CONNECT, the message and byte
//     rates in the read loop (flow control: the reader waits), the
//     subscriptions of a client at SUBSCRIBE. quotashare.go: in a
//     distributed deployment, the counts shared with the other gateways
//     through shoal.quotas (quota.Shared): the reports written and read.
//   - close.go: how a connection ends: server-initiated closes, the end
//     reported to the log; routerparts.go: the partitions of
//     shoal.messages where the connection left state for the routers,
//     which its Disconnect names (router_partitions).
//   - connlog.go: the connection's log lines and their keys; every close
//     the gateway makes logged once with its reason code and cause,
//     rate-limited per client (docs/telemetry.md, "Logs").
//   - kafkawatch.go: a gateway cut off from Kafka (no broker answered for
//     gateway.kafka_timeout) reports not ready, moves its clients to other
//     gateways (DISCONNECT 0x9C) and refuses new ones (0x88) until a
//     broker answers (docs/gateway.md, "Cut off from Kafka").
//   - clock.go: a clock off by a second or more is corrected by the CQL
//     database's, measured at every lease renewal (docs/gateway.md,
//     "Clock").
//   - sys.go: $SYS topics; config.go: Config.
package gateway
