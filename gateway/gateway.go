package gateway

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

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

// Gateway terminates MQTT connections and bridges them to the log.
type Gateway struct {
	cfg   Config
	log   *slog.Logger
	kl    Log
	clock func() time.Time
	epoch uint64 // random per start: the gateway_epoch of message ids
	// topics is the log's catalogue, which names the topics.
	topics kafka.Catalogue

	seq      atomic.Uint64 // message id sequence
	connSeq  atomic.Uint64 // connection ids
	reqSeq   atomic.Uint64 // connect request ids
	msgParts int32         // partitions of shoal.messages

	writes   *writeQueue // connections waiting for a writer
	live     liveConns   // connections being served, until their end is reported
	dispatch struct {    // scratch of deliver (slot consumer only)
		conns, flush []*conn
		cache        publishCache
	}
	slotDec slotDecoder      // slot consumer only
	recs    kafka.RecordPool // records of publishes, back when produced
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

	mu      sync.RWMutex
	clients map[string]*conn // tenant + "\x00" + client id → connection
	byID    map[uint64]*conn
	waiting map[uint64]waiter // connect requests awaiting the session service
	order   readOrder         // subscription changes before the publishes read after them (order.go)
	tenants map[string]*Stats // per-tenant counters for $SYS

	// beforeConnack, set only by tests, runs in the handshake of an
	// accepted connection just before its CONNACK is queued: a test holds
	// the CONNACK there to order a takeover before it.
	beforeConnack func(*conn)
	// subscribeRead, set only by tests, runs when a SUBSCRIBE or
	// UNSUBSCRIBE was read, before it is handled: a test holds it there
	// to read a PUBLISH on another connection meanwhile.
	subscribeRead func(*conn)

	ready   atomic.Bool
	addrsMu sync.Mutex
	addrs   map[string]net.Addr // listener name → bound address

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

// New returns a gateway. clock may be nil (time.Now).
func New(cfg Config, kl Log, log *slog.Logger, clock func() time.Time) (*Gateway, error) {
	return NewVersion(cfg, kl, log, clock, "dev")
}

// NewVersion is New with the version published in $SYS/broker/version.
func NewVersion(cfg Config, kl Log, log *slog.Logger, clock func() time.Time, version string) (*Gateway, error) {
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
	topics := kl.Catalogue()
	g := &Gateway{
		cfg:      cfg,
		log:      log.With("role", "gateway", "gateway", cfg.ID),
		kl:       kl,
		clock:    clock,
		epoch:    binary.BigEndian.Uint64(b[:]),
		topics:   topics,
		msgParts: kl.Partitions(topics.Messages.Name),
		clients:  make(map[string]*conn),
		byID:     make(map[uint64]*conn),
		waiting:  make(map[uint64]waiter),
		tenants:  make(map[string]*Stats),
		addrs:    make(map[string]net.Addr),
		version:  version,
		writes:   newWriteQueue(),
	}
	// Connection ids must not repeat across restarts of this gateway: the
	// log still names connections of the previous run (routes, kicks).
	g.connSeq.Store(g.epoch << 24)
	g.order.init()
	return g, nil
}

// Ready reports whether the gateway consumes its slot and accepts clients.
func (g *Gateway) Ready() bool { return g.ready.Load() }

// Parked returns the number of connections parked now (their socket
// watched by the poller, without a reader goroutine).
func (g *Gateway) Parked() int64 { return g.parked.Load() }

// Parks returns the number of times a connection was parked since start.
func (g *Gateway) Parks() int64 { return g.parks.Load() }

// Addr returns the bound address of a listener ("mqtt" or "ws"), or nil.
func (g *Gateway) Addr(name string) net.Addr {
	g.addrsMu.Lock()
	defer g.addrsMu.Unlock()
	return g.addrs[name]
}

// Run consumes the gateway's slot of shoal.deliveries, then opens the
// listeners, until ctx is done.
func (g *Gateway) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	leasedAt, err := g.leaseSlot(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("gateway: %w", err)
	}

	// Position the slot consumer: a marker record written to our own slot
	// gives an offset at which every later answer to us is found. The
	// marker names this run, and fences off an earlier run that still
	// reads the slot (handleDeliveries).
	marker := kafka.NewRecord(g.topics.Deliveries.Name, nil, g.slot.Load(), &eventspb.Envelope{
		Gateway:     g.cfg.ID,
		TimestampUs: g.clock().UnixMicro(),
		Event: &eventspb.Envelope_GatewayHeartbeat{GatewayHeartbeat: &eventspb.GatewayHeartbeat{
			Slot: g.slot.Load(), ConnectionBase: g.connBase(),
		}},
	})
	if err := g.kl.ProduceSync(ctx, marker); err != nil {
		return fmt.Errorf("gateway: write slot marker: %w", err)
	}
	g.markerOffset = marker.Offset
	positioned := make(chan struct{})
	var once sync.Once
	errc := make(chan error, 4)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := g.kl.Consume(ctx, kafka.ConsumeConfig{
			Topic:      g.topics.Deliveries.Name,
			Partitions: []int32{g.slot.Load()},
			Start:      func(int32) int64 { return marker.Offset },
			Reuse:      true, // the slot decoder keeps no record, only bytes they refer to
		}, func(ctx context.Context, b kafka.Batch) error {
			once.Do(func() { close(positioned) })
			return g.handleDeliveries(b)
		})
		var taken *SlotTakenError
		switch {
		case errors.As(err, &taken):
			g.log.Error("slot taken over by another gateway run; stopping", "slot", taken.Slot,
				"by", taken.Gateway, "run", fmt.Sprintf("%#x", taken.Run), "offset", taken.Offset)
			errc <- fmt.Errorf("gateway: %w", taken)
		case err != nil:
			errc <- fmt.Errorf("gateway: consume slot %d: %w", g.slot.Load(), err)
		}
	}()
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
	wg.Add(1)
	go func() { defer wg.Done(); g.heartbeatLoop(ctx) }()
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := g.renewLoop(ctx, leasedAt); err != nil {
			errc <- fmt.Errorf("gateway: %w", err)
		}
	}()

	if g.cfg.ParkIdle > 0 {
		p, err := newPoller(ctx, g)
		switch {
		case errors.Is(err, errors.ErrUnsupported):
			g.log.Info("idle connections keep their reader: parking is not supported here")
		case err != nil:
			g.log.Warn("idle connections keep their reader: no poller", "err", err)
		default:
			g.park = p
			defer p.stop()
		}
	}

	var listeners []net.Listener
	if g.cfg.MQTTListen != "" {
		ln, err := net.Listen("tcp", g.cfg.MQTTListen)
		if err != nil {
			cancel()
			wg.Wait()
			return fmt.Errorf("gateway: listen mqtt %s: %w", g.cfg.MQTTListen, err)
		}
		g.setAddr("mqtt", ln.Addr())
		listeners = append(listeners, ln)
		wg.Add(1)
		go func() { defer wg.Done(); g.acceptLoop(ctx, ln) }()
	}
	if g.cfg.WSListen != "" {
		ln, err := net.Listen("tcp", g.cfg.WSListen)
		if err != nil {
			cancel()
			for _, l := range listeners {
				_ = l.Close()
			}
			wg.Wait()
			return fmt.Errorf("gateway: listen websocket %s: %w", g.cfg.WSListen, err)
		}
		g.setAddr("ws", ln.Addr())
		listeners = append(listeners, ln)
		srv := &http.Server{Handler: g.wsHandler(ctx), ReadHeaderTimeout: g.cfg.ConnectTimeout}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && ctx.Err() == nil {
				errc <- fmt.Errorf("gateway: serve websocket: %w", err)
			}
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-ctx.Done()
			sctx, c := context.WithTimeout(context.Background(), time.Second)
			defer c()
			_ = srv.Shutdown(sctx)
		}()
	}
	wg.Add(1)
	go func() { defer wg.Done(); g.sysLoop(ctx, g.version) }()
	g.ready.Store(true)
	g.log.Info("gateway ready", "slot", g.slot.Load(), "mqtt", g.Addr("mqtt"), "ws", g.Addr("ws"))

	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	g.ready.Store(false)
	cancel()
	for _, l := range listeners {
		_ = l.Close()
	}
	g.live.close()
	g.closeAll()
	// Every connection reports its end (its Disconnect record, its
	// unacknowledged messages) before Run returns and the process closes
	// its log client. Each end is bounded by the session timeout, twice.
	if n := g.live.wait(2*g.cfg.SessionTimeout + time.Second); n > 0 {
		g.log.Warn("connections still ending at shutdown", "connections", n)
	}
	wg.Wait()
	return err
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
	n := g.kl.Partitions(g.topics.Sessions.Name)
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
	return g.kl.ProduceSync(ctx, rs...)
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

