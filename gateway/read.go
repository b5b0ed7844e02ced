package gateway

import (
	"errors"
	"io"
	"net"
	"os"
	"time"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

// The reader: the loop that reads a connection's packets (readLoop), with
// its keep alive and park deadlines, and the dispatch of each packet to its
// handler (handle; PUBLISH, SUBSCRIBE and the rest in inbound.go).

// readBufferSize is the initial size of a connection's read buffer.
const readBufferSize = 512

// socket is what a connection's Reader reads from: the connection's
// socket, read without waiting while conn.nonblock is set (park.go).
type socket conn

func (s *socket) Read(p []byte) (int, error) {
	c := (*conn)(s)
	if c.nonblock {
		return c.readNow(p)
	}
	return c.nc.Read(p)
}

// readState is what the reader decodes packets into, reused from packet
// to packet (decoding into a used packet allocates nothing). Each is made
// by the first packet of its type; a parked connection drops them all, so
// a connection that only pings never has any.
type readState struct {
	pub   *packet.Publish
	sub   *packet.Subscribe
	unsub *packet.Unsubscribe
	ack   *packet.Ack
	disc  *packet.Disconnect
}

func (c *conn) decoders() *readState {
	if c.rs == nil {
		c.rs = new(readState)
	}
	return c.rs
}

func (r *readState) publish() *packet.Publish {
	if r.pub == nil {
		r.pub = new(packet.Publish)
	}
	return r.pub
}

func (r *readState) subscribe() *packet.Subscribe {
	if r.sub == nil {
		r.sub = new(packet.Subscribe)
	}
	return r.sub
}

func (r *readState) unsubscribe() *packet.Unsubscribe {
	if r.unsub == nil {
		r.unsub = new(packet.Unsubscribe)
	}
	return r.unsub
}

func (r *readState) acknowledgement() *packet.Ack {
	if r.ack == nil {
		r.ack = new(packet.Ack)
	}
	return r.ack
}

func (r *readState) disconnect() *packet.Disconnect {
	if r.disc == nil {
		r.disc = new(packet.Disconnect)
	}
	return r.disc
}

// readLoop handles packets until the connection ends, and returns how it
// ended; or until the connection has been idle for Config.ParkIdle and
// parks (parked true: another goroutine owns the reader now). A fresh
// connection (the reader of its handshake) that says nothing after its
// CONNACK parks after the shorter parkQuiet instead; its first packet
// makes it wait ParkIdle like any reader.
//
// The keep alive deadline runs from the end of the last packet handled
// (lastPacket); a parked connection's is kept by the poller.
func (c *conn) readLoop(fresh bool) (e ending, parked bool) {
	g := c.g
	parkAfter := g.cfg.ParkIdle
	if !c.parkable() {
		parkAfter, fresh = 0, false
	}
	if fresh {
		parkAfter = g.parkQuiet()
	}
	// A TCP socket's read deadline is set once, not moved with every
	// packet (a system call's worth of timer work each): when it passes,
	// the deadline is worked out again from the last packet's time, and a
	// connection that was not idle after all gets the new one. Other
	// connections (WebSocket) move it with every packet: a WebSocket
	// connection closes when a deadline passes under a read.
	armed := false
	for {
		if !armed || c.tcp == nil {
			deadline, _ := c.readDeadline(parkAfter)
			_ = c.nc.SetReadDeadline(deadline)
			armed = true
		}
		// A close another goroutine began (closeWrite) is looked for after
		// the deadline is set, which may have replaced the past one that
		// goroutine set to wake this reader (wakeReader).
		if c.closing.Load() {
			return c.closedByServer(), false
		}
		c.woke = c.rd.Buffered() == 0
		if c.q != nil && c.throttle() {
			armed = false // waited for the tenant's rates (quota.go): the keep alive counts from now
			continue
		}
		h, body, err := c.rd.ReadPacket()
		if err != nil {
			if c.closing.Load() {
				return c.closedByServer(), false
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				deadline, toPark := c.readDeadline(parkAfter)
				now := g.clock()
				if now.Before(deadline) {
					armed = false // packets came since it was set
					continue
				}
				if toPark && (c.keepAlive == 0 || now.UnixNano() < c.keepAliveDeadline()) {
					if c.park() {
						return ending{}, true
					}
					armed = false
					continue
				}
			}
			return c.readEnding(err), false
		}
		if e, done := c.process(h, body); done {
			return e, false
		}
		if fresh {
			// The armed deadline may be the quiet one: when it passes, the
			// next is worked out with ParkIdle.
			parkAfter, fresh = g.cfg.ParkIdle, false
		}
		if c.rd.Buffered() == 0 {
			c.rd.Shrink()
		}
	}
}

// connectParkIdle is how long a connection that has sent nothing since
// its CONNECT keeps its reader goroutine (Config.parkQuiet's default).
//
// Why shorter than ParkIdle: a Go runtime never frees a goroutine's
// descriptor (about 450 bytes; its stack goes back to the heap), so a
// process keeps one for every goroutine it ever ran at once. In a wave of
// connects (a fleet reconnecting) every reader of a new connection lived
// for ParkIdle after its handshake: at 8,000 connects/s that was 8,000
// readers at once, 3.8 MB of descriptors kept for good (380 bytes per
// idle connection), and their stacks while the wave lasted (a fresh
// broker's RSS peaked at 174 MiB in a wave of 10,000; 86 MiB now). Parked
// after 100 ms of silence instead, a wave holds a tenth of them. A client that
// speaks after that (a SUBSCRIBE across a slow link) is woken by the
// poller and gets a reader of its own again (resume): one park and wake
// more in its life.
const connectParkIdle = 100 * time.Millisecond

// parkQuiet is how long a fresh connection that says nothing waits before
// it parks: Config.parkQuiet, else connectParkIdle, at most ParkIdle.
func (g *Gateway) parkQuiet() time.Duration {
	d := g.cfg.parkQuiet
	if d <= 0 {
		d = connectParkIdle
	}
	return min(d, g.cfg.ParkIdle)
}

// readDeadline is when the reader must next look at the connection, counted
// from the last packet: the keep alive deadline, or the park time
// (parkAfter without a packet) when that comes first (toPark). Zero means
// never.
func (c *conn) readDeadline(parkAfter time.Duration) (deadline time.Time, toPark bool) {
	if c.keepAlive > 0 {
		deadline = time.Unix(0, c.keepAliveDeadline())
	}
	if parkAfter > 0 {
		if at := time.Unix(0, c.lastPacket+int64(parkAfter)); deadline.IsZero() || at.Before(deadline) {
			deadline, toPark = at, true
		}
	}
	return deadline, toPark
}

// process handles one packet from the client; done reports that the
// connection ends, and how.
func (c *conn) process(h packet.FixedHeader, body []byte) (e ending, done bool) {
	c.add(BytesReceived, int64(len(body)+2))
	c.readQuota()
	if h.Type == packet.DISCONNECT {
		return c.handleDisconnect(h, body), true
	}
	if err := c.handle(h, body); err != nil {
		// The DISCONNECT goes out with the connection's end (closeWrite),
		// not here: this may be a poller's worker, which never waits for
		// a socket.
		var ec *errClose
		if errors.As(err, &ec) {
			return ending{reason: ec.code, server: true, cause: causeOfError(err), err: err}, true
		}
		return ending{reason: packet.CodeOf(err), server: true, cause: causeProtocol, err: err}, true
	}
	c.lastPacket = c.g.clock().UnixNano()
	return ending{}, false
}

// keepAliveDeadline is when the next packet must be complete (unix ns;
// keep alive > 0): one and a half keep alive periods after the last.
func (c *conn) keepAliveDeadline() int64 {
	return c.lastPacket + int64(c.keepAlive+c.keepAlive/2)
}

// readEnding maps a read failure to the connection's ending: the server
// closes it with a reason code where the specification wants a
// DISCONNECT (a malformed or oversized packet, the keep alive passed).
func (c *conn) readEnding(err error) ending {
	var pe *packet.Error
	switch {
	case errors.As(err, &pe):
		return ending{reason: pe.Code, server: true, cause: causeProtocol, err: err}
	case errors.Is(err, os.ErrDeadlineExceeded):
		return ending{reason: packet.CodeKeepAliveTimeout, server: true, cause: causeKeepAlive}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return ending{reason: packet.CodeUnspecifiedError, cause: causeLost}
	}
	return ending{reason: packet.CodeUnspecifiedError, cause: causeLost, err: err}
}

// closedByServer is the ending of a connection whose close another
// goroutine began (closing is set).
func (c *conn) closedByServer() ending {
	return ending{reason: c.closeCode, server: true, cause: causeOfCode(c.closeCode)}
}

func (c *conn) handle(h packet.FixedHeader, body []byte) error {
	switch h.Type {
	case packet.PUBLISH:
		return c.handlePublish(h, body)
	case packet.PUBACK, packet.PUBREC, packet.PUBCOMP:
		a := c.decoders().acknowledgement()
		if err := a.Decode(h, body, c.version); err != nil {
			return err
		}
		c.handleOutboundAck(a)
		return nil
	case packet.PUBREL:
		a := c.decoders().acknowledgement()
		if err := a.Decode(h, body, c.version); err != nil {
			return err
		}
		return c.handlePubrel(a.PacketID)
	case packet.SUBSCRIBE, packet.UNSUBSCRIBE:
		// Publishes read after this, on any connection, wait until its
		// records are with the producer (order.go).
		c.g.order.stir(c.g.clock().UnixNano())
		tk := c.g.order.begin()
		defer c.g.order.end(tk)
		if c.g.subscribeRead != nil {
			c.g.subscribeRead(c)
		}
		if h.Type == packet.SUBSCRIBE {
			return c.handleSubscribe(h, body)
		}
		return c.handleUnsubscribe(h, body)
	case packet.PINGREQ:
		if err := (&packet.Pingreq{}).Decode(h, body, c.version); err != nil {
			return err
		}
		if pingresp := [2]byte{byte(packet.PINGRESP) << 4, 0}; c.replyNow(pingresp[:]) {
			return nil
		}
		c.mu.Lock()
		c.useFlow()
		c.out.b = (&packet.Pingresp{}).Append(c.out.b, c.version)
		c.mu.Unlock()
		c.kickFlush()
		return nil
	case packet.AUTH:
		if c.version != packet.V5 {
			return closeWith(packet.CodeMalformedPacket, "AUTH before MQTT 5.0")
		}
		return closeWith(packet.CodeProtocolError, "AUTH without an authentication method")
	}
	return closeWith(packet.CodeProtocolError, h.Type.String()+" from a client")
}

// handleDisconnect processes the client's DISCONNECT.
func (c *conn) handleDisconnect(h packet.FixedHeader, body []byte) ending {
	d := c.decoders().disconnect()
	if err := d.Decode(h, body, c.version); err != nil {
		return ending{reason: packet.CodeOf(err), server: true, cause: causeProtocol, err: err}
	}
	var expiry *uint32
	if c.version == packet.V5 && d.Props.Present(packet.PropSessionExpiry) {
		if c.sessionExpiry == 0 && d.Props.SessionExpiry != 0 {
			return ending{reason: packet.CodeProtocolError, server: true, cause: causeProtocol, err: errExpiryRaised}
		}
		v := d.Props.SessionExpiry
		expiry = &v
	}
	return ending{clean: d.Code != packet.CodeDisconnectWithWill, reason: d.Code, expiry: expiry, cause: causeDisconnect}
}

// errExpiryRaised is a DISCONNECT setting a session expiry on a
// connection that asked for none at CONNECT [MQTT-3.14.2-2].
var errExpiryRaised = &packet.Error{Code: packet.CodeProtocolError, Msg: "DISCONNECT sets a session expiry after CONNECT set none [MQTT-3.14.2-2]"}
