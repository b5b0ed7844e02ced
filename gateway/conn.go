package gateway

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// ReasonCodeOf converts a reason code carried in an event.
func ReasonCodeOf(v uint32) packet.ReasonCode { return packet.ReasonCode(v) }

// conn is one client connection. The reader owns the fields in the first
// blocks: one goroutine at a time, which hands them over when it parks the
// connection (park.go); mu guards the rest, which delivery,
// acknowledgement and flush goroutines share. Lock order: Gateway.mu before
// conn.mu; never the other way round.
type conn struct {
	g  *Gateway
	nc net.Conn
	rd packet.Reader
	id uint64

	// Set by the handshake, read-only afterwards. (Field order packs the
	// struct into a smaller size class: keep the small ones together.)
	tenant          string
	clientID        string
	ckey            string // key in Gateway.clients
	rkey            []byte // Kafka key tenant/client
	generation      uint64
	sessionGen      uint64 // the generation that began the session (ConnectResult.session_generation)
	keepAlive       time.Duration
	sessionExpiry   uint32
	problemInfo     bool
	resumed         bool // CONNACK said session present
	version         packet.Version
	clientRecvMax   uint16
	clientMaxPacket uint32
	clientAliasMax  uint16
	ts              *Stats // the tenant's counters

	// Reader only.
	rs         *readState                 // what packets decode into; nil until needed and while parked
	lastPacket int64                      // unix ns: when the last packet was handled, or CONNACK queued (keepAliveDeadline)
	qos0Done   func(*kafka.Record, error) // c.qos0Produced, bound at the first QoS 0 PUBLISH
	aliasIn    []string
	// awaitingRel holds the packet identifiers of the client's QoS 2
	// PUBLISHes received on this connection and not released (PUBREL),
	// each with the partition of shoal.messages its Publish went to when
	// the router keeps it too (a persistent session), or -1.
	awaitingRel map[uint16]int32
	// woke says the packet being handled needed a fresh read of the
	// socket (nothing of it was buffered): its reader was likely just
	// woken, maybe together with others (order.go).
	woke bool
	// relBroadcasts counts the PUBRELs of identifiers this connection did
	// not receive, each released in every partition (handlePubrel).
	relBroadcasts uint16
	inInflight    atomic.Int32   // QoS 1/2 publishes from the client not yet completed
	nonblock      bool           // reads return errWouldBlock rather than wait (park.go)
	refused       bool           // the handshake answered CONNACK with a failure code
	writing       sync.WaitGroup // log writes of this connection not yet completed

	// The connection's writer (who set flushing) only.
	nb      nonBlockingWriter // nil: writes block (flushLoop)
	nbKnown bool

	// closing is set by the first closeWrite (a server-initiated close:
	// DISCONNECT sent, the socket half-closed); the connection's reader
	// then discards input and ends it. Atomic: the reader and the poller
	// look at it without mu.
	closing atomic.Bool

	mu       sync.Mutex
	ready    bool // CONNACK queued: deliveries may be written
	closed   bool // nothing more is queued for the writers (closeWrite, finish)
	flushing bool
	resting  bool // the reader parked: the flusher drops the flow state it leaves idle
	// closeAfterConnack records a close asked for before CONNACK was
	// queued (a takeover, the gateway stopping): the handshake queues
	// CONNACK, then closes with closeCode [MQTT-3.2.0-1]. closeCode is the
	// reason of a server-initiated close, set before closing.
	closeAfterConnack bool
	closeCode         packet.ReasonCode
	*flow             // nil while no traffic is under way: see flow
	// seen is, per partition of shoal.messages, the offset of the newest
	// record a delivery to this connection was made for (see fresh).
	seen []int64
	// lastInboxSeq is the newest inbox entry forwarded to this connection.
	lastInboxSeq uint64
	aliasOut     map[string]uint16
	subs         map[string]*eventspb.SubscriptionOptions // filter as subscribed → options; nil until the first

	// tcp is set for a TCP socket: its deadlines may pass and be set
	// again (readLoop), unlike a WebSocket connection's.
	tcp bool
	// Parking (park.go): parkable is set for a connection that can be
	// parked (a TCP socket where the gateway runs a poller); pk is guarded
	// by the poller's mutex.
	parkable bool
	pk       parkState
}

