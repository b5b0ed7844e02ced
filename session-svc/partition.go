package sessionsvc

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/shoal-mqtt/shoal/internal/intern"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// record is one consumed record of shoal.sessions; env is nil when the
// record could not be decoded (it is skipped, but its offset is applied).
type record struct {
	offset int64
	env    *eventspb.Envelope
	// trace is the record's traceparent header (a copy), nil without one:
	// every output of the record continues its trace.
	trace []byte
	// ctx is the kotel receive span's context (tracing on), else nil.
	ctx context.Context
}

// writeFunc durably writes outputs (all of them or fail), keeping the order
// of those that go to the same partition.
type writeFunc func(ctx context.Context, outs []output) error

// partition is the state of one partition of shoal.sessions. process is
// called by one goroutine at a time; the mutex lets Snapshot read the
// committed state meanwhile.
type partition struct {
	id    int32
	m     *machine
	store Store

	mu       sync.Mutex
	sessions map[clientKey]*Session // committed
	offset   int64                  // the last applied offset, -1 before any
	// storedAt is when the store last took the partition's offset (used
	// by process only).
	storedAt time.Time
	// wakeUs is the timestamp (unix microseconds) of the first SessionTick
	// that changes a committed session by itself (Session.tickDueUs: a
	// delayed will due, a session expired), 0 when none is pending. It
	// may be earlier than that (the session resumed since), never later.
	// The service writes a tick to the partition at that time rather than
	// waiting for its periodic one (Service.tickLoop).
	wakeUs int64
	// onWake, when set, is called after a commit that made wakeUs earlier.
	onWake func()
	// counts are the committed sessions by state (metrics.go).
	counts sessionCounts
	// settled, while process runs, is closed when it returns: its batch
	// is committed, or failed. nil between batches.
	settled chan struct{}

	// live is what the partition's log says of each slot's gateway (used
	// by process only). It is not stored: after a load, a slot with online
	// clients and no heartbeat gets one gateway_timeout of grace from the
	// first tick.
	live map[int32]*slotLiveness
	// lastTickUs is the timestamp of the partition's previous SessionTick
	// (0 before the first since the load).
	lastTickUs int64
	// names keeps one copy of the tenants and gateway ids the sessions
	// hold (used by process only).
	names *intern.Table
	// ended holds the dormant sessions of sessions kept in memory (up to
	// m.endedPerPartition, the most recently ended), each with the number
	// of its entry in endedOrder, which lists them oldest first among
	// stale entries (of sessions that left ended, or ended again since:
	// their numbers differ, and they are skipped). Guarded by mu.
	ended      map[clientKey]uint64
	endedOrder []endedEntry
	endedSeq   uint64
	// stored holds every client the partition has a session of in the
	// store, so that recall reads only for those (m.filterIDs: a store
	// whose reads are round trips); nil otherwise. Used by process only.
	stored *idFilter
}

// endedEntry is an entry of partition.endedOrder.
type endedEntry struct {
	k   clientKey
	seq uint64
}

// keepEnded adds k, a dormant session held in memory, to the ended
// sessions kept (the newest). The caller holds mu.
func (p *partition) keepEnded(k clientKey) {
	p.endedSeq++
	p.ended[k] = p.endedSeq
	p.endedOrder = append(p.endedOrder, endedEntry{k, p.endedSeq})
}

// maxNames bounds a partition's table of tenants and gateway ids.
const maxNames = 4096

// slotLiveness is the newest heartbeat of a slot's gateway.
type slotLiveness struct {
	base   uint64 // the run's connection base; 0 when not heard from yet
	marker int64  // the run's marker offset in its slot of shoal.deliveries
	lastUs int64  // timestamp of the newest heartbeat (or of the grace's start)
}

// sameRun reports whether connection was opened by the gateway run whose
// connection base is base (0: any run).
func sameRun(connection, base uint64) bool {
	return base == 0 || connection>>24 == base>>24
}

