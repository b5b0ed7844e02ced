// Package qos2resend drives the QoS 2 resend scenario against a running
// Shoal, with real client libraries: a persistent publisher sends QoS 2
// messages, loses its connection before it reads the PUBRECs, reconnects,
// resumes its session and sends them again with DUP, as MQTT requires
// (MQTT-4.4.0-1). Its subscribers must get each message exactly once.
//
// The publisher reaches the broker through a [Proxy] that can drop what
// the broker sends (so PUBRECs are never read), cut every connection,
// refuse new ones while the broker is restarted, and point at another
// address (another gateway, or the restarted broker's new port).
//
// Used by the end-to-end tests of shoal all (cmd/shoal, with and without a
// kill -9 between the drop and the resend) and by the distributed cluster
// test (integration/, the resend reaching another gateway). Loopback only.
package qos2resend