func (g *Gateway) setAddr(name string, a net.Addr) {
	g.addrsMu.Lock()
	g.addrs[name] = a
	g.addrsMu.Unlock()
}

func (g *Gateway) acceptLoop(ctx context.Context, ln net.Listener) {
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Temporary failure (e.g. out of file descriptors): back off.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			g.log.Warn("accept", "err", err, "retry_in", delay)
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return
			}
			continue
		}
		delay = 0
		go g.serve(ctx, nc)
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

// waiter is a connection waiting for its ConnectResult.
type waiter struct {
	c  *conn
	ch chan *eventspb.ConnectResult
}

func clientKey(tenant, clientID string) string { return tenant + "\x00" + clientID }

// handleDeliveries dispatches the records of our slot. The marker of
// another run (a GatewayHeartbeat with another gateway id or connection
// base) means that run owns the slot now: it returns a SlotTakenError at
// once, handling nothing after the marker, and the consumer stops.
func (g *Gateway) handleDeliveries(b kafka.Batch) error {
	dec := &g.slotDec
	for _, r := range b.Records {
		env, err := dec.decode(r)
		if err != nil {
			g.log.Error("decode delivery record", "offset", r.Offset, "err", err)
			continue
		}
		switch ev := env.Event.(type) {
		case *eventspb.Envelope_Delivery:
			if g.deliver(env.Tenant, ev.Delivery) {
				dec.keepMessage()
			}
		case *eventspb.Envelope_ConnectResult:
			res := ev.ConnectResult
			g.mu.Lock()
			w, ok := g.waiting[res.RequestId]
			// Request ids start again with every run: an answer for
			// another connection is an old run's, written again by a
			// session service replaying the log. The waiter keeps waiting.
			ok = ok && res.Connection == w.c.id
			if ok {
				delete(g.waiting, res.RequestId)
			}
			if ok && res.ReasonCode == 0 {
				// Register the connection before the next record of the
				// slot is handled: deliveries that follow the answer
				// (a resumed session's queued messages) must find it. They
				// wait in the connection until its CONNACK is queued.
				w.c.generation = res.Generation
				w.c.sessionGen = res.SessionGeneration
				if w.c.sessionGen == 0 {
					// A session service that does not name sessions.
					w.c.sessionGen = res.Generation
				}
				g.clients[w.c.ckey] = w.c
				g.byID[w.c.id] = w.c
			}
			g.mu.Unlock()
			if ok {
				w.ch <- res
			}
		case *eventspb.Envelope_Kick:
			g.mu.RLock()
			c := g.byID[ev.Kick.Connection]
			g.mu.RUnlock()
			if c != nil && c.tenant == env.Tenant && c.clientID == env.ClientId {
				// Before its CONNACK is queued the connection only records
				// the close, at once, for its handshake (CONNACK first);
				// otherwise the close writes to the socket, which never
				// blocks the slot consumer.
				if code := ReasonCodeOf(ev.Kick.ReasonCode); !c.closeLater(code) {
					go c.kick(code)
				}
			}
		case *eventspb.Envelope_GatewayHeartbeat:
			hb := ev.GatewayHeartbeat
			if env.Gateway != g.cfg.ID || hb.ConnectionBase != g.connBase() || hb.Slot != g.slot.Load() {
				return &SlotTakenError{Slot: g.slot.Load(), Gateway: env.Gateway, Run: hb.ConnectionBase, Offset: r.Offset, Own: g.connBase()}
			}
			// our own position marker
		default:
			g.log.Warn("unexpected event on slot", "type", kafka.EventType(r), "offset", r.Offset)
		}
	}
	return nil
}

