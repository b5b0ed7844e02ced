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
// The next one plugs in here without a change to the connection code:
//   - PROXY protocol v2: read the header before handing the connection over,
//     exactly its announced length so nothing of the MQTT stream is
//     buffered above the socket, and set Conn.ClientAddr to its source
//     address; Raw stays the socket, so parking and non-blocking writes
//     keep working behind a load balancer. In front of TLS (a load
//     balancer passing TLS through), the header comes first: read it, then
//     run the handshake on the same goroutine.
//
// It is a package of its own, not files of package gateway, so that the
// boundary is the compiler's: a listener cannot reach into a connection's
// state, and the connection code sees only Conn and Listener.
package listener