// flow is the part of a connection's state under conn.mu that only
// traffic needs: the out buffer and the flusher's spare, deliveries that
// came before CONNACK, acknowledgements waiting for the log, messages in
// flight and queued. Its fields are promoted into conn. It is nil until a
// packet is to be written (useFlow: CONNACK, PINGRESP, a delivery, an
// acknowledgement), and a connection that parks with none of it in use
// drops it (dropIdleFlow), so an idle connection does not carry it. Code
// that touches its fields holds c.mu and has called useFlow, or checks
// c.flow first (a nil flow has nothing to write).
type flow struct {
	out      outBuf
	spare    outBuf
	early    []earlyDelivery // deliveries that arrived before CONNACK
	acks     []*pendingAck   // acknowledgements in the order their packets arrived
	nextID   uint16
	sendSeq  uint64
	inflight map[uint16]*outMsg
	queue    []*outMsg
	// pendingInboxAcks are acknowledgements of inbox messages to report
	// once c.mu is released.
	pendingInboxAcks []inboxAck
	scratch          *packet.Publish // encoding deliveries; allocated by the first
	// receiving is set by a delivery and cleared when the connection
	// parks: a parked connection that receives keeps its flow between
	// flushes (restLocked) instead of making it again for every message.
	receiving bool
}

// useFlow makes the connection's flow state if it has none. Holds c.mu.
func (c *conn) useFlow() {
	if c.flow == nil {
		c.flow = new(flow)
	}
}