// returnUndelivered hands back a QoS 1/2 message whose client is not
// connected here: to its shared subscription's group when a group chose the
// client, to the client's session otherwise.
func (g *Gateway) returnUndelivered(tenant string, m *eventspb.Message, t *eventspb.Target) {
	if t.ShareGroup != "" {
		g.redispatch(tenant, t.ClientId, m, t.ShareGroup, t.ShareFilter)
		return
	}
	g.bounce(tenant, m, t)
}

// redispatch asks the router shard of the message's topic to give it to
// another member of the shared subscription (SharedRedispatch).
func (g *Gateway) redispatch(tenant, client string, m *eventspb.Message, group, filter string) {
	rec := kafka.NewRecord(g.topics.Messages.Name, kafka.Key(tenant, m.Topic), kafka.PartitionByKey, &eventspb.Envelope{
		Tenant:      tenant,
		Gateway:     g.cfg.ID,
		TimestampUs: g.clock().UnixMicro(),
		Event: &eventspb.Envelope_SharedRedispatch{SharedRedispatch: &eventspb.SharedRedispatch{
			Message: m, ShareGroup: group, Filter: filter, ExcludeClient: client,
		}},
	})
	g.kl.Produce(context.Background(), rec, func(_ *kafka.Record, err error) {
		if err != nil {
			g.log.Warn("redispatch shared message", "tenant", tenant, "group", group, "err", err)
		}
	})
}

