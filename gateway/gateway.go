package gateway

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoal-mqtt/shoal/gateway/listener"
	"github.com/shoal-mqtt/shoal/gateway/quota"
	"github.com/shoal-mqtt/shoal/internal/obs"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// Log is what the gateway needs of the event log; *kafka.Client has it.
type Log interface {
	Produce(ctx context.Context, r *kafka.Record, done func(*kafka.Record, error))
	ProduceSync(ctx context.Context, rs ...*kafka.Record) error
	Consume(ctx context.Context, cfg kafka.ConsumeConfig, handle func(context.Context, kafka.Batch) error) error
	Partitions(topic string) int32
	Catalogue() kafka.Catalogue
}

// backgroundLog is a Log that can hold records nobody waits for back, to
// share requests (*kafka.Client: Config.BackgroundLinger).
type backgroundLog interface {
	ProduceBackground(r *kafka.Record, done func(*kafka.Record, error))
	// SendBackground sends the held records now: the caller is about to
	// wait for them.
	SendBackground()
}

// Producer is the part of Log that writes.
type Producer interface {
	Produce(ctx context.Context, r *kafka.Record, done func(*kafka.Record, error))
	ProduceSync(ctx context.Context, rs ...*kafka.Record) error
}

// producer returns the producer of topic's records (WithSessionLog).
func (g *Gateway) producer(topic string) Producer {
	if g.splitLog && topic == g.topics.Sessions.Name {
		return g.sessionLog
	}
	return g.eventLog
}

// produceSync writes rs, each through the producer of its topic, and
// waits until Kafka has them all.
func (g *Gateway) produceSync(ctx context.Context, rs ...*kafka.Record) error {
	if !g.splitLog {
		return g.eventLog.ProduceSync(ctx, rs...)
	}
	var sess, other []*kafka.Record
	for _, r := range rs {
		if r.Topic == g.topics.Sessions.Name {
			sess = append(sess, r)
		} else {
			other = append(other, r)
		}
	}
	switch {
	case len(other) == 0:
		return g.sessionLog.ProduceSync(ctx, sess...)
	case len(sess) == 0:
		return g.eventLog.ProduceSync(ctx, other...)
	}
	sessErr := make(chan error, 1)
	go func() { sessErr <- g.sessionLog.ProduceSync(ctx, sess...) }()
	err := g.eventLog.ProduceSync(ctx, other...)
	return errors.Join(err, <-sessErr)
}

// Gateway terminates MQTT connections and bridges them to the log.
type Gateway struct {
	cfg      Config
	log      *slog.Logger
	eventLog Log
	// clock is baseClock corrected by skew (clock.go): what the gateway
	// stamps and compares. baseClock, the clock New was given, times the
	// slot lease.
	clock     func() time.Time
	baseClock func() time.Time
	skew      clockSkew
	epoch     uint64 // random per start: the gateway_epoch of message ids
	// tel is what the gateway reports through (WithTelemetry).
	tel obs.Providers
	met *gatewayMetrics // its instruments (metrics.go), made from tel
	// topics is the log's catalogue, which names the topics.
	topics kafka.Catalogue
	// express is the router of the process (WithExpress); nil:
	// none.
	express Express
	// room tells whether the process's router keeps up with a partition
	// of shoal.messages (eventLog's, when it has a feed: kafka.Client.Room);
	// nil: nothing to wait for (conn.waitRoom).
	room interface {
		Room(topic string, p int32) bool
	}
	roomGates []roomGate // one per partition of shoal.messages, with room
	// background writes the express path's publish records, which nobody
	// waits for, when eventLog can hold them back to share requests
	// (kafka.Client.ProduceBackground); nil: eventLog.Produce.
	background backgroundLog
	// sessionLog writes the records for shoal.sessions when splitLog
	// (WithSessionLog); otherwise eventLog writes every record.
	sessionLog Producer
	splitLog   bool

	seq      atomic.Uint64 // message id sequence
	connSeq  atomic.Uint64 // connection ids
	reqSeq   atomic.Uint64 // connect request ids
	msgParts int32         // partitions of shoal.messages

	writes   *writeQueue // connections waiting for a writer
	live     liveConns   // connections being served, until their end is reported
	dispatch struct {    // scratch of deliver (slot consumer or hand-off, under handoff.mu)
		conns, flush []*conn
		cache        publishCache
	}
	slotDec slotDecoder      // slot consumer only (or a hand-off, under handoff.mu)
	handoff handoff          // the router's hand-off in shoal all (handoff.go)
	recs    kafka.RecordPool // records of publishes and Connects, back when produced
	scratch sync.Pool        // *publishScratch

	leaser SlotLeaser   // nil: the slot is Config.Slot, not leased
	slot   atomic.Int32 // the owned slot, set by Run before anything uses it
	// markerOffset is the offset of this run's marker in its slot, set by
	// Run before the first heartbeat (which carries it).
	markerOffset int64

	// park watches idle connections without a goroutine (park.go); nil
	// when parking is off or unsupported. Set by Run before the listeners
	// open.
	park   *poller
	parked atomic.Int64 // connections parked now
	parks  atomic.Int64 // parks since start

	// quotas are the tenants' limits (quota.go); nil: none. Set before
	// Run. share is their backend when it is shared with the other
	// gateways (quotashare.go), nil otherwise.
	quotas *quota.Quotas
	share  *quota.Shared

	mu      sync.RWMutex
	clients map[string]*conn // tenant + "\x00" + client id → connection
	byID    map[uint64]*conn
	waiting map[uint64]waiter // connect requests awaiting the session service
	order   readOrder         // subscription changes before the publishes read after them (order.go)
	tenants map[string]*Stats // per-tenant counters for $SYS

	auth      Auth          // how CONNECTs are authenticated (authn.go); set before Run
	closeLog  closeLimiter  // how often each client's closes are logged (connlog.go)
	authSlots chan struct{} // bounds the password checks running at once

	// beforeConnack, set only by tests, runs in the handshake of an
	// accepted connection just before its CONNACK is queued: a test holds
	// the CONNACK there to order a takeover before it.
	beforeConnack func(*conn)
	// afterConnack, set only by tests, runs right after the CONNACK is
	// queued, before the deliveries held for it go out.
	afterConnack func(*conn)
	// subscribeRead, set only by tests, runs when a SUBSCRIBE or
	// UNSUBSCRIBE was read, before it is handled: a test holds it there
	// to read a PUBLISH on another connection meanwhile.
	subscribeRead func(*conn)

	ready atomic.Bool
	// kafkaCut is set while no broker of the log answered for
	// Config.KafkaTimeout (kafkawatch.go).
	kafkaCut atomic.Bool
	addrsMu  sync.Mutex
	addrs    map[string]net.Addr // listener name → bound address
	// certs is the TLS listeners' material, set when they open (nil
	// without them): listeners.go.
	certs atomic.Pointer[listener.Certificates]

	version string

	Stats Stats
}