// dropIdleFlow drops the flow state when nothing is in it: nothing to
// write, no message in flight or queued, no acknowledgement pending, no
// flush under way. The packet identifiers and send order start again,
// which nothing in flight can tell. Holds c.mu.
func (c *conn) dropIdleFlow() {
	f := c.flow
	if f != nil && !c.flushing && f.out.len() == 0 && len(f.early) == 0 && len(f.acks) == 0 &&
		len(f.inflight) == 0 && len(f.queue) == 0 && len(f.pendingInboxAcks) == 0 {
		c.flow = nil
	}
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

// earlyDelivery is a delivery that arrived between the session service's
// answer and the CONNACK.
type earlyDelivery struct {
	m *eventspb.Message
	t *eventspb.Target
}

// pendingAck is an acknowledgement that may be sent once the records it
// waits for are durably in the log.
type pendingAck struct {
	kind      packet.Type
	id        uint16
	code      packet.ReasonCode
	codes     []packet.ReasonCode // SUBACK, UNSUBACK
	remaining atomic.Int32
	ready     bool
	failed    bool
	// uncounted marks a PUBCOMP for an identifier an earlier connection
	// of the session received: not in this connection's receive window.
	uncounted bool
}

// outMsg is a QoS 1 or 2 message on its way to the client.
type outMsg struct {
	msg    *eventspb.Message
	qos    byte
	retain bool
	dup    bool // sent before (a resumed session's unacknowledged message)
	subIDs []uint32
	// shareGroup and shareFilter name the shared subscription that chose
	// this client; an unacknowledged message goes back to that group.
	shareGroup, shareFilter string
	id                      uint16
	seq                     uint64 // order of sending, for returning them in order
	pubrecd                 bool   // QoS 2: PUBREC received, PUBREL sent
	// inboxSeq is set for a message of the session's inbox (Target
	// inbox_seq): it has the packet identifier the session service gave
	// it, its acknowledgements go back as InboxAck, and it stays with the
	// session (never returned) when the connection ends.
	inboxSeq uint64
}

func newConn(g *Gateway, nc net.Conn) *conn {
	c := &conn{g: g, nc: nc, id: g.connSeq.Add(1)}
	c.rd.Init((*socket)(c), readBufferSize)
	c.rd.MaxPacketSize = g.cfg.MaxPacketSize
	_, c.tcp = nc.(*net.TCPConn)
	c.parkable = c.tcp && g.park != nil
	return c
}

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

// ending is how a connection ended: whether the client's DISCONNECT
// suppresses the will, the reason code, a session expiry sent with
// DISCONNECT (nil if none), and whether the server closes it (server: a
// DISCONNECT with the reason, then the graceful close of closeWrite).
type ending struct {
	clean  bool
	reason packet.ReasonCode
	expiry *uint32
	server bool
}

// errClose ends a connection; code is the reason sent in a 5.0 DISCONNECT
// (none when 0 and not a protocol fault).
type errClose struct {
	code packet.ReasonCode
	msg  string
}

func (e *errClose) Error() string { return e.msg + " (" + e.code.String() + ")" }

func closeWith(code packet.ReasonCode, msg string) error { return &errClose{code: code, msg: msg} }

// serve runs one connection until it ends or its reader parks it.
func (g *Gateway) serve(ctx context.Context, nc net.Conn) {
	if !g.live.add() {
		_ = nc.Close() // shutting down
		return
	}
	c := newConn(g, nc)
	if !c.handshake(ctx) {
		if c.refused && c.halfClose() {
			c.drain() // the client reads the CONNACK's reason code, then the end of the stream
		}
		_ = nc.Close()
		g.live.done()
		return
	}
	c.add(ConnectionsCurrent, 1)
	c.add(ConnectionsTotal, 1)
	c.lastPacket = g.clock().UnixNano()
	if g.live.closed() {
		c.shutdown() // accepted as the gateway began to stop: closeAll missed it
	}
	c.serveReads(ctx)
}

// serveReads reads packets until the connection ends, then finishes it,
// or until the connection parks (park.go), leaving it to the poller.
func (c *conn) serveReads(ctx context.Context) {
	e, parked := c.readLoop()
	if parked {
		return
	}
	c.end(ctx, e)
}

// end finishes an established connection and closes its socket. It is
// called once per connection, by the goroutine that owns its reader. A
// connection the server closes (e.server) gets its DISCONNECT and its
// sending side shut down (closeWrite; done already when another goroutine
// began the close), and what the client still sends is discarded (drain)
// while the end is reported, before the socket closes.
func (c *conn) end(ctx context.Context, e ending) {
	defer c.g.live.done()
	c.add(ConnectionsCurrent, -1)
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

// handshake reads CONNECT, asks the session service, and answers CONNACK.
// It reports whether the connection is established.
func (c *conn) handshake(ctx context.Context) bool {
	g := c.g
	_ = c.nc.SetReadDeadline(g.clock().Add(g.cfg.ConnectTimeout))
	h, body, err := c.rd.ReadPacket()
	if err != nil {
		g.log.Debug("no connect", "remote", c.nc.RemoteAddr(), "err", err)
		return false
	}
	if h.Type != packet.CONNECT {
		g.log.Debug("first packet is not CONNECT", "remote", c.nc.RemoteAddr(), "type", h.Type)
		return false
	}
	var cp packet.Connect
	if err := cp.Decode(h, body, 0); err != nil {
		code := packet.CodeOf(err)
		g.log.Debug("bad connect", "remote", c.nc.RemoteAddr(), "err", err)
		switch {
		case cp.Version == packet.V5:
			c.refuse(code, packet.V5)
		case code == packet.CodeUnsupportedProtocolVersion:
			// [MQTT-3.1.2-2]: answer 0x01 in the 3.1.1 format.
			c.refuse(code, packet.V311)
		}
		return false
	}
	c.version = cp.Version
	v5 := c.version == packet.V5

	clientID, tenant := string(cp.ClientID), ""
	assigned := ""
	if clientID == "" {
		if !v5 && !cp.CleanStart {
			c.refuse(packet.CodeClientIdentifierNotValid, c.version)
			return false
		}
		assigned = newClientID(g.cfg.TenantSeparator)
		clientID = assigned
	} else {
		tenant = Tenant(clientID, g.cfg.TenantSeparator)
	}
	// The tenant and the client id are views of the key: one allocation
	// that lives as long as the connection, not three.
	c.ckey = clientKey(tenant, clientID)
	c.tenant, c.clientID = c.ckey[:len(tenant)], c.ckey[len(tenant)+1:]
	c.ts = g.tenantStats(c.tenant)
	c.rkey = kafka.Key(c.tenant, c.clientID)

	// Limits and options from the client.
	c.clientRecvMax, c.clientMaxPacket, c.problemInfo = maxWindow, packet.MaxRemainingLength+5, true
	if cp.CleanStart {
		c.sessionExpiry = 0
	} else {
		c.sessionExpiry = kafka.SessionExpiryNever
	}
	if v5 {
		pr := &cp.Props
		c.sessionExpiry = 0
		if pr.Present(packet.PropSessionExpiry) {
			c.sessionExpiry = pr.SessionExpiry
		}
		if pr.Present(packet.PropReceiveMax) {
			c.clientRecvMax = min(pr.ReceiveMax, maxWindow)
		}
		if pr.Present(packet.PropMaxPacketSize) {
			c.clientMaxPacket = pr.MaxPacketSize
		}
		c.clientAliasMax = pr.TopicAliasMax
		if pr.Present(packet.PropRequestProblemInfo) {
			c.problemInfo = pr.RequestProblemInfo == 1
		}
		if pr.Present(packet.PropAuthMethod) {
			// Enhanced authentication is not offered.
			c.refuse(packet.CodeBadAuthenticationMethod, c.version)
			return false
		}
	}
	ka := time.Duration(cp.KeepAlive) * time.Second
	serverKA := false
	if max := g.cfg.MaxKeepAlive; max > 0 && (ka == 0 || ka > max) && v5 {
		ka, serverKA = max, true
	}
	c.keepAlive = ka

	// Ask the session service.
	req := &eventspb.Connect{
		Route:           &eventspb.Route{Slot: g.slot.Load(), Connection: c.id},
		CleanStart:      cp.CleanStart,
		SessionExpiryS:  c.sessionExpiry,
		ProtocolVersion: uint32(c.version),
		Username:        string(cp.Username),
		RequestId:       g.reqSeq.Add(1),
	}
	if cp.WillFlag {
		req.Will = &eventspb.Will{Message: willMessage(&cp, g.clock())}
		if v5 {
			req.Will.DelayIntervalS = cp.WillProps.WillDelay
			if m := req.Will.Message; m.HasExpiry {
				// The interval starts when the will is published.
				iv := cp.WillProps.MessageExpiry
				req.Will.ExpiryIntervalS = &iv
				m.HasExpiry, m.ExpiresAtMs = false, 0
			}
		}
	}
	res, err := g.askSession(ctx, c, req)
	if err != nil {
		g.log.Warn("connect not answered", "client", c.clientID, "tenant", c.tenant, "err", err)
		c.refuse(packet.CodeServerUnavailable, c.version)
		return false
	}
	if res.ReasonCode != 0 {
		c.refuse(ReasonCodeOf(res.ReasonCode), c.version)
		return false
	}
	// Accepted: the slot consumer registered the connection. From here a
	// failure must also unregister it and report its end, as clean: the
	// client gets no CONNACK, so it never had a connection whose loss its
	// will would announce.
	accepted := false
	defer func() {
		if !accepted {
			c.finish(ctx, true, packet.CodeServerUnavailable, nil)
		}
	}()
	if len(res.Subscriptions) > 0 {
		c.subs = make(map[string]*eventspb.SubscriptionOptions, len(res.Subscriptions))
		for _, s := range res.Subscriptions {
			c.subs[s.Filter] = s.Options
		}
		// A resumed session: move its subscriptions to this connection in
		// every router shard before CONNACK, so that whatever is published
		// after CONNACK is routed here.
		if err := c.rebind(ctx, res.Subscriptions); err != nil {
			g.log.Warn("rebind resumed session", "client", c.clientID, "tenant", c.tenant, "err", err)
			c.refuse(packet.CodeServerUnavailable, c.version)
			return false
		}
	}

	c.resumed = res.SessionPresent
	ack := packet.Connack{SessionPresent: res.SessionPresent}
	if v5 {
		p := &ack.Props
		p.ReceiveMax = g.cfg.ReceiveMaximum
		p.Set(packet.PropReceiveMax)
		p.MaxPacketSize = g.cfg.MaxPacketSize
		p.Set(packet.PropMaxPacketSize)
		p.TopicAliasMax = g.cfg.TopicAliasMaximum
		p.Set(packet.PropTopicAliasMax)
		if assigned != "" {
			p.AssignedClientID = []byte(assigned)
			p.Set(packet.PropAssignedClientID)
		}
		if serverKA {
			p.ServerKeepAlive = uint16(ka / time.Second)
			p.Set(packet.PropServerKeepAlive)
		}
		if res.InboxDropped > 0 && c.problemInfo {
			p.ReasonString = []byte(strconv.FormatUint(uint64(res.InboxDropped), 10) +
				" queued messages were dropped while offline: the session's inbox was full")
			p.Set(packet.PropReasonString)
		}
	}
	if g.beforeConnack != nil {
		g.beforeConnack(c)
	}
	c.mu.Lock()
	c.useFlow()
	c.out.b = ack.Append(c.out.b, c.version)
	c.ready = true
	closeNow, code := c.closeAfterConnack, c.closeCode
	var early []earlyDelivery
	if !closeNow {
		early, c.early = c.early, nil
	}
	c.mu.Unlock()
	accepted = true
	if closeNow {
		// Closed while the CONNACK was not queued yet (taken over by a
		// newer connection, the gateway stopping): the client gets its
		// CONNACK, then the DISCONNECT [MQTT-3.2.0-1]; deliveries held
		// for it go back with the connection's end (finish).
		c.closeWrite(code)
		return true
	}
	// Deliveries that came before CONNACK follow it, in their order.
	now := g.clock()
	for _, e := range early {
		c.deliver(nil, e.m, e.t, now) // owned copies; fresh when they arrived
	}
	c.kickFlush()
	return true
}

// refuse answers CONNECT with a CONNACK carrying code in version v's
// format; serve then closes the socket as closeWrite does, so that the
// client reads the code.
func (c *conn) refuse(code packet.ReasonCode, v packet.Version) {
	c.writeNow((&packet.Connack{Code: code}).Append(nil, v))
	c.refused = true
}

// askSession sends the Connect request and waits for its result, at most
// Config.SessionTimeout.
//
// When it gives up (the write or the answer took too long, or the gateway
// stops), the Connect may still be written and accepted later: a failed
// ProduceSync does not mean "not written". So it ends the connection in
// the session service too: if the answer came after all (the slot consumer
// registered the connection), with the connection's own Disconnect;
// otherwise with an abandoned Disconnect, written after the Connect with
// the same key, so the idempotent producer puts it after the Connect in
// the same partition, whichever of them is written.
func (g *Gateway) askSession(ctx context.Context, c *conn, req *eventspb.Connect) (*eventspb.ConnectResult, error) {
	ch := make(chan *eventspb.ConnectResult, 1)
	g.mu.Lock()
	g.waiting[req.RequestId] = waiter{c: c, ch: ch}
	g.mu.Unlock()
	env := c.envelope(c.g.clock())
	env.Event = &eventspb.Envelope_Connect{Connect: req}
	rec := kafka.NewRecord(g.topics.Sessions.Name, c.rkey, kafka.PartitionByKey, env)
	tctx, cancel := context.WithTimeout(ctx, g.cfg.SessionTimeout)
	defer cancel()
	err := g.kl.ProduceSync(tctx, rec)
	if err == nil {
		select {
		case r := <-ch:
			return r, nil // the slot consumer removed the waiter
		case <-tctx.Done():
			err = fmt.Errorf("wait for the session service's answer: %w", tctx.Err())
		}
	} else {
		err = fmt.Errorf("write connect: %w", err)
	}
	g.mu.Lock()
	delete(g.waiting, req.RequestId)
	registered := g.byID[c.id] == c
	g.mu.Unlock()
	if registered {
		// Accepted between the timeout and now.
		c.finish(ctx, true, packet.CodeServerUnavailable, nil)
	} else {
		g.abandonConnect(ctx, c)
	}
	return nil, err
}

// abandonConnect writes the abandoned Disconnect of a connection whose
// Connect the gateway gave up on (see askSession). It waits for room in
// the producer's buffer at most Config.SessionTimeout, also when the
// gateway stops; a failure is logged (the client's next connection ends
// the abandoned one anyway, by takeover).
func (g *Gateway) abandonConnect(ctx context.Context, c *conn) {
	env := c.envelope(c.g.clock())
	env.Event = &eventspb.Envelope_Disconnect{Disconnect: &eventspb.Disconnect{
		Connection: c.id,
		ReasonCode: uint32(packet.CodeServerUnavailable),
		Abandoned:  true,
	}}
	rec := kafka.NewRecord(g.topics.Sessions.Name, c.rkey, kafka.PartitionByKey, env)
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.cfg.SessionTimeout)
	defer cancel()
	g.kl.Produce(pctx, rec, func(_ *kafka.Record, err error) {
		if err != nil {
			g.log.Warn("write abandoned connect", "client", c.clientID, "tenant", c.tenant, "connection", c.id, "err", err)
		}
	})
}

// willMessage builds the will as a message event.
func willMessage(cp *packet.Connect, now time.Time) *eventspb.Message {
	m := &eventspb.Message{
		Topic:   string(cp.WillTopic),
		Payload: append([]byte(nil), cp.WillPayload...),
		Qos:     uint32(cp.WillQoS),
		Retain:  cp.WillRetain,
	}
	if cp.Version == packet.V5 {
		setMessageProps(m, &cp.WillProps, now)
	}
	return m
}

// setMessageProps copies the pass-through properties of a PUBLISH or will.
func setMessageProps(m *eventspb.Message, p *packet.Properties, now time.Time) {
	m.PayloadUtf8 = p.Present(packet.PropPayloadFormat) && p.PayloadFormat == 1
	if p.Present(packet.PropMessageExpiry) {
		m.HasExpiry = true
		m.ExpiresAtMs = now.UnixMilli() + int64(p.MessageExpiry)*1000
	}
	if p.Present(packet.PropContentType) {
		m.ContentType = string(p.ContentType)
	}
	if p.Present(packet.PropResponseTopic) {
		m.ResponseTopic = string(p.ResponseTopic)
	}
	if p.Present(packet.PropCorrelationData) {
		m.CorrelationData = append([]byte(nil), p.CorrelationData...)
	}
	if len(p.User) > 0 {
		m.UserProperties = make([]*eventspb.UserProperty, len(p.User))
		for i, u := range p.User {
			m.UserProperties[i] = &eventspb.UserProperty{Key: string(u.Key), Value: string(u.Value)}
		}
	}
}

// newClientID returns an assigned client identifier without the tenant
// separator, so that it belongs to the default tenant.
func newClientID(sep string) string {
	for {
		var b [12]byte
		_, _ = rand.Read(b[:])
		id := "shoal" + hex.EncodeToString(b[:])
		if sep == "" || !strings.Contains(id, sep) {
			return id
		}
	}
}

// readLoop handles packets until the connection ends, and returns how it
// ended; or until the connection has been idle for Config.ParkIdle and
// parks (parked true: another goroutine owns the reader now).
//
// The keep alive deadline runs from the end of the last packet handled
// (lastPacket); a parked connection's is kept by the poller.
func (c *conn) readLoop() (e ending, parked bool) {
	g := c.g
	parkAfter := g.cfg.ParkIdle
	if !c.parkable {
		parkAfter = 0
	}
	// A TCP socket's read deadline is set once, not moved with every
	// packet (a system call's worth of timer work each): when it passes,
	// the deadline is worked out again from the last packet's time, and a
	// connection that was not idle after all gets the new one. Other
	// connections (WebSocket) move it with every packet: a WebSocket
	// connection closes when a deadline passes under a read.
	armed := false
	for {
		if !armed || !c.tcp {
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
		if c.rd.Buffered() == 0 {
			c.rd.Shrink()
		}
	}
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
	if h.Type == packet.DISCONNECT {
		return c.handleDisconnect(h, body), true
	}
	if err := c.handle(h, body); err != nil {
		// The DISCONNECT goes out with the connection's end (closeWrite),
		// not here: this may be a poller's worker, which never waits for
		// a socket.
		var ec *errClose
		if errors.As(err, &ec) {
			c.g.log.Debug("closing connection", "client", c.clientID, "err", err)
			return ending{reason: ec.code, server: true}, true
		}
		c.g.log.Debug("protocol fault", "client", c.clientID, "err", err)
		return ending{reason: packet.CodeOf(err), server: true}, true
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
		return ending{reason: pe.Code, server: true}
	case errors.Is(err, os.ErrDeadlineExceeded):
		return ending{reason: packet.CodeKeepAliveTimeout, server: true}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return ending{reason: packet.CodeUnspecifiedError}
	}
	c.g.log.Debug("read", "client", c.clientID, "err", err)
	return ending{reason: packet.CodeUnspecifiedError}
}

// closedByServer is the ending of a connection whose close another
// goroutine began (closing is set).
func (c *conn) closedByServer() ending {
	return ending{reason: c.closeCode, server: true}
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
		return ending{reason: packet.CodeOf(err), server: true}
	}
	var expiry *uint32
	if c.version == packet.V5 && d.Props.Present(packet.PropSessionExpiry) {
		if c.sessionExpiry == 0 && d.Props.SessionExpiry != 0 {
			// [MQTT-3.14.2-2]
			return ending{reason: packet.CodeProtocolError, server: true}
		}
		v := d.Props.SessionExpiry
		expiry = &v
	}
	return ending{clean: d.Code != packet.CodeDisconnectWithWill, reason: d.Code, expiry: expiry}
}

// finish unregisters the connection and reports its end to the session
// service.
func (c *conn) finish(ctx context.Context, clean bool, reason packet.ReasonCode, expiry *uint32) {
	g := c.g
	g.mu.Lock()
	if g.clients[c.ckey] == c {
		delete(g.clients, c.ckey)
	}
	delete(g.byID, c.id)
	g.mu.Unlock()
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
				unacked = append(unacked, newOutMsg(e.m, e.t))
			}
		}
		f.queue, f.inflight, f.early = nil, nil, nil
	}
	c.mu.Unlock()
	// Report the end only after the connection's own writes (subscription
	// changes above all) are in the log, so that the session service's
	// removals come after them in every partition.
	waited := make(chan struct{})
	go func() { c.writing.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(g.cfg.SessionTimeout):
		g.log.Warn("log writes still pending at disconnect", "client", c.clientID, "tenant", c.tenant)
	}

	d := &eventspb.Disconnect{
		Connection:  c.id,
		Generation:  c.generation,
		ReasonCode:  uint32(reason),
		PublishWill: !clean,
	}
	if expiry != nil {
		d.SessionExpiryS = expiry
	}
	env := c.envelope(c.g.clock())
	env.Event = &eventspb.Envelope_Disconnect{Disconnect: d}
	rec := kafka.NewRecord(g.topics.Sessions.Name, c.rkey, kafka.PartitionByKey, env)
	// The connection's end must reach the session service even when the
	// gateway is shutting down.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.cfg.SessionTimeout)
	defer cancel()
	if err := g.kl.ProduceSync(pctx, rec); err != nil {
		g.log.Error("report disconnect", "client", c.clientID, "tenant", c.tenant, "err", err)
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
			c.add(Dropped, 1) // the session ends with the connection
		}
	}
}