// loadPartition restores partition id's state from store.
func loadPartition(ctx context.Context, id int32, m *machine, store Store) (*partition, error) {
	p := &partition{id: id, m: m, store: store, sessions: make(map[clientKey]*Session), live: make(map[int32]*slotLiveness),
		names: intern.New(maxNames), ended: make(map[clientKey]uint64)}
	if m.filterIDs {
		p.stored = newIDFilter()
	}
	off, err := store.LoadSessions(ctx, id, func(s *Session) error {
		if p.stored != nil {
			p.stored.add(clientKey{s.Tenant, s.ClientID})
		}
		if s.dormant() && len(p.ended) >= m.endedPerPartition {
			return nil // read again when its client comes back (recall)
		}
		s.Tenant, s.Gateway = p.names.Get(s.Tenant), p.names.Get(s.Gateway)
		k := clientKey{s.Tenant, s.ClientID}
		p.sessions[k] = s
		if s.dormant() {
			p.keepEnded(k)
		}
		p.counts.add(s, 1)
		p.wakeUs = earliest(p.wakeUs, s.tickDueUs())
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load sessions of partition %d: %w", id, err)
	}
	p.offset = off
	return p, nil
}

// earliest returns the earlier of two tick times, 0 meaning none.
func earliest(a, b int64) int64 {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}

// wakeAt returns the partition's wakeUs.
func (p *partition) wakeAt() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.wakeUs
}

// nextOffset is the offset to consume from.
func (p *partition) nextOffset() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.offset + 1
}

// process applies a batch of records in order. Their outputs are written
// in rounds: a round holds events of distinct clients, and in each round
// every stage is durably written before the next (so each event's outputs
// keep their order, and events of one client follow each other). Then the
// changed sessions and the batch's last offset are committed together and
// become the partition's state. On error nothing is committed and the
// partition's state is unchanged: the caller reloads and consumes again
// from the stored offset, repeating outputs (at least once) but never
// half-applying a state change. Records at or below the applied offset are
// skipped.
func (p *partition) process(ctx context.Context, recs []record, write writeFunc) error {
	settled := make(chan struct{})
	p.mu.Lock()
	p.settled = settled
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.settled = nil
		p.mu.Unlock()
		close(settled)
	}()
	base := p.offset // only process changes it, from one goroutine
	b := &batch{
		p:       p,
		write:   func(outs []output) error { return write(ctx, outs) },
		dirty:   make(map[clientKey]*Session),
		inRound: make(map[clientKey]stage),
	}
	var err error
	if b.recalled, err = p.recall(ctx, recs, base); err != nil {
		return err
	}
	last := base
	for _, r := range recs {
		if r.offset <= base {
			continue
		}
		last = r.offset
		if err := b.apply(r); err != nil {
			return err
		}
	}
	if err := b.flush(); err != nil {
		return err
	}
	if last == base {
		p.forget(b.recalled, nil)
		return nil
	}
	return b.commit(ctx, last)
}