// Stats are the gateway's counters, read by $SYS and /metrics; the
// gateway keeps one set in total and one per tenant.
type Stats struct {
	c [numCounters]atomic.Int64
}

// Counter names one of the gateway's counters.
type Counter int

// The counters.
const (
	ConnectionsCurrent Counter = iota // connections established now
	ConnectionsTotal                  // connections established since start
	MessagesReceived                  // PUBLISH packets received from clients
	MessagesSent                      // PUBLISH packets sent to clients
	BytesReceived                     // bytes of packets received
	BytesSent                         // bytes written to clients
	Dropped                           // messages dropped: queue or buffer full, too large for the client
	ACLDenied                         // publishes, subscriptions and deliveries the ACL refused
	AuthFailures                      // CONNECTs refused for bad credentials or none
	numCounters
)

// Load returns the value of counter k.
func (s *Stats) Load(k Counter) int64 { return s.c[k].Load() }

// add adds n to counter k of the gateway and of the connection's tenant.
func (c *conn) add(k Counter, n int64) {
	c.g.Stats.c[k].Add(n)
	if c.ts != nil {
		c.ts.c[k].Add(n)
	}
}

// New returns a gateway that writes to and reads from eventLog, complete
// with what opts give it. clock may be nil (time.Now); version is the
// version it publishes in $SYS/broker/version.
func New(cfg Config, eventLog Log, log *slog.Logger, clock func() time.Time, version string, opts ...Option) (*Gateway, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if clock == nil {
		clock = time.Now
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("gateway epoch: %w", err)
	}
	topics := eventLog.Catalogue()
	g := &Gateway{
		tel:       obs.Providers{}.WithDefaults(),
		cfg:       cfg,
		log:       log.With("role", "gateway", "gateway", cfg.ID),
		eventLog:  eventLog,
		baseClock: clock,
		epoch:     binary.BigEndian.Uint64(b[:]),
		topics:    topics,
		authSlots: make(chan struct{}, runtime.GOMAXPROCS(0)),
		msgParts:  eventLog.Partitions(topics.Messages.Name),
		clients:   make(map[string]*conn),
		byID:      make(map[uint64]*conn),
		waiting:   make(map[uint64]waiter),
		tenants:   make(map[string]*Stats),
		addrs:     make(map[string]net.Addr),
		version:   version,
		writes:    newWriteQueue(),
	}
	g.clock = g.skew.correctedClock(clock)
	for _, o := range opts {
		o(g)
	}
	g.useTelemetry(g.tel)
	if r, ok := eventLog.(interface{ Room(string, int32) bool }); ok {
		g.room, g.roomGates = r, make([]roomGate, g.msgParts)
	}
	if b, ok := eventLog.(backgroundLog); ok {
		g.background = b
	}
	// Connection ids must not repeat across restarts of this gateway: the
	// log still names connections of the previous run (routes, kicks).
	g.connSeq.Store(g.epoch << 24)
	g.order.init()
	return g, nil
}