// envelope returns a new event envelope of this connection's client,
// stamped now; the caller sets its Event.
func (c *conn) envelope(now interface{ UnixMicro() int64 }) *eventspb.Envelope {
	return &eventspb.Envelope{
		Tenant:      c.tenant,
		ClientId:    c.clientID,
		Gateway:     c.g.cfg.ID,
		TimestampUs: now.UnixMicro(),
	}
}

// newOutMsg is the outbound state of a delivery target. It keeps m and
// copies what it needs of t (whose Target may be reused).
func newOutMsg(m *eventspb.Message, t *eventspb.Target) *outMsg {
	om := &outMsg{msg: m, qos: byte(min(t.Qos, 2)), retain: t.Retain, dup: t.Dup, subIDs: slices.Clone(t.SubscriptionIds),
		shareGroup: t.ShareGroup, shareFilter: t.ShareFilter}
	if t.InboxSeq != 0 && t.PacketId != 0 && t.PacketId <= kafka.MaxInboxPacketID {
		om.inboxSeq, om.id = t.InboxSeq, uint16(t.PacketId)
		// A QoS 2 message the client PUBREC'd on an earlier connection:
		// only PUBREL is owed.
		om.pubrecd = t.Release && om.qos == 2
	}
	return om
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
	if !c.halfCloses() {
		c.close()
		return
	}
	_ = c.nc.SetReadDeadline(time.Unix(1, 0))
	if c.parkable {
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
	if c.parkable {
		c.g.park.closed(c)
	}
}

// writeNow writes b directly (before the connection is established).
func (c *conn) writeNow(b []byte) {
	_ = c.nc.SetWriteDeadline(c.g.clock().Add(c.g.cfg.WriteTimeout))
	n, _ := c.nc.Write(b)
	c.add(BytesSent, int64(n))
}

// kickFlush queues the connection for a writer if it has bytes to write
// and none is on it already.
func (c *conn) kickFlush() {
	c.mu.Lock()
	start := c.startFlushLocked()
	c.mu.Unlock()
	if start {
		c.g.writes.push(c)
	}
}

// startFlushLocked marks the connection flushing and reports whether the
// caller must queue it (writeQueue.push): it has bytes to write, and no
// writer has it yet. Holds c.mu.
func (c *conn) startFlushLocked() bool {
	if c.flushing || c.closed || c.flow == nil || c.out.len() == 0 {
		return false
	}
	c.flushing = true
	return true
}

// flushLoop is the blocking path of a flushing connection: it writes the
// rest of w (rest, the part of w a non-blocking write left, or all of w
// when rest is nil) with the write timeout, then the out buffer until it
// is empty. Writers append under mu while a write is in progress; the
// buffers are swapped, not copied.
func (c *conn) flushLoop(w outBuf, rest net.Buffers) {
	for {
		_ = c.nc.SetWriteDeadline(c.g.clock().Add(c.g.cfg.WriteTimeout))
		var n int64
		var err error
		if rest != nil {
			n, err = rest.WriteTo(c.nc)
			rest = nil
		} else {
			n, err = w.writeTo(c.nc)
		}
		c.add(BytesSent, n)
		w.reset()
		c.mu.Lock()
		c.spare = w // the flow stays while a flush is under way
		if err != nil {
			c.flushing = false
			c.mu.Unlock()
			c.g.log.Debug("write", "client", c.clientID, "err", err)
			c.close()
			return
		}
		if c.flow == nil || c.out.len() == 0 || c.closed {
			c.flushing = false
			c.restLocked()
			c.mu.Unlock()
			return
		}
		w = c.out
		c.out, c.spare = c.spare, outBuf{}
		c.mu.Unlock()
	}
}

// flushNow waits for any running flusher and writes what is left, so that
// a final DISCONNECT leaves before the socket is shut down (closeWrite).
func (c *conn) flushNow() {
	deadline := c.g.clock().Add(c.g.cfg.WriteTimeout)
	for {
		c.mu.Lock()
		if !c.flushing {
			c.flushing = true
			var w outBuf
			if c.flow != nil {
				w, c.out = c.out, outBuf{}
			}
			c.mu.Unlock()
			if w.len() > 0 {
				_ = c.nc.SetWriteDeadline(deadline)
				n, _ := w.writeTo(c.nc)
				c.add(BytesSent, n)
			}
			c.mu.Lock()
			c.flushing = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		if c.g.clock().After(deadline) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// stringBytes views s as bytes without copying, for encoders that only
// read: the strings come from decoded delivery records and are immutable.
func stringBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// validPayloadUTF8 checks a payload marked as UTF-8 text.
func validPayloadUTF8(b []byte) bool { return utf8.Valid(b) }
