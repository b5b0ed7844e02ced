package gateway

import (
	"context"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/shoal-mqtt/shoal/gateway/listener"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
	"go.opentelemetry.io/otel/trace"
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
	ident           *Identity   // who the CONNECT proved to be (authn.go); nil when anonymous
	expiry          *time.Timer // closes the connection when ident expires; nil when it does not
	perms           Permissions // what the ACL lets the client do; nil without an ACL
	clientsKey      string      // key in Gateway.clients
	clientRecordKey []byte      // Kafka key of the client's records: tenant/client
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
	// For an operator's listing (admin.go): the client's address, when
	// the session service was asked (unix ns), and the listener
	// (listenerCode).
	clientAddr  net.Addr
	connectedAt int64
	listener    uint8
	// q is the connection's share of the tenant's quotas (quota.go); nil
	// when the tenant has none.
	q *connQuota

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
	// routerParts are the partitions of shoal.messages in which the
	// connection wrote state of its session for the routers (subscription
	// changes, kept QoS 2 identifiers), for its Disconnect. The reader's,
	// then end's.
	routerParts partSet

	// The connection's writer (who set flushing) only.
	nonBlocking      nonBlockingWriter // nil: writes block (flushLoop)
	nonBlockingKnown bool

	// closing is set by the first closeWrite (a server-initiated close:
	// DISCONNECT sent, the socket half-closed); the connection's reader
	// then discards input and ends it. Atomic: the reader and the poller
	// look at it without mu.
	closing atomic.Bool

	mu    sync.Mutex
	ready bool // CONNACK queued: deliveries may be written
	// earlyDraining is set while queueConnack delivers the deliveries
	// that came before the CONNACK: newer ones join them (c.early) rather
	// than overtake them, which would break their order, and drop every
	// held inbox entry as a repeat of the newer one's sequence number.
	earlyDraining bool
	closed        bool // nothing more is queued for the writers (closeWrite, finish)
	flushing      bool
	resting       bool // the reader parked: the flusher drops the flow state it leaves idle
	// closeAfterConnack records a close asked for before CONNACK was
	// queued (a takeover, the gateway stopping): the handshake queues
	// CONNACK, then closes with closeCode [MQTT-3.2.0-1]. closeCode is the
	// reason of a server-initiated close, set before closing.
	closeAfterConnack bool
	closeCode         packet.ReasonCode
	*flow             // nil while no traffic is under way: see flow
	// seen is, per partition of shoal.messages, the newest record (and
	// delivery of it) a delivery to this connection was made for (see
	// freshLocked).
	seen []seenSource
	// lastInboxSeq is the newest inbox entry forwarded to this connection.
	lastInboxSeq uint64
	aliasOut     map[string]uint16
	subs         map[string]*eventspb.SubscriptionOptions // filter as subscribed → options; nil until the first

	// tcp is the TCP socket when nc's bytes are its own (listener.Conn.Raw
	// is a *net.TCPConn), else nil: its deadlines may pass and be set
	// again (readLoop), unlike a WebSocket connection's, and its descriptor
	// is read and written without blocking (park.go, writenb_linux.go).
	// The concrete type keeps those reads and writes free of allocations:
	// the compiler sees through tcp.SyscallConn to the closures it runs.
	tcp *net.TCPConn
	// Parking (park.go): parking is guarded by the poller's mutex.
	parking parkState
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
// which nothing in flight can tell. The non-blocking writer goes with it
// (its raw connection and iovecs, 56 bytes in two objects of the size
// classes the socket's own addresses fill, where they kept spans of a
// wave's garbage alive): the next writer makes it again. No writer is
// under way (flushing), and the next one sets flushing under c.mu before
// it looks. Holds c.mu.
func (c *conn) dropIdleFlow() {
	f := c.flow
	if f != nil && !c.flushing && f.out.len() == 0 && len(f.early) == 0 && len(f.acks) == 0 &&
		len(f.inflight) == 0 && len(f.queue) == 0 && len(f.pendingInboxAcks) == 0 {
		c.flow = nil
		c.nonBlocking, c.nonBlockingKnown = nil, false
	}
}

// earlyDelivery is a delivery that arrived between the session service's
// answer and the CONNACK.
type earlyDelivery struct {
	m   *eventspb.Message
	t   *eventspb.Target
	mid messageID
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
	// tooLarge says the log refused a record as larger than it accepts.
	tooLarge bool
	// uncounted marks a PUBCOMP for an identifier an earlier connection
	// of the session received: not in this connection's receive window.
	uncounted bool
	// span is the PUBLISH's mqtt.publish span, ended when the ack is
	// written (tracing on).
	span trace.Span
	// received is when the PUBLISH a PUBACK or PUBREC answers was read
	// (unix ns, the gateway's clock), for shoal.gateway.puback.duration;
	// 0 for the acknowledgements not measured (metrics.go).
	received int64
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
	pubrecd                 bool   // QoS 2: PUBREC received, PUBREL sent (or owed: relWait)
	// relWait: the PUBREC of an inbox message is being written to the
	// log; its PUBREL goes out once the write is durable (outbound.go,
	// releaseWhenRecorded).
	relWait bool
	span    trace.Span // mqtt.deliver, until acknowledged (sampled traces only)
	// inboxSeq is set for a message of the session's inbox (Target
	// inbox_seq): it has the packet identifier the session service gave
	// it, its acknowledgements go back as InboxAck, and it stays with the
	// session (never returned) when the connection ends.
	inboxSeq uint64
	// mid is the message's identifier, for audit.record_acks.
	mid messageID
}

// newConn makes the connection of stream nc; raw is its socket when nc's
// bytes are the socket's own (listener.Conn.Raw), else nil.
func newConn(g *Gateway, nc net.Conn, raw syscall.Conn) *conn {
	c := &conn{g: g, nc: nc, id: g.connSeq.Add(1)}
	c.tcp, _ = raw.(*net.TCPConn)
	c.rd.Init((*socket)(c), readBufferSize)
	c.rd.MaxPacketSize = g.cfg.MaxPacketSize
	return c
}

// parkable reports whether the connection can be parked: a TCP socket read
// directly, on a gateway that runs a poller (set by Run before any
// connection is accepted).
func (c *conn) parkable() bool { return c.tcp != nil && c.g.park != nil }

// ending is how a connection ended: whether the client's DISCONNECT
// suppresses the will, the reason code, a session expiry sent with
// DISCONNECT (nil if none), and whether the server closes it (server: a
// DISCONNECT with the reason, then the graceful close of closeWrite); why,
// for its log line (cause, and err, the client's fault, if any).
type ending struct {
	clean  bool
	reason packet.ReasonCode
	cause  closeCause
	expiry *uint32
	server bool
	err    error
}

// errClose ends a connection; code is the reason sent in a 5.0 DISCONNECT
// (none when 0 and not a protocol fault).
type errClose struct {
	code packet.ReasonCode
	msg  string
}

func (e *errClose) Error() string { return e.msg + " (" + e.code.String() + ")" }

func closeWith(code packet.ReasonCode, msg string) error { return &errClose{code: code, msg: msg} }

// serve runs one connection, whichever listener accepted it, until it
// ends or its reader parks it (a listener.Handler).
func (g *Gateway) serve(ctx context.Context, lc *listener.Conn) {
	nc := lc.NetConn
	if !g.live.add() {
		_ = nc.Close() // shutting down
		return
	}
	c := newConn(g, nc, lc.Raw)
	c.clientAddr, c.listener = lc.ClientAddr, listenerCode(lc.Listener)
	if !c.handshake(ctx, lc.ClientAddr, lc.PeerCertificate()) {
		c.releaseQuota()
		if c.refused && c.halfClose() {
			c.drain() // the client reads the CONNACK's reason code, then the end of the stream
		}
		_ = nc.Close()
		g.live.done()
		return
	}
	c.add(ConnectionsCurrent, 1)
	c.add(ConnectionsTotal, 1)
	c.logAccepted(ctx)
	c.lastPacket = g.clock().UnixNano()
	c.closeAtExpiry()
	if g.live.closed() {
		c.shutdown() // accepted as the gateway began to stop: closeAll missed it
	}
	c.serveReads(ctx, true)
}

// serveReads reads packets until the connection ends, then finishes it,
// or until the connection parks (park.go), leaving it to the poller. fresh
// says the connection has just been accepted: it parks sooner while the
// client says nothing (readLoop).
func (c *conn) serveReads(ctx context.Context, fresh bool) {
	e, parked := c.readLoop(fresh)
	if parked {
		return
	}
	c.end(ctx, e)
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

// messageID is a message's identifier (eventspb.MessageID's fields) as a
// value the connection can keep and copy.
type messageID struct{ epoch, seq uint64 }

// String is the id as shoal replay and shoal trace print it.
func (m messageID) String() string {
	return string(kafka.AppendMessageID(make([]byte, 0, 36), m.epoch, m.seq))
}

// idOf returns id's fields; zero for nil.
func idOf(id *eventspb.MessageID) messageID {
	if id == nil {
		return messageID{}
	}
	return messageID{id.GatewayEpoch, id.Seq}
}

// newOutMsg is the outbound state of a delivery target. It keeps m and
// copies what it needs of t (whose Target may be reused).
func newOutMsg(m *eventspb.Message, t *eventspb.Target, mid messageID) *outMsg {
	om := &outMsg{msg: m, qos: byte(min(t.Qos, 2)), retain: t.Retain, dup: t.Dup, subIDs: slices.Clone(t.SubscriptionIds),
		shareGroup: t.ShareGroup, shareFilter: t.ShareFilter, mid: mid}
	if t.InboxSeq != 0 && t.PacketId != 0 && t.PacketId <= kafka.MaxInboxPacketID {
		om.inboxSeq, om.id = t.InboxSeq, uint16(t.PacketId)
		// A QoS 2 message the client PUBREC'd on an earlier connection:
		// only PUBREL is owed.
		om.pubrecd = t.Release && om.qos == 2
	}
	return om
}

// stringBytes views s as bytes without copying, for encoders that only
// read: the strings come from decoded delivery records and are immutable.
func stringBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// validPayloadUTF8 checks a payload marked as UTF-8 text.
func validPayloadUTF8(b []byte) bool { return utf8.Valid(b) }
