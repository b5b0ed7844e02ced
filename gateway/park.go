package gateway

import (
	"context"
	"errors"
	"time"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

// Parking idle connections.
//
// A reader goroutine blocked in Read holds its stack (4–8 KiB once the
// handshake has grown it) and its read buffer for as long as the client
// says nothing, which for an idle MQTT client is most of the time. A TCP
// connection that has sent nothing for Config.ParkIdle (a new one that
// has said nothing since its CONNECT: connectParkIdle, read.go) is parked
// instead:
// its reader gives back the read buffer (a partial packet stays buffered),
// its decode state and its idle flow state, hands the socket to the
// gateway's poller and ends. The poller (park_linux.go) watches every
// parked socket with one epoll set (EPOLLIN | EPOLLONESHOT, so each arming
// reports at most once) and one goroutine. When bytes arrive, or the peer
// closes, it hands the connection back: to one of its workers when the
// connection had been idle for ParkIdle or longer (quickServe: read what
// is waiting without blocking, handle it, park again at once), else to a
// reader goroutine of its own (resume), which reads as any reader does.
// Writes never needed the reader: deliveries, acknowledgements and the
// flusher work the same for a parked connection.
//
// The keep alive of a parked connection is kept by a timing wheel of
// one-second slots that the poller advances every second, so a parked
// connection costs no timer; it is closed with 0x8D at the first tick at or
// after its deadline (up to a second late). A socket closed by the gateway
// (a failed write) while parked is handed back to a reader too
// (conn.close), which finds it closed and ends the connection as a blocked
// Read would; so is one whose close the gateway began (kick, shutdown:
// conn.serverClose), whose reader then discards input and ends it. A
// connection being closed never parks.
//
// Ownership: the reader's fields (conn's first blocks) belong to one
// goroutine at a time: the serving goroutine, then after each park a
// worker or the goroutine the poller starts (resume or expire). The
// poller's mutex orders the hand-over; a parked connection stays parked
// until exactly one of wake, expiry, close or stop takes it out.

// startPoller starts the poller that parks idle connections, when
// Config.ParkIdle asks for it and the platform has one, and sets
// Gateway.park; it returns nil otherwise (every connection keeps its
// reader). Run calls it before the listeners open.
func (g *Gateway) startPoller(ctx context.Context) *poller {
	if g.cfg.ParkIdle <= 0 {
		return nil
	}
	p, err := newPoller(ctx, g)
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		g.log.Info("idle connections keep their reader: parking is not supported here")
		return nil
	case err != nil:
		g.log.Warn("idle connections keep their reader: no poller", "err", err)
		return nil
	}
	g.park = p
	return p
}

// parkState is a connection's place in the poller, guarded by its mutex.
type parkState struct {
	due        int64 // keep alive deadline in unix seconds while parked; 0 none
	pos        int32 // index in its wheel slot
	parked     bool
	registered bool // in the epoll set: later parks re-arm it (EPOLL_CTL_MOD)
}

// park hands an idle connection to the poller, releasing its read buffer
// and decode state. On true another goroutine owns the reader from now on;
// on false (the poller stopped, the socket is closed, or the connection is
// being closed) the caller goes on reading.
func (c *conn) park() bool {
	c.rd.Release()
	c.rs = nil
	_ = c.nc.SetReadDeadline(time.Time{}) // passed; a non-blocking read must not fail on it
	c.mu.Lock()
	c.resting = true
	if c.flow != nil {
		c.receiving = false // deliveries from now on keep it (restLocked)
	}
	c.dropIdleFlow()
	c.mu.Unlock()
	var due int64
	if c.keepAlive > 0 {
		due = (c.keepAliveDeadline() + int64(time.Second) - 1) / int64(time.Second) // rounded up
	}
	if c.g.park.park(c, due) {
		return true
	}
	c.mu.Lock()
	c.resting = false
	c.mu.Unlock()
	return false
}

// resume reads a connection the poller woke with a goroutine of its own:
// one that sent again soon after it parked, or whose socket the gateway
// closed.
func (c *conn) resume() {
	c.wake()
	c.serveReads(c.g.park.ctx, false)
}

// wake starts a reader's turn after a park.
func (c *conn) wake() {
	c.mu.Lock()
	c.resting = false
	c.mu.Unlock()
}

// quickPackets is how many packets a worker handles for one woken
// connection before it gives the connection a goroutine of its own.
const quickPackets = 16