// Ready reports whether the gateway consumes its slot and accepts
// clients: not while it is cut off from Kafka (kafkawatch.go).
func (g *Gateway) Ready() bool { return g.ready.Load() && !g.kafkaCut.Load() }

// Parked returns the number of connections parked now (their socket
// watched by the poller, without a reader goroutine).
func (g *Gateway) Parked() int64 { return g.parked.Load() }

// Parks returns the number of times a connection was parked since start.
func (g *Gateway) Parks() int64 { return g.parks.Load() }

// Run consumes the gateway's slot of shoal.deliveries, then opens the
// listeners, until ctx is done. Its steps: lease the slot, write this
// run's marker to it and consume the slot from there (writeMarker,
// consumeSlot), announce the run (the first heartbeat), keep the slot
// (keepSlot), start the poller, open and serve the listeners; at the end,
// close everything down (stopServing).
func (g *Gateway) Run(ctx context.Context) error {
	if g.share != nil && g.share.Gateway() != g.cfg.ID {
		return fmt.Errorf("gateway: the shared quotas count for gateway %q, this is %q", g.share.Gateway(), g.cfg.ID)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	leasedAt, err := g.leaseSlot(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("gateway: %w", err)
	}
	marker, err := g.writeMarker(ctx)
	if err != nil {
		return err
	}
	// The first error of the goroutines that can fail: the slot consumer,
	// the lease renewal and each of the (four) listeners.
	errc := make(chan error, 6)
	var wg sync.WaitGroup
	positioned := g.consumeSlot(ctx, marker, &wg, errc)
	select {
	case <-positioned:
	case err := <-errc:
		return err
	case <-ctx.Done():
		wg.Wait()
		return nil
	}
	// The first heartbeat precedes every Connect of this run in each
	// partition of shoal.sessions: the session service learns of the
	// restart (a new connection base on the slot) before any new client.
	if err := g.heartbeat(ctx); err != nil {
		cancel()
		wg.Wait()
		return fmt.Errorf("gateway: first heartbeat: %w", err)
	}
	g.keepSlot(ctx, leasedAt, &wg, errc)
	if g.share != nil {
		g.shareQuotas(ctx, &wg)
		defer g.leaveQuotas() // after wg.Wait: the connections have ended
	}
	if p := g.startPoller(ctx); p != nil {
		defer p.stop()
	}
	listeners, err := g.openListeners()
	if err != nil {
		cancel()
		wg.Wait()
		return err
	}
	g.serveListeners(ctx, listeners, &wg, errc)
	wg.Add(1)
	go func() { defer wg.Done(); g.sysLoop(ctx, g.version) }()
	if p, ok := g.eventLog.(kafkaProber); ok && g.cfg.KafkaTimeout > 0 {
		wg.Go(func() { g.watchKafka(ctx, p) })
	}
	g.ready.Store(true)
	g.log.Info("gateway ready", "slot", g.slot.Load(), "mqtt", g.Addr("mqtt"), "ws", g.Addr("ws"),
		"mqtts", g.Addr("mqtts"), "wss", g.Addr("wss"))

	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	g.ready.Store(false)
	cancel()
	g.stopServing(listeners)
	wg.Wait()
	return err
}

// keepSlot keeps the slot this run's, on goroutines of wg until ctx ends:
// heartbeats every Config.Heartbeat, and lease renewals, whose loss it
// sends to errc.
func (g *Gateway) keepSlot(ctx context.Context, leasedAt time.Time, wg *sync.WaitGroup, errc chan<- error) {
	wg.Add(1)
	go func() { defer wg.Done(); g.heartbeatLoop(ctx) }()
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := g.renewLoop(ctx, leasedAt); err != nil {
			errc <- fmt.Errorf("gateway: %w", err)
		}
	}()
}

// stopServing closes the listeners and every connection (shutdown), and
// waits for the connections to report their ends.
func (g *Gateway) stopServing(listeners []listener.Listener) {
	closeListeners(listeners)
	g.live.close()
	g.closeAll()
	// Every connection reports its end (its Disconnect record, its
	// unacknowledged messages) before Run returns and the process closes
	// its log client. Each end is bounded by the session timeout, twice.
	if n := g.live.wait(2*g.cfg.SessionTimeout + time.Second); n > 0 {
		g.log.Warn("connections still ending at shutdown", "connections", n)
	}
}

