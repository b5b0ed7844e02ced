package gateway

import (
	"cmp"
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"time"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/internal/obs"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// How a connection ends: end and finish unregister it and report its end
// to the log; a close the gateway begins (a kick, shutdown, a protocol
// error) sends its reason code, half-closes the socket and drains it before
// closing (closeWrite, drain).

// end finishes an established connection and closes its socket. It is
// called once per connection, by the goroutine that owns its reader. A
// connection the server closes (e.server) gets its DISCONNECT and its
// sending side shut down (closeWrite; done already when another goroutine
// began the close), and what the client still sends is discarded (drain)
// while the end is reported, before the socket closes.
func (c *conn) end(ctx context.Context, e ending) {
	defer c.g.live.done()
	c.logEnd(ctx, e)
	c.add(ConnectionsCurrent, -1)
	c.releaseQuota()
	var drained chan struct{}
	if e.server {
		c.closeWrite(e.reason)
		if c.halfCloses() {
			drained = make(chan struct{})
			go func() { defer close(drained); c.drain() }()
		}
	}
	c.finish(ctx, e.clean, e.reason, e.expiry)
	if drained != nil {
		<-drained
	}
	c.close()
}

// finish unregisters the connection and reports its end to the session
// service.
func (c *conn) finish(ctx context.Context, clean bool, reason packet.ReasonCode, expiry *uint32) {
	g := c.g
	g.mu.Lock()
	if g.clients[c.clientsKey] == c {
		delete(g.clients, c.clientsKey)
	}
	delete(g.byID, c.id)
	g.mu.Unlock()
	if c.expiry != nil {
		c.expiry.Stop()
	}
	c.mu.Lock()
	c.closed = true
	// Unacknowledged and queued QoS 1/2 messages go back to the session
	// (below, after the Disconnect), oldest first; a QoS 2 message whose
	// PUBREC came is the client's already.
	// Messages of the session's inbox stay there: it sends them again.
	var unacked []*outMsg
	if f := c.flow; f != nil {
		unacked = make([]*outMsg, 0, len(f.inflight)+len(f.queue))
		for _, om := range f.inflight {
			if !om.pubrecd && om.inboxSeq == 0 {
				om.dup = true
				unacked = append(unacked, om)
			}
		}
		slices.SortFunc(unacked, func(a, b *outMsg) int { return cmp.Compare(a.seq, b.seq) })
		for _, om := range f.queue {
			if om.inboxSeq == 0 {
				unacked = append(unacked, om)
			}
		}
		for _, e := range f.early {
			if e.t.InboxSeq == 0 {
				unacked = append(unacked, newOutMsg(e.m, e.t, e.mid))
			}
		}
		// The deliveries' spans end here (tracing on): not acknowledged.
		for _, om := range f.inflight {
			endSpan(om.span, "connection closed before the acknowledgement")
		}
		for _, om := range f.queue {
			endSpan(om.span, "connection closed before the message was sent")
		}
		f.queue, f.inflight, f.early = nil, nil, nil
	}
	c.mu.Unlock()
	// Report the end only after the connection's own writes (subscription
	// changes above all) are in the log, so that the session service's
	// removals come after them in every partition.
	if g.background != nil {
		g.background.SendBackground() // its express publishes, held back
	}
	waited := make(chan struct{})
	go func() { c.writing.Wait(); close(waited) }()
	written := true
	select {
	case <-waited:
	case <-time.After(g.cfg.SessionTimeout):
		c.logWarn(ctx, "log writes still pending at disconnect")
		written = false
	}

	d := &eventspb.Disconnect{
		Connection:  c.id,
		Generation:  c.generation,
		ReasonCode:  uint32(reason),
		PublishWill: !clean,
	}
	if written {
		// Where the session service removes the session from the routers
		// should it end with this connection (Disconnect.router_partitions);
		// with writes still pending, a subscription change could follow
		// the removal anywhere, and the session leaves every partition.
		d.RouterPartitions, d.RouterPartitionsKnown = c.routerParts.list(), true
	}
	if expiry != nil {
		d.SessionExpiryS = expiry
	}
	env := c.envelope(c.g.clock())
	env.Event = &eventspb.Envelope_Disconnect{Disconnect: d}
	rec := kafka.NewRecord(g.topics.Sessions.Name, c.clientRecordKey, kafka.PartitionByKey, env)
	// The connection's end must reach the session service even when the
	// gateway is shutting down.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.cfg.SessionTimeout)
	defer cancel()
	if err := g.produceSync(pctx, rec); err != nil {
		c.logError(ctx, "report disconnect", "err", err)
	}
	persistent := c.sessionExpiry != 0 && (expiry == nil || *expiry != 0)
	for _, om := range unacked {
		switch {
		case om.qos == 0:
		case om.shareGroup != "":
			// A shared subscription's message goes to another member.
			g.redispatch(c.tenant, c.clientID, om.msg, om.shareGroup, om.shareFilter)
		case persistent:
			g.bounce(c.tenant, om.msg, &eventspb.Target{
				ClientId: c.clientID, Qos: uint32(om.qos), Retain: om.retain, SubscriptionIds: om.subIDs, Dup: om.dup,
			})
		default:
			c.drop(obs.DropSessionEnded) // the session ends with the connection
		}
	}
}

// kick closes the connection with code: its session was taken over
// (0x8E), or it does not take its messages fast enough (0x97). See
// serverClose.
func (c *conn) kick(code packet.ReasonCode) { c.serverClose(code) }

// shutdown closes the connection because the gateway stops. See
// serverClose.
func (c *conn) shutdown() { c.serverClose(packet.CodeServerShuttingDown) }

// Server-initiated closes. A connection the gateway closes with a reason
// code gets the code and then the end of the stream, even while the client
// is still sending: closing a socket whose input is not all read resets the
// connection (RST), which fails the client's writes with ECONNRESET (a
// client library then gives up before it reads the reason) and may make the
// client's stack drop what it received but had not delivered, the reason
// code among it. So the gateway writes the DISCONNECT (or the refusing
// CONNACK), shuts down its sending side (TCP FIN: the client reads up to
// the end of the stream) and reads and discards what the client still
// sends, until the client closes its side, for at most lingerTime and
// lingerBytes; only then it closes the socket. A WebSocket connection,
// which cannot be half-closed, ends with its close frame instead: closing
// it writes the frame and discards messages until the client's.
const (
	lingerTime  = 2 * time.Second
	lingerBytes = 4 << 20
)

// halfCloser is a connection whose sending side can be shut down alone:
// *net.TCPConn (and *tls.Conn).
type halfCloser interface{ CloseWrite() error }

// halfCloses reports whether the connection's socket can be half-closed.
func (c *conn) halfCloses() bool {
	_, ok := c.nc.(halfCloser)
	return ok
}

// halfClose shuts down the socket's sending side, if it can be alone, and
// reports whether it could.
func (c *conn) halfClose() bool {
	hc, ok := c.nc.(halfCloser)
	if ok {
		_ = hc.CloseWrite()
	}
	return ok
}

// closeWrite begins a server-initiated close with reason code: nothing
// more is queued for the writers (closed), a 5.0 DISCONNECT with code (a
// 3.1.1 server closes without one) is written after what the out buffer
// holds, waiting for a writer that has the connection (flushNow), and the
// socket is half-closed. The connection's reader then discards input and
// ends the connection (end, drain). Only the first call does anything; it
// reports whether it was that one. It may wait for the socket up to
// write_timeout: never on the slot consumer or a writer of the pool.
func (c *conn) closeWrite(code packet.ReasonCode) bool {
	c.mu.Lock()
	if c.closing.Load() {
		c.mu.Unlock()
		return false
	}
	c.closeCode = code
	c.closing.Store(true)
	c.closed = true
	if c.version == packet.V5 {
		c.useFlow()
		c.out.b = (&packet.Disconnect{Code: code}).Append(c.out.b, c.version)
	}
	c.mu.Unlock()
	c.flushNow()
	c.halfClose()
	return true
}

// serverClose closes the connection with code from a goroutine other
// than its reader's (a takeover, the gateway stopping, a full queue):
// closeWrite, then the reader is woken to discard input and end the
// connection. Before the CONNACK is queued it only records the close,
// which the handshake carries out after the CONNACK (closeLater). It may
// wait for the socket (closeWrite).
func (c *conn) serverClose(code packet.ReasonCode) {
	if c.closeLater(code) || !c.closeWrite(code) {
		return
	}
	c.wakeReader()
}

// closeLater records a close asked for before the connection's CONNACK
// was queued and reports whether it did; the handshake closes the
// connection right after queuing the CONNACK, since no other packet may
// precede it [MQTT-3.2.0-1]. It never waits.
func (c *conn) closeLater(code packet.ReasonCode) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ready {
		return false
	}
	if !c.closeAfterConnack {
		c.closeAfterConnack, c.closeCode = true, code
	}
	return true
}

