// Package listener is the gateway's listener layer: each listener binds an
// address, accepts client connections and hands each one over as a Conn,
// the MQTT byte stream together with what the listener knows of it (its
// transport, the client's address, the TLS state, the socket itself when
// the stream is the socket's own bytes). The gateway's connection code
// reads and writes the stream and asks the Conn for what it needs; it
// never asks which listener a connection came through.
//
// Listeners: TCP (ListenTCP), TLS on TCP (ListenTLS), WebSocket at /mqtt
// with subprotocol "mqtt" (ListenWebSocket), and WebSocket over TLS (its
// options' TLS). A TLS listener hands a connection over once its
// handshake completes, with Conn.TLS set and Raw nil (the socket's bytes
// are ciphertext); the handshake runs on the connection's own goroutine,
// bounded by a deadline, never in the accept loop, so a slow client holds
// up no other. The WebSocket listeners accept an upgrade without Origin
// (not from a browser), from the request's own origin, or from an origin
// their AllowedOrigins match; any other gets 403.
//
// Certificates is the TLS listeners' material: the server's certificate
// and key, and the CAs of client certificates (mutual TLS). Each
// handshake takes the material current when it starts; Reload and Watch
// read the files again without a restart, keeping the old material when
// the new does not load. CertIdentity names the identity a verified client
// certificate proves: its common name or first subject alternative name of
// a kind.
//
// PROXY protocol (a load balancer in front, HAProxy's send-proxy-v2):
// a Proxy given to a listener (TCP.AcceptProxy, WebSocketOptions.Proxy)
// reads the header on the connection's own goroutine, bounded by
// Proxy.Timeout (the gateway's connect timeout), never in the accept
// loop; then the TLS handshake runs, on the same goroutine (a load
// balancer passing TLS through), and for ws and wss the HTTP request (a
// load balancer in TCP mode). Versions 1 and 2 are both accepted; the
// library go-proxyproto parses them. The rules, where "trusted" means the
// socket's peer is in Proxy.Trusted:
//   - off: no header is read; the socket's peer is the client.
//   - required: a connection from an untrusted peer is closed unread, and
//     one from a trusted peer without a header is closed: no connection
//     is served without a header from a trusted proxy.
//   - optional: a trusted peer's header is used if it sends one; a
//     connection without a header (from any peer) is served with the
//     socket's address.
//   - In either mode a header from an untrusted peer closes the
//     connection (logged at info), as does one that does not parse or
//     does not arrive in time: an untrusted peer never sets its own
//     address.
//   - A LOCAL header (the proxy's own health check), and a PROXY header
//     with no TCP source (UNKNOWN, UNSPEC, UDP, unix), keep the socket's
//     address; otherwise Conn.ClientAddr is the header's source address.
//
// Whether a header comes is told from the first byte, peeked (MSG_PEEK)
// without being taken: an MQTT stream starts with CONNECT, 0x10, a v1
// header with 'P', a v2 one with '\r'. The header is then read exactly
// to its end (v2: its announced length; v1: to its LF, a byte at a time),
// so nothing of the MQTT stream is buffered above the socket: Raw stays
// the socket, and parking and non-blocking writes keep working behind a
// load balancer. The wait for CONNECT starts after the header (and the
// TLS handshake), each bounded by the connect timeout.
//
// It is a package of its own, not files of package gateway, so that the
// boundary is the compiler's: a listener cannot reach into a connection's
// state, and the connection code sees only Conn and Listener.
package listener