// liveConns counts the connections being served, from accept until their
// end is reported (conn.end), so that shutdown waits for them. Once closed
// it refuses new ones.
type liveConns struct {
	mu      sync.Mutex
	n       int
	closing bool
	zero    chan struct{} // closed when n is 0 while closing; made by close
}

// add counts a new connection; false means the gateway is shutting down.
func (l *liveConns) add() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing {
		return false
	}
	l.n++
	return true
}

// done uncounts a connection.
func (l *liveConns) done() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n--
	if l.n == 0 && l.closing {
		close(l.zero)
	}
}

// close refuses new connections from now on.
func (l *liveConns) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing {
		return
	}
	l.closing = true
	l.zero = make(chan struct{})
	if l.n == 0 {
		close(l.zero)
	}
}

// closed reports whether close was called.
func (l *liveConns) closed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closing
}

// wait waits at most d for every connection to end (after close) and
// returns how many are still being served.
func (l *liveConns) wait(d time.Duration) int {
	l.mu.Lock()
	zero := l.zero
	l.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-zero:
	case <-t.C:
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// connBase is the first connection id of this run: connection ids of one
// run share their upper 40 bits with it. It names the run in heartbeats and
// in the slot marker.
func (g *Gateway) connBase() uint64 { return g.epoch << 24 }

// ErrSlotTaken is what a SlotTakenError matches with errors.Is.
var ErrSlotTaken = errors.New("slot taken over by another gateway run")

// SlotTakenError is returned by Run (wrapped) when the gateway read, on its
// slot, the marker of another run: another gateway, or this one restarted,
// owns the slot now (this run was paused past its lease, or two gateways
// were given one slot). The gateway handled nothing of the slot after that
// marker and closed its listeners and connections.
type SlotTakenError struct {
	Slot    int32
	Gateway string // the gateway.id in the marker
	Run     uint64 // the marker's connection base
	Offset  int64  // the marker's offset in shoal.deliveries
	Own     uint64 // this run's connection base
}

func (e *SlotTakenError) Error() string {
	return fmt.Sprintf("slot %d taken over by gateway %q (run %#x, marker at offset %d); this run (%#x) stops",
		e.Slot, e.Gateway, e.Run, e.Offset, e.Own)
}

// Is makes errors.Is(err, ErrSlotTaken) hold.
func (e *SlotTakenError) Is(target error) bool { return target == ErrSlotTaken }

// heartbeat writes a GatewayHeartbeat to every partition of shoal.sessions
// and waits until Kafka has them.
func (g *Gateway) heartbeat(ctx context.Context) error {
	n := g.eventLog.Partitions(g.topics.Sessions.Name)
	key := fmt.Appendf(nil, "\x00gw/%d", g.slot.Load()) // no tenant/client key starts with NUL
	env := &eventspb.Envelope{
		Gateway:     g.cfg.ID,
		TimestampUs: g.clock().UnixMicro(),
		Event: &eventspb.Envelope_GatewayHeartbeat{GatewayHeartbeat: &eventspb.GatewayHeartbeat{
			Slot: g.slot.Load(), IntervalMs: g.cfg.Heartbeat.Milliseconds(), ConnectionBase: g.connBase(),
			MarkerOffset: g.markerOffset,
		}},
	}
	rs := make([]*kafka.Record, n)
	for p := range n {
		rs[p] = kafka.NewRecord(g.topics.Sessions.Name, key, p, env)
	}
	return g.produceSync(ctx, rs...)
}

// heartbeatLoop writes heartbeats every Config.Heartbeat until ctx ends. A
// failed write is logged; the next one tries again.
func (g *Gateway) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(g.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := g.heartbeat(ctx); err != nil && ctx.Err() == nil {
			g.log.Warn("write heartbeat", "slot", g.slot.Load(), "err", err)
		}
	}
}

// appendConns appends every registered connection to cs.
func (g *Gateway) appendConns(cs []*conn) []*conn {
	g.mu.RLock()
	defer g.mu.RUnlock()
	for _, c := range g.byID {
		cs = append(cs, c)
	}
	return cs
}

// closeAll closes every connection (shutdown).
func (g *Gateway) closeAll() {
	conns := g.appendConns(nil)
	g.logShutdown(len(conns))
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() { defer wg.Done(); c.shutdown() }()
	}
	wg.Wait()
}

// nextMessageID returns a new message identity.
func (g *Gateway) nextMessageID() *eventspb.MessageID {
	return &eventspb.MessageID{GatewayEpoch: g.epoch, Seq: g.seq.Add(1)}
}

func clientKey(tenant, clientID string) string { return tenant + "\x00" + clientID }