// wakeReader makes the connection's reader notice the close another
// goroutine began: a blocked read returns at once (a deadline in the
// past; the reader looks at closing before every read), and a parked
// connection gets a reader back. A WebSocket connection is closed (its
// close frame), which ends its reader's read.
func (c *conn) wakeReader() {
	c.interruptWait() // a reader held back by its tenant's rates (quota.go)
	if !c.halfCloses() {
		c.close()
		return
	}
	_ = c.nc.SetReadDeadline(time.Unix(1, 0))
	if c.parkable() {
		c.g.park.closed(c)
	}
}

// drain reads and discards what the client sends until it closes its
// side, lingerBytes were read or lingerTime passed (a socket deadline:
// real time, not the gateway's clock). Reader owner only.
func (c *conn) drain() {
	until := time.Now().Add(lingerTime)
	left := int64(lingerBytes)
	for left > 0 {
		_ = c.nc.SetReadDeadline(until)
		n, err := io.CopyN(io.Discard, c.nc, left)
		left -= n
		// The past deadline of wakeReader may land after this one: only
		// the drain's own deadline ends it.
		if !errors.Is(err, os.ErrDeadlineExceeded) || !time.Now().Before(until) {
			return
		}
	}
}

// close closes the socket at once. A parked connection gets a reader
// again, which finds the socket closed and ends the connection as a
// blocked read would.
func (c *conn) close() {
	_ = c.nc.Close()
	c.interruptWait()
	if c.parkable() {
		c.g.park.closed(c)
	}
}
