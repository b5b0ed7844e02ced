package pahoconn

import (
	"net"
	"sync"
)

// Locked returns nc as a sync.Locker, for paho.ClientConfig.Conn. Paho
// writes a packet as its fixed header and its parts (net.Buffers), one
// Write each on a connection that cannot write them in one call (TLS,
// WebSocket; a TCP socket uses writev), and from more than one goroutine:
// its pinger sends a PINGREQ the moment the client has connected, on a
// goroutine of its own. A PINGREQ written between a PUBLISH's header and
// its body makes a malformed packet, which a broker answers by closing
// the connection (0x81). Paho holds the lock of a connection that is a
// sync.Locker for the whole of each packet.
func Locked(nc net.Conn) net.Conn { return &locked{Conn: nc} }

type locked struct {
	net.Conn
	sync.Mutex
}