// quickServe runs on one of the poller's workers for a connection woken
// after being idle for park_idle or longer (a ping, a sporadic message):
// it reads without waiting what the client sent, handles it and parks the
// connection again at once, so that a fleet pinging at once takes a few
// workers rather than a goroutine and a park_idle wait per connection. A
// connection that turns out to send more (quickPackets in one pass) gets
// a reader goroutine of its own, and one that ends is finished by one, so
// that the worker never waits for the log or for the socket (the
// DISCONNECT of a protocol error, the drain of a server-initiated close).
//
// buf is the worker's read buffer, lent to the connection's Reader for the
// pass (a partial packet left at park is copied out), and a PINGRESP is
// written straight to the socket when nothing else waits (replyNow): a
// ping then allocates next to nothing.
func (c *conn) quickServe(ctx context.Context, buf []byte) {
	c.wake()
	c.rd.Lend(buf)
	c.nonblock = true
	for n := 0; n < quickPackets; n++ {
		if c.closing.Load() { // closed by another goroutine (serverClose)
			c.nonblock = false
			c.rd.Release()
			go c.end(ctx, c.closedByServer())
			return
		}
		c.woke = n == 0
		if c.q != nil && c.throttle() {
			break // a wait for the tenant's rates is due: not on a worker (quota.go)
		}
		h, body, err := c.rd.ReadPacket()
		if errors.Is(err, errWouldBlock) {
			c.nonblock = false
			if c.park() { // (releases buf)
				return
			}
			break // the poller stopped, the socket closed, or it is being closed
		}
		if err != nil {
			c.nonblock = false
			c.rd.Release()
			e := c.readEnding(err)
			if c.closing.Load() {
				e = c.closedByServer()
			}
			go c.end(ctx, e)
			return
		}
		if e, done := c.process(h, body); done {
			c.nonblock = false
			c.rd.Release()
			go c.end(ctx, e)
			return
		}
	}
	c.nonblock = false
	c.rd.Release() // keeps a partial packet, in a buffer of its own
	go c.serveReads(ctx, false)
}

// replyNow writes b, a reply the reader owes (PINGRESP), straight to the
// socket without waiting, when the connection reads without waiting and
// has nothing else to write (no flow state: nothing queued, no flusher).
// Bytes the socket does not take go through the out buffer. It reports
// false, having written nothing, when it cannot.
func (c *conn) replyNow(b []byte) bool {
	if !c.nonblock {
		return false
	}
	c.mu.Lock()
	if c.flow != nil || c.closed {
		c.mu.Unlock()
		return false
	}
	n := c.writeSome(b) // without waiting; c.mu keeps every other write behind it
	if n == 0 {
		c.mu.Unlock()
		return false
	}
	c.add(BytesSent, int64(n))
	rest := n < len(b)
	if rest {
		c.useFlow()
		c.out.b = append(c.out.b, b[n:]...)
	}
	c.mu.Unlock()
	if rest {
		c.kickFlush()
	}
	return true
}

// expire ends a parked connection whose keep alive passed.
func (c *conn) expire() {
	c.end(c.g.park.ctx, ending{reason: packet.CodeKeepAliveTimeout, server: true, cause: causeKeepAlive})
}

// wheelSlots is the number of one-second slots of the keep-alive wheel, a
// power of two.
const wheelSlots = 256

// wheel is a hashed timing wheel: slot s%wheelSlots holds the parked
// connections due in second s (and, for deadlines a round or more away,
// in s + k·wheelSlots: they stay until their second comes). Adding and
// removing are O(1); advancing by a second scans one slot.
type wheel struct {
	slots [wheelSlots][]*conn
	now   int64 // the last second advanced to
}

// add puts c in the slot of its due second; a deadline already passed is
// due at the next second.
func (w *wheel) add(c *conn) {
	c.parking.due = max(c.parking.due, w.now+1)
	s := &w.slots[c.parking.due&(wheelSlots-1)]
	c.parking.pos = int32(len(*s))
	*s = append(*s, c)
}

// remove takes c out of its slot.
func (w *wheel) remove(c *conn) {
	s := &w.slots[c.parking.due&(wheelSlots-1)]
	last := len(*s) - 1
	moved := (*s)[last]
	(*s)[c.parking.pos] = moved
	moved.parking.pos = c.parking.pos
	(*s)[last] = nil
	*s = (*s)[:last]
	if cap(*s) > 64 && len(*s) < cap(*s)/4 {
		*s = append(make([]*conn, 0, cap(*s)/2), *s...) // do not keep a burst's slot forever
	}
}

// advance moves the wheel to second now, appending the connections due by
// then to expired (taken out of the wheel).
func (w *wheel) advance(now int64, expired []*conn) []*conn {
	if now <= w.now {
		return expired
	}
	n := min(now-w.now, wheelSlots)
	for i := int64(1); i <= n; i++ {
		s := &w.slots[(w.now+i)&(wheelSlots-1)]
		for j := 0; j < len(*s); {
			c := (*s)[j]
			if c.parking.due > now {
				j++
				continue
			}
			expired = append(expired, c)
			w.remove(c) // moves the last entry to j
		}
	}
	w.now = now
	return expired
}