// recall reads from the store the sessions of the clients of recs (those
// after base) that the partition does not hold in memory, and adds those
// it finds to its committed state, for the batch to apply its events to:
// a dormant session lives in the store alone. It returns the clients it
// added. On error the partition is unchanged.
func (p *partition) recall(ctx context.Context, recs []record, base int64) ([]clientKey, error) {
	var missing []clientKey
	p.mu.Lock()
	for _, r := range recs {
		env := r.env
		if r.offset <= base || env == nil || env.GetClientId() == "" || env.GetGatewayHeartbeat() != nil || env.GetSessionTick() != nil {
			continue
		}
		k := clientKey{p.names.Get(env.GetTenant()), env.GetClientId()}
		if _, ok := p.sessions[k]; !ok && (p.stored == nil || p.stored.mayHold(k)) {
			missing = append(missing, k)
		}
	}
	p.mu.Unlock()
	if len(missing) == 0 {
		return nil, nil
	}
	slices.SortFunc(missing, compareKeys)
	missing = slices.Compact(missing)
	clients := make([]Client, len(missing))
	for i, k := range missing {
		clients[i] = Client{Tenant: k.tenant, ID: k.client}
	}
	var found []*Session
	err := p.store.LoadClients(ctx, p.id, clients, func(s *Session) error {
		found = append(found, s)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("recall %d sessions of partition %d: %w", len(missing), p.id, err)
	}
	recalled := make([]clientKey, 0, len(found))
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range found {
		k := clientKey{p.names.Get(s.Tenant), s.ClientID}
		s.Tenant, s.Gateway = k.tenant, p.names.Get(s.Gateway)
		p.sessions[k] = s
		p.counts.add(s, 1)
		recalled = append(recalled, k)
	}
	return recalled, nil
}

// forget lets go of the dormant sessions among the clients of keys and of
// changed (sessions of the partition's committed state): the store keeps
// them.
func (p *partition) forget(keys []clientKey, changed map[clientKey]*Session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.forgetLocked(keys, changed)
}

// forgetLocked is forget for a caller that holds p.mu. The most recently
// ended sessions stay, up to m.endedPerPartition, the oldest leave first.
func (p *partition) forgetLocked(keys []clientKey, changed map[clientKey]*Session) {
	note := func(k clientKey, again bool) {
		s, ok := p.sessions[k]
		_, kept := p.ended[k]
		switch {
		case ok && s.dormant() && (!kept || again):
			p.keepEnded(k) // the newest (an earlier entry is stale now)
		case (!ok || !s.dormant()) && kept:
			delete(p.ended, k) // its entry in endedOrder is skipped
		}
	}
	for _, k := range keys {
		note(k, false)
	}
	for k := range changed {
		note(k, true)
	}
	for len(p.ended) > p.m.endedPerPartition && len(p.endedOrder) > 0 {
		e := p.endedOrder[0]
		p.endedOrder = p.endedOrder[1:]
		if seq, kept := p.ended[e.k]; !kept || seq != e.seq {
			continue // stale
		}
		delete(p.ended, e.k)
		if s, ok := p.sessions[e.k]; ok && s.dormant() {
			p.counts.add(s, -1)
			delete(p.sessions, e.k)
		}
	}
	if len(p.endedOrder) > 2*len(p.ended)+64 {
		// Mostly stale entries: keep the others, in order.
		order := make([]endedEntry, 0, len(p.ended))
		for _, e := range p.endedOrder {
			if seq, kept := p.ended[e.k]; kept && seq == e.seq {
				order = append(order, e)
			}
		}
		p.endedOrder = order
	}
}

// compareKeys orders clients by tenant, then client id.
func compareKeys(a, b clientKey) int {
	return cmp.Or(cmp.Compare(a.tenant, b.tenant), cmp.Compare(a.client, b.client))
}

// batch is what one call of partition.process has applied and not
// committed yet: the sessions it changed and the outputs it has not written.
type batch struct {
	p *partition
	// write is process's writeFunc with its context.
	write func(outs []output) error
	// dirty holds the sessions the batch changed: private copies, committed
	// at its end.
	dirty map[clientKey]*Session
	// inRound holds the clients with outputs in the round, with the latest
	// stage among them.
	inRound map[clientKey]stage
	pending [numStages][]output
	// outs is the outputs of the record being applied (reused).
	outs []output
	// recalled holds the clients whose dormant sessions the batch read
	// from the store (recall): let go again at its end unless they
	// changed.
	recalled []clientKey
	// scanned: a tick of the batch looked at every committed session;
	// scanWakeUs is the earliest tick time among those it left unchanged.
	scanned    bool
	scanWakeUs int64
}

// apply applies one record by the kind of its event.
func (b *batch) apply(r record) error {
	if r.env == nil {
		return nil // undecodable: skipped, but its offset is applied
	}
	if hb := r.env.GetGatewayHeartbeat(); hb != nil {
		return b.heartbeat(r.env, hb)
	}
	if r.env.GetSessionTick() != nil {
		return b.tick(time.UnixMicro(r.env.GetTimestampUs()))
	}
	return b.event(r)
}

// heartbeat applies a gateway's heartbeat to its slot's liveness; a gateway
// that restarted on its slot ends the connections of its earlier runs.
func (b *batch) heartbeat(env *eventspb.Envelope, hb *eventspb.GatewayHeartbeat) error {
	p := b.p
	base, ts := hb.GetConnectionBase(), env.GetTimestampUs()
	e := p.live[hb.GetSlot()]
	if e != nil && e.base == base {
		e.lastUs = max(e.lastUs, ts)
		return nil
	}
	if e != nil && hb.GetMarkerOffset() < e.marker {
		// An earlier run that lost the slot (it was paused past
		// its lease) and has not noticed yet: not a restart.
		p.m.log.Warn("heartbeat of a gateway run that lost its slot ignored", "partition", p.id,
			"slot", hb.GetSlot(), "gateway", env.GetGateway(), "marker", hb.GetMarkerOffset(), "current_marker", e.marker)
		return nil
	}
	p.live[hb.GetSlot()] = &slotLiveness{base: base, marker: hb.GetMarkerOffset(), lastUs: ts}
	return b.endConnections(p.m.eventTime(env), func(r *eventspb.Route) bool {
		return r.GetSlot() == hb.GetSlot() && !sameRun(r.GetConnection(), base)
	})
}

// tick applies a SessionTick at now, the partition's clock: it ends the
// connections of gateways gone silent and the sessions expired at the
// tick's time (from the log, so a replay decides the same).
func (b *batch) tick(now time.Time) error {
	p := b.p
	if gap := now.UnixMicro() - p.lastTickUs; p.lastTickUs == 0 || gap > p.m.gatewayTimeout.Microseconds()/2 {
		// The log itself was silent (Kafka down, the service
		// stopped): nobody could write heartbeats, so every
		// gateway gets a new grace period.
		for _, e := range p.live {
			e.lastUs = max(e.lastUs, now.UnixMicro())
		}
	}
	p.lastTickUs = max(p.lastTickUs, now.UnixMicro())
	dead := p.silentGateways(now.UnixMicro())
	var keys []clientKey
	keys, b.scanWakeUs = p.tickKeys(b.dirty, dead, now)
	b.scanned = true
	for _, k := range keys {
		if err := b.tickSession(k, dead, now); err != nil {
			return err
		}
	}
	return nil
}

// tickSession applies a tick at now to client k's session: its connection
// ends when its gateway is dead (its slot's run in dead), and it expires
// when due. A session left unchanged counts in scanWakeUs.
func (b *batch) tickSession(k clientKey, dead map[int32]uint64, now time.Time) error {
	p := b.p
	sess := b.session(k)
	outs := b.outs[:0]
	changed := false
	if pr := sess.PendingRemoval; pr != nil {
		if base, isDead := dead[pr.GetSlot()]; isDead && sameRun(pr.GetConnection(), base) {
			outs, changed = p.m.takenOverGone(k, sess, outs), true
		}
	}
	if sess.Online {
		slot := sess.Route.GetSlot()
		if base, isDead := dead[slot]; isDead && sameRun(sess.Route.GetConnection(), base) {
			var ended bool
			outs, ended = p.m.gatewayGone(k, sess, now, outs)
			changed = changed || ended
		} else if p.live[slot] == nil {
			p.live[slot] = &slotLiveness{lastUs: now.UnixMicro()} // grace
		}
	}
	var expired bool
	outs, expired = p.m.expire(k, sess, now, outs)
	b.outs = outs
	if !changed && !expired {
		b.scanWakeUs = earliest(b.scanWakeUs, sess.tickDueUs())
		return nil
	}
	b.dirty[k] = sess
	return b.emit(k, outs)
}

// event applies a client's event to its session.
func (b *batch) event(r record) error {
	p := b.p
	// The session keeps the tenant (in its key) and the gateway id.
	r.env.Tenant, r.env.Gateway = p.names.Get(r.env.Tenant), p.names.Get(r.env.Gateway)
	k := clientKey{r.env.GetTenant(), r.env.GetClientId()}
	if k.client == "" {
		p.m.log.WarnContext(traceContext(r.trace), "session event without a client id skipped", "partition", p.id, "offset", r.offset,
			"event", kafka.EnvelopeType(r.env))
		return nil
	}
	sess := b.session(k)
	ctx, span := p.m.eventSpan(r, p.id)
	outs, changed := p.m.apply(k, sess, r.env, b.outs[:0])
	b.outs = outs
	if changed {
		b.dirty[k] = sess
	}
	for i := range outs {
		outs[i].trace, outs[i].ctx = r.trace, ctx
	}
	if span != nil {
		endEventSpan(span, outs)
	}
	return b.emit(k, outs)
}

// session returns client k's session as the batch has it: the one it
// changed, or a private copy of the committed one.
func (b *batch) session(k clientKey) *Session {
	if sess, ok := b.dirty[k]; ok {
		return sess
	}
	return b.p.committed(k)
}

// emit queues one client's outputs, starting a new round when the client
// already has outputs in this one at a later stage than the first of these
// (which would otherwise be written before them). A run of forwarded inbox
// messages, all of one stage, shares a round: the write keeps the order of
// outputs to one partition.
func (b *batch) emit(k clientKey, outs []output) error {
	if len(outs) == 0 {
		return nil
	}
	first, last := outs[0].stage, outs[0].stage
	for _, o := range outs[1:] {
		first, last = min(first, o.stage), max(last, o.stage)
	}
	if prev, again := b.inRound[k]; again && prev > first {
		if err := b.flush(); err != nil {
			return err
		}
	}
	b.inRound[k] = max(b.inRound[k], last)
	for _, o := range outs {
		b.pending[o.stage] = append(b.pending[o.stage], o)
	}
	return nil
}

// flush ends the round: it writes the queued outputs, stage by stage.
func (b *batch) flush() error {
	for st := range b.pending {
		if len(b.pending[st]) == 0 {
			continue
		}
		if err := b.write(b.pending[st]); err != nil {
			return fmt.Errorf("write %d outputs of partition %d: %w", len(b.pending[st]), b.p.id, err)
		}
		b.pending[st] = b.pending[st][:0]
	}
	clear(b.inRound)
	return nil
}

// offsetStoreEvery is how often, at most, a partition's offset is stored
// when its batches change no session.
const offsetStoreEvery = 5 * time.Second

// commit stores the sessions the batch changed with last, the offset of
// its last record, and makes them the partition's state; it calls onWake
// when that brings the partition's next wake-up forward.
func (b *batch) commit(ctx context.Context, last int64) error {
	p := b.p
	changed := slices.SortedFunc(maps.Values(b.dirty), func(x, y *Session) int {
		return cmp.Or(cmp.Compare(x.Tenant, y.Tenant), cmp.Compare(x.ClientID, y.ClientID))
	})
	// A batch that changed no session (heartbeats, ticks that found
	// nothing due) moves the offset alone: stored at most every
	// offsetStoreEvery, so an idle partition does not cost a write per
	// heartbeat. A restart reads those records again, which changes
	// nothing: a heartbeat or a tick applied twice decides the same.
	if now := p.m.now(); len(changed) > 0 || now.Sub(p.storedAt) >= offsetStoreEvery {
		if err := p.store.CommitSessions(ctx, p.id, last, changed); err != nil {
			return fmt.Errorf("commit partition %d at offset %d: %w", p.id, last, err)
		}
		p.storedAt = now
	}
	if p.stored != nil {
		for k := range b.dirty {
			if !p.stored.mayHold(k) {
				p.stored.add(k)
			}
		}
	}
	p.mu.Lock()
	p.counts.update(p.sessions, b.dirty)
	maps.Copy(p.sessions, b.dirty)
	p.offset = last
	p.forgetLocked(b.recalled, b.dirty)
	wake := p.wakeUs
	if b.scanned {
		// The sessions a tick left unchanged are in scanWakeUs; the
		// others are dirty.
		wake = b.scanWakeUs
	}
	for _, s := range changed {
		wake = earliest(wake, s.tickDueUs())
	}
	sooner := wake != 0 && (p.wakeUs == 0 || wake < p.wakeUs)
	p.wakeUs = wake
	p.mu.Unlock()
	if sooner && p.onWake != nil {
		p.onWake()
	}
	return nil
}

// silentGateways forgets the slots whose gateway has not been heard from
// for the gateway timeout at nowUs and returns them with their runs'
// connection bases.
func (p *partition) silentGateways(nowUs int64) map[int32]uint64 {
	dead := make(map[int32]uint64)
	for slot, e := range p.live {
		if nowUs-e.lastUs > p.m.gatewayTimeout.Microseconds() {
			dead[slot] = e.base
			delete(p.live, slot)
			p.m.log.Warn("gateway silent; ending its connections", "partition", p.id, "slot", slot,
				"silent_for", time.Duration(nowUs-e.lastUs)*time.Microsecond)
		}
	}
	return dead
}

// endConnections ends, uncleanly at at, the connections whose routes
// gone selects: those of online sessions, and those taken over whose end
// was still awaited (Session.PendingRemoval: it will not come now).
func (b *batch) endConnections(at time.Time, gone func(*eventspb.Route) bool) error {
	p := b.p
	for _, k := range p.keys(b.dirty) {
		sess := b.session(k)
		var outs []output
		changed := false
		if sess.PendingRemoval != nil && gone(sess.PendingRemoval) {
			outs, changed = p.m.takenOverGone(k, sess, outs), true
		}
		if sess.Online && gone(sess.Route) {
			var ended bool
			outs, ended = p.m.gatewayGone(k, sess, at, outs)
			changed = changed || ended
		}
		if changed {
			b.dirty[k] = sess
		}
		if err := b.emit(k, outs); err != nil {
			return err
		}
	}
	return nil
}

// keys returns every client of the partition, committed or changed in
// the batch under way, in a fixed order.
func (p *partition) keys(dirty map[clientKey]*Session) []clientKey {
	p.mu.Lock()
	ks := make([]clientKey, 0, len(p.sessions)+len(dirty))
	for k := range p.sessions {
		ks = append(ks, k)
	}
	p.mu.Unlock()
	for k := range dirty {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, compareKeys)
	return slices.Compact(ks)
}

// tickKeys returns, in key order, the clients a tick at now may change:
// every client changed in the batch under way, and those whose committed
// session is online on a gateway gone silent (dead), has a will due, or
// expired. The others are left alone without a copy, so that a tick costs
// little for a partition of idle sessions. A slot not heard from since the
// load that has online sessions gets its grace here. It also returns the
// earliest tick time (Session.tickDueUs) of the committed sessions it
// leaves alone, 0 for none: the partition's next wake-up, unless one it
// returned changes sooner.
func (p *partition) tickKeys(dirty map[clientKey]*Session, dead map[int32]uint64, now time.Time) ([]clientKey, int64) {
	var ks []clientKey
	var wakeUs int64
	p.mu.Lock()
	for k, s := range p.sessions {
		if _, ok := dirty[k]; ok {
			continue
		}
		if p.tickMayChange(s, dead, now) {
			ks = append(ks, k)
		} else {
			wakeUs = earliest(wakeUs, s.tickDueUs())
		}
	}
	p.mu.Unlock()
	for k := range dirty {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, compareKeys)
	return ks, wakeUs
}

// tickMayChange reports whether a tick at now changes s (the conditions
// under which the tick below calls gatewayGone, or machine.expire changes
// the session), giving its slot its grace when it is online.
func (p *partition) tickMayChange(s *Session, dead map[int32]uint64, now time.Time) bool {
	if pr := s.PendingRemoval; pr != nil {
		if base, isDead := dead[pr.GetSlot()]; isDead && sameRun(pr.GetConnection(), base) {
			return true
		}
	}
	if s.Online {
		slot := s.Route.GetSlot()
		if base, isDead := dead[slot]; isDead && sameRun(s.Route.GetConnection(), base) {
			return true
		}
		if p.live[slot] == nil {
			p.live[slot] = &slotLiveness{lastUs: now.UnixMicro()} // grace
		}
	}
	return delayedWillDue(s, now) || s.Expired(now)
}

// committed returns a private copy of client k's committed session, or a
// new one.
func (p *partition) committed(k clientKey) *Session {
	p.mu.Lock()
	s := p.sessions[k]
	p.mu.Unlock()
	if s == nil {
		return &Session{Tenant: k.tenant, ClientID: k.client}
	}
	return s.Clone()
}

// batchUnderWay returns a channel closed once the batch being processed
// now is committed (or failed), or nil when none is.
func (p *partition) batchUnderWay() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.settled
}

// record returns a copy of client k's committed session as snapshot does,
// or the dormant one from the store; false when the client was never seen.
func (p *partition) record(ctx context.Context, k clientKey) (*Session, bool, error) {
	if s, ok := p.snapshot(k); ok {
		return s, true, nil
	}
	s, err := LoadClient(ctx, p.store, p.id, k.tenant, k.client)
	if err != nil || s == nil {
		return nil, false, err
	}
	if mem, ok := p.snapshot(k); ok {
		return mem, true, nil // recalled meanwhile: memory has the newest
	}
	return s, true, nil
}

// snapshot returns a copy of client k's committed session, if the partition
// holds it in memory (a dormant session is in the store alone).
func (p *partition) snapshot(k clientKey) (*Session, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.sessions[k]
	return s.Clone(), ok
}
