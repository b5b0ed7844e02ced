// Package listener is the gateway's listener layer: each listener binds an
// address, accepts client connections and hands each one over as a Conn,
// the MQTT byte stream together with what the listener knows of it (its
// transport, the client's address, the TLS state, the socket itself when
// the stream is the socket's own bytes). The gateway's connection code
// reads and writes the stream and asks the Conn for what it needs; it
// never asks which listener a connection came through.
//
// Listeners today: TCP (ListenTCP) and WebSocket at /mqtt with subprotocol
// "mqtt" (ListenWebSocket). The next ones plug in here, each as a
// Listener of its own or an option of one of these, without a change to
// the connection code:
//   - TLS: wrap each accepted socket in tls.Server, complete the handshake
//     (bounded by a deadline) before handing it over, and set Conn.TLS; Raw
//     stays nil, since the socket's bytes are ciphertext.
//   - WebSocket over TLS: the WebSocket listener's http.Server serves TLS
//     (ServeTLS); the upgraded request's r.TLS becomes Conn.TLS.
//   - PROXY protocol v2: read the header before handing the connection over,
//     exactly its announced length so nothing of the MQTT stream is
//     buffered above the socket, and set Conn.ClientAddr to its source
//     address; Raw stays the socket, so parking and non-blocking writes
//     keep working behind a load balancer.
//
// It is a package of its own, not files of package gateway, so that the
// boundary is the compiler's: a listener cannot reach into a connection's
// state, and the connection code sees only Conn and Listener.
package listener