// bounce returns a message for a client that is not connected here to its
// session service as an InboxAppend.
func (g *Gateway) bounce(tenant string, m *eventspb.Message, t *eventspb.Target) {
	rec := kafka.NewRecord(g.topics.Sessions.Name, kafka.Key(tenant, t.ClientId), kafka.PartitionByKey, &eventspb.Envelope{
		Tenant:      tenant,
		ClientId:    t.ClientId,
		Gateway:     g.cfg.ID,
		TimestampUs: g.clock().UnixMicro(),
		Event: &eventspb.Envelope_InboxAppend{InboxAppend: &eventspb.InboxAppend{
			Message: m,
			Target:  &eventspb.Target{Qos: t.Qos, Retain: t.Retain, SubscriptionIds: t.SubscriptionIds, Dup: t.Dup},
		}},
	})
	client := t.ClientId // t is reused once this returns
	g.kl.Produce(context.Background(), rec, func(_ *kafka.Record, err error) {
		if err != nil {
			g.log.Warn("return undeliverable message to its session", "tenant", tenant, "client", client, "err", err)
		}
	})
}

// deliver hands a delivery's message to each target connected here. The
// targets' connections are looked up under one read lock, the message is
// written into each one's out buffer, and the connections that need a
// writer are queued together. It reports whether a connection kept d's
// Message (see conn.deliver). Slot consumer goroutine only.
func (g *Gateway) deliver(tenant string, d *eventspb.Delivery) (kept bool) {
	now := g.clock()
	conns := g.dispatch.conns[:0]
	g.mu.RLock()
	for _, t := range d.Targets {
		c := g.byID[t.Connection]
		if c != nil && (c.clientID != t.ClientId || c.tenant != tenant) {
			c = nil
		}
		conns = append(conns, c)
	}
	g.mu.RUnlock()
	flush := g.dispatch.flush[:0]
	pc := &g.dispatch.cache
	pc.reset(d.Message, now)
	var sent int64
	var counted *conn
	for i, t := range d.Targets {
		c := conns[i]
		if c == nil {
			// Gone, or another connection of the client. A QoS 1/2 message
			// goes back to the client's session, which queues it (offline
			// persistent session), forwards it (a newer connection) or
			// drops it (no session): the router may not have read the
			// client's newest presence yet.
			g.log.Debug("delivery target not connected here", "tenant", tenant, "client", t.ClientId,
				"connection", t.Connection)
			if t.Qos > 0 && t.InboxSeq == 0 {
				// (An inbox message stays with its session, which sends
				// it to the client's newest connection.)
				g.returnUndelivered(tenant, d.Message, t)
			}
			continue
		}
		k, f, s := c.deliverCounted(d.Source, d.Message, t, now, pc)
		kept = kept || k
		if f {
			flush = append(flush, c)
		}
		if s {
			sent++
			counted = c
		}
	}
	if counted != nil {
		counted.add(MessagesSent, sent) // the targets are all of one tenant
	}
	g.writes.push(flush...)
	clear(conns)
	clear(flush)
	g.dispatch.conns, g.dispatch.flush = conns[:0], flush[:0]
	pc.reset(nil, time.Time{}) // drop the reference to the message
	return kept
}
