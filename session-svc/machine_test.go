package sessionsvc

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

const (
	testMessagesPartitions   = 4
	testDeliveriesPartitions = 8
	testEpoch                = 0xE90C
)

var testNow = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func newTestMachine() *machine {
	return &machine{
		messagesPartitions:   testMessagesPartitions,
		deliveriesPartitions: testDeliveriesPartitions,
		epoch:                testEpoch,
		seq:                  new(atomic.Uint64),
		now:                  func() time.Time { return testNow },
		log:                  slog.New(slog.DiscardHandler),
		maxInbox:             2,
		gatewayTimeout:       10 * time.Second,
	}
}

// conn describes one connection of a test client.
type conn struct {
	tenant, client, gateway string
	slot                    int32
	connection, request     uint64
}

func (c conn) key() clientKey { return clientKey{c.tenant, c.client} }

// env stamps ev at testNow, when the machine's clock reads: the event's
// time is what the session keeps and decides from (machine.eventTime).
func (c conn) env(ev *eventspb.Envelope) *eventspb.Envelope {
	ev.Tenant, ev.ClientId, ev.Gateway, ev.TimestampUs = c.tenant, c.client, c.gateway, testNow.UnixMicro()
	return ev
}

func (c conn) connect(clean bool, expiry uint32, will *eventspb.Will) *eventspb.Envelope {
	return c.env(&eventspb.Envelope{Event: &eventspb.Envelope_Connect{Connect: &eventspb.Connect{
		Route:      &eventspb.Route{Slot: c.slot, Connection: c.connection},
		CleanStart: clean, SessionExpiryS: expiry, Will: will, ProtocolVersion: 5,
		Username: "user-" + c.client, RequestId: c.request,
	}}})
}

func (c conn) disconnect(gen uint64, publishWill bool, expiry *uint32) *eventspb.Envelope {
	return c.env(&eventspb.Envelope{Event: &eventspb.Envelope_Disconnect{Disconnect: &eventspb.Disconnect{
		Connection: c.connection, Generation: gen, ReasonCode: 0x04, PublishWill: publishWill, SessionExpiryS: expiry,
	}}})
}

func (c conn) subscriptions(gen uint64, removed []string, added ...*eventspb.SessionSubscription) *eventspb.Envelope {
	return c.env(&eventspb.Envelope{Event: &eventspb.Envelope_SessionSubscriptions{
		SessionSubscriptions: &eventspb.SessionSubscriptions{Added: added, Removed: removed, Generation: gen},
	}})
}

var (
	connA  = conn{tenant: "acme", client: "acme-dev1", gateway: "gw-1", slot: 1, connection: 10, request: 100}
	connA2 = conn{tenant: "acme", client: "acme-dev1", gateway: "gw-2", slot: 2, connection: 20, request: 200}
	connB  = conn{tenant: "acme", client: "acme-dev2", gateway: "gw-1", slot: 1, connection: 11, request: 101}
)

func testWill() *eventspb.Will {
	return &eventspb.Will{Message: &eventspb.Message{Topic: "dev1/status", Payload: []byte("gone"), Qos: 1, Retain: true}}
}

// Expected outputs.

func wantEnv(c conn, gateway string, ev *eventspb.Envelope) *eventspb.Envelope {
	ev.Tenant, ev.ClientId, ev.Gateway, ev.TimestampUs = c.tenant, c.client, gateway, testNow.UnixMicro()
	return ev
}

func wantKick(old conn) output {
	return output{stage: stageTakeover, dest: toDeliveries, partition: old.slot, key: old.key().recordKey(),
		env: wantEnv(old, old.gateway, &eventspb.Envelope{Event: &eventspb.Envelope_Kick{Kick: &eventspb.Kick{
			Connection: old.connection, ReasonCode: 0x8E,
		}}})}
}

func wantRemoveAll(old conn, gen uint64) []output {
	var outs []output
	for p := range int32(testMessagesPartitions) {
		outs = append(outs, output{stage: stageTakeover, dest: toMessages, partition: p, key: old.key().recordKey(),
			env: wantEnv(old, old.gateway, &eventspb.Envelope{Event: &eventspb.Envelope_SubscriptionChange{
				SubscriptionChange: &eventspb.SubscriptionChange{
					Op:    eventspb.SubscriptionChange_OP_REMOVE_ALL,
					Route: &eventspb.Route{Slot: old.slot, Connection: old.connection, Generation: gen},
				},
			}})})
	}
	return outs
}

func wantPresence(c conn, online, persistent bool, gen uint64) output {
	return output{stage: stagePresence, dest: toPresence, partition: byKey, key: c.key().recordKey(),
		env: wantEnv(c, c.gateway, &eventspb.Envelope{Event: &eventspb.Envelope_Presence{Presence: &eventspb.Presence{
			Online: online, Persistent: persistent, SessionGeneration: gen,
			Route: &eventspb.Route{Slot: c.slot, Connection: c.connection, Generation: gen},
		}}})}
}

// wantPresenceGone is the tombstone of c's presence.
func wantPresenceGone(c conn) output {
	return output{stage: stagePresence, dest: toPresence, partition: byKey, key: c.key().recordKey()}
}

func wantResult(c conn, gen uint64) output {
	return output{stage: stageAnswer, dest: toDeliveries, partition: c.slot, key: c.key().recordKey(),
		env: wantEnv(c, c.gateway, &eventspb.Envelope{Event: &eventspb.Envelope_ConnectResult{
			ConnectResult: &eventspb.ConnectResult{RequestId: c.request, Connection: c.connection, Generation: gen, SessionGeneration: gen},
		}})}
}

func wantWill(c conn, w *eventspb.Will, seq uint64) output {
	env := wantEnv(c, c.gateway, &eventspb.Envelope{Event: &eventspb.Envelope_Publish{Publish: &eventspb.Publish{
		Message: w.GetMessage(), Connection: c.connection,
	}}})
	env.MessageId = &eventspb.MessageID{GatewayEpoch: testEpoch, Seq: seq}
	return output{stage: stageAnswer, dest: toMessages, partition: byKey, key: []byte(c.tenant + "/" + w.GetMessage().GetTopic()), env: env}
}

func outputs(parts ...any) []output {
	var outs []output
	for _, p := range parts {
		switch p := p.(type) {
		case output:
			outs = append(outs, p)
		case []output:
			outs = append(outs, p...)
		default:
			panic(p)
		}
	}
	return outs
}

var cmpOutputs = []cmp.Option{cmp.AllowUnexported(output{}), protocmp.Transform()}

// harness runs the partition logic over a memory store, recording every
// durable write.
type harness struct {
	t      *testing.T
	m      *machine
	store  *memStore
	p      *partition
	next   int64
	writes [][]output // one per write call
	fail   error      // the next writes fail with it
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, m: newTestMachine(), store: newMemStore()}
	h.restart()
	return h
}

// restart reloads the partition from the store, as a new process would.
func (h *harness) restart() {
	h.t.Helper()
	p, err := loadPartition(h.t.Context(), 0, h.m, h.store)
	if err != nil {
		h.t.Fatal(err)
	}
	h.p = p
	h.next = p.nextOffset()
}

func (h *harness) write(_ context.Context, outs []output) error {
	if h.fail != nil {
		return h.fail
	}
	h.writes = append(h.writes, append([]output(nil), outs...))
	return nil
}

// batch processes envs as one batch and returns every output in write
// order.
func (h *harness) batch(envs ...*eventspb.Envelope) []output {
	h.t.Helper()
	h.writes = nil
	var recs []record
	for _, env := range envs {
		// Decode a copy, as from the log, so nothing aliases the test's values.
		recs = append(recs, record{offset: h.next, env: decoded(h.t, env)})
		h.next++
	}
	if err := h.p.process(h.t.Context(), recs, h.write); err != nil {
		h.t.Fatalf("process: %v", err)
	}
	var all []output
	for _, w := range h.writes {
		all = append(all, w...)
	}
	return all
}

func (h *harness) session(c conn) *Session {
	h.t.Helper()
	s, ok, err := h.p.record(h.t.Context(), c.key())
	if !ok || err != nil {
		h.t.Fatalf("no session for %s (%v)", c.client, err)
	}
	return s
}

func checkOutputs(t *testing.T, got, want []output) {
	t.Helper()
	if diff := cmp.Diff(want, got, cmpOutputs...); diff != "" {
		t.Errorf("outputs (-want +got):\n%s", diff)
	}
}

func TestConnectAnswers(t *testing.T) {
	h := newHarness(t)
	got := h.batch(connA.connect(true, 0, nil))
	checkOutputs(t, got, outputs(wantPresence(connA, true, false, 1), wantResult(connA, 1)))

	s := h.session(connA)
	want := &Session{
		Tenant: "acme", ClientID: "acme-dev1", Generation: 1, SessionGeneration: 1, Active: true, Online: true,
		Route: &eventspb.Route{Slot: 1, Connection: 10, Generation: 1}, Gateway: "gw-1", RequestID: 100,
		ProtocolVersion: 5, Username: "user-acme-dev1", ConnectedAt: testNow,
	}
	if !s.Equal(want) {
		t.Errorf("session\n got %+v\nwant %+v", s, want)
	}

	// A persistent session's presence says so; another client is numbered
	// on its own.
	got = h.batch(connB.connect(false, 3600, nil))
	checkOutputs(t, got, outputs(wantPresence(connB, true, true, 1), wantResult(connB, 1)))
}

func TestTakeover(t *testing.T) {
	h := newHarness(t)
	h.batch(connA.connect(true, 0, nil))
	got := h.batch(connA2.connect(false, 0, nil))
	// The old session's removal waits for its connection's end.
	checkOutputs(t, got, outputs(
		wantKick(connA),
		wantPresence(connA2, true, false, 2),
		wantResult(connA2, 2),
	))
	// Each stage is its own durable write: the kick, then the presence,
	// then the answer.
	if len(h.writes) != 3 || len(h.writes[0]) != 1 || len(h.writes[1]) != 1 || len(h.writes[2]) != 1 {
		t.Errorf("writes %d, want [kick] [presence] [result]", len(h.writes))
	}
	s := h.session(connA2)
	if s.Generation != 2 || s.Route.GetSlot() != 2 || s.Gateway != "gw-2" {
		t.Errorf("session after takeover: %+v", s)
	}
	if want := (&eventspb.Route{Slot: connA.slot, Connection: connA.connection, Generation: 1}); !s.PendingRemoval.EqualVT(want) || s.RemoveEverywhere {
		t.Errorf("after takeover: pending removal %v, remove everywhere %v; want %v, false", s.PendingRemoval, s.RemoveEverywhere, want)
	}
}

// The session a takeover ended leaves the routers when its connection's
// end comes: from the partitions that end names, or from every partition
// when it could not name them (and then the next session end removes
// everywhere too).
func TestTakenOverSessionLeavesAtItsConnectionsEnd(t *testing.T) {
	t.Run("partitions known", func(t *testing.T) {
		h := newHarness(t)
		h.batch(connA.connect(true, 0, nil))
		h.batch(connA2.connect(true, 0, nil))
		checkOutputs(t, h.batch(knownOf(connA, 1, nil, 2)), removeAllOf(connA, 1, 2))
		if s := h.session(connA2); s.PendingRemoval != nil || s.RemoveEverywhere || !s.Online {
			t.Errorf("after the old connection's end: %+v", s)
		}
		// Again: stale.
		if got := h.batch(knownOf(connA, 1, nil, 2)); len(got) != 0 {
			t.Errorf("the old connection's end again: %v, want nothing", got)
		}
		// The new session leaves where its own connection wrote.
		checkOutputs(t, h.batch(knownOf(connA2, 2, nil, 3)), outputs(removeAllOf(connA2, 2, 3), wantPresenceGone(connA2)))
	})
	t.Run("partitions not known", func(t *testing.T) {
		h := newHarness(t)
		h.batch(connA.connect(true, 0, nil))
		h.batch(connA2.connect(true, 0, nil))
		checkOutputs(t, h.batch(connA.disconnect(1, true, nil)), wantRemoveAll(connA, 1))
		if s := h.session(connA2); s.PendingRemoval != nil || !s.RemoveEverywhere {
			t.Errorf("after the old connection's end: pending %v, remove everywhere %v; want nil, true", s.PendingRemoval, s.RemoveEverywhere)
		}
		checkOutputs(t, h.batch(knownOf(connA2, 2, nil, 3)), outputs(wantRemoveAll(connA2, 2), wantPresence(connA2, false, false, 2)))
	})
	t.Run("the new session ends first", func(t *testing.T) {
		// Its removal, everywhere, takes the old session's entries too;
		// the old connection's end is stale then.
		h := newHarness(t)
		h.batch(connA.connect(true, 0, nil))
		h.batch(connA2.connect(true, 0, nil))
		checkOutputs(t, h.batch(knownOf(connA2, 2, nil, 3)), outputs(wantRemoveAll(connA2, 2), wantPresence(connA2, false, false, 2)))
		if got := h.batch(knownOf(connA, 1, nil, 2)); len(got) != 0 {
			t.Errorf("the old connection's end after the new session's: %v, want nothing", got)
		}
	})
	t.Run("taken over twice", func(t *testing.T) {
		// The second takeover owes every partition the first one's
		// removal: it removes everywhere at once.
		h := newHarness(t)
		connA3 := conn{tenant: "acme", client: "acme-dev1", gateway: "gw-3", slot: 3, connection: 30, request: 300}
		h.batch(connA.connect(true, 0, nil))
		h.batch(connA2.connect(true, 0, nil))
		checkOutputs(t, h.batch(connA3.connect(true, 0, nil)), outputs(
			wantKick(connA2), wantRemoveAll(connA2, 2), wantPresence(connA3, true, false, 3), wantResult(connA3, 3)))
		if s := h.session(connA3); s.PendingRemoval != nil || !s.RemoveEverywhere {
			t.Errorf("after the second takeover: pending %v, remove everywhere %v; want nil, true", s.PendingRemoval, s.RemoveEverywhere)
		}
	})
	t.Run("a resumed session", func(t *testing.T) {
		// The session taken over began with an earlier connection: its
		// last connection cannot name every partition of it.
		h := newHarness(t)
		h.batch(connA.connect(false, 3600, nil))
		h.batch(connA.disconnect(1, false, nil))
		h.batch(connA2.connect(false, 3600, nil))
		connA3 := conn{tenant: "acme", client: "acme-dev1", gateway: "gw-3", slot: 3, connection: 30, request: 300}
		got := h.batch(connA3.connect(true, 0, nil))
		if n := len(removeAllIn(got)); n != testMessagesPartitions {
			t.Errorf("takeover of a resumed session: %d removals, want %d", n, testMessagesPartitions)
		}
	})
	t.Run("after a restart", func(t *testing.T) {
		h := newHarness(t)
		h.batch(connA.connect(true, 0, nil))
		h.batch(connA2.connect(true, 0, nil))
		h.restart()
		checkOutputs(t, h.batch(knownOf(connA, 1, nil)), outputs())
		if s := h.session(connA2); s.PendingRemoval != nil {
			t.Errorf("pending removal %v after the old connection's end", s.PendingRemoval)
		}
	})
}

// removeAllIn returns the REMOVE_ALLs among outs.
func removeAllIn(outs []output) []output {
	var r []output
	for _, o := range outs {
		if o.env.GetSubscriptionChange().GetOp() == eventspb.SubscriptionChange_OP_REMOVE_ALL {
			r = append(r, o)
		}
	}
	return r
}

func TestTakeoverPublishesOldWill(t *testing.T) {
	h := newHarness(t)
	w := testWill()
	h.batch(connA.connect(true, 0, w))
	got := h.batch(connA2.connect(true, 0, nil))
	checkOutputs(t, got, outputs(
		wantKick(connA),
		wantPresence(connA2, true, false, 2),
		wantWill(connA, w, 1),
		wantResult(connA2, 2),
	))
}

func TestReconnectOfEndedSessionRemovesNothing(t *testing.T) {
	h := newHarness(t)
	h.batch(connA.connect(true, 0, nil))
	h.batch(connA.disconnect(1, false, nil))
	// The session ended at the disconnect (its removals were written then).
	got := h.batch(connA2.connect(true, 0, nil))
	checkOutputs(t, got, outputs(wantPresence(connA2, true, false, 2), wantResult(connA2, 2)))
}

func TestPersistentSessionResumes(t *testing.T) {
	h := newHarness(t)
	sub := &eventspb.SessionSubscription{Filter: "a/+", Options: &eventspb.SubscriptionOptions{Qos: 1}}
	h.batch(connA.connect(false, 3600, nil), connA.subscriptions(1, nil, sub))
	h.batch(connA.disconnect(1, false, nil))
	// Without Clean Start the session continues: nothing is removed, the
	// answer says the session is present and carries its subscriptions.
	got := h.batch(connA2.connect(false, 3600, nil))
	res := wantResult(connA2, 2)
	cr := res.env.GetConnectResult()
	cr.SessionPresent = true
	cr.SessionGeneration = 1 // the session began with the first connection, the answer says,
	moved := sub.CloneVT()
	moved.Generation = 2 // the resuming connection binds it again
	cr.Subscriptions = []*eventspb.SessionSubscription{moved}
	pr := wantPresence(connA2, true, true, 2)
	pr.env.GetPresence().SessionGeneration = 1 // so do the presence's
	checkOutputs(t, got, outputs(pr, res))
	if s := h.session(connA2); !s.Active || len(s.Subscriptions) != 1 {
		t.Errorf("resumed session %+v, want active with its subscription", s)
	}
}

func TestCleanStartEndsPersistentSession(t *testing.T) {
	h := newHarness(t)
	h.batch(connA.connect(false, 3600, nil))
	h.batch(connA.disconnect(1, false, nil))
	got := h.batch(connA2.connect(true, 3600, nil))
	checkOutputs(t, got, outputs(wantRemoveAll(connA, 1), wantPresence(connA2, true, true, 2), wantResult(connA2, 2)))
}

func TestDuplicateConnectAnsweredAgain(t *testing.T) {
	h := newHarness(t)
	h.batch(connA.connect(true, 0, nil))
	got := h.batch(connA.connect(true, 0, nil))
	checkOutputs(t, got, outputs(wantResult(connA, 1)))
	if s := h.session(connA); s.Generation != 1 || !s.Online {
		t.Errorf("session after a duplicate connect: %+v", s)
	}
}

func TestReusedConnectionIDIsNotKicked(t *testing.T) {
	h := newHarness(t)
	h.batch(connA.connect(true, 0, nil))
	again := connA
	again.request = 999 // a restarted gateway reusing connection id 10
	got := h.batch(again.connect(true, 0, nil))
	checkOutputs(t, got, outputs(wantRemoveAll(connA, 1), wantPresence(again, true, false, 2), wantResult(again, 2)))
}

func TestGenerationSurvivesRestart(t *testing.T) {
	h := newHarness(t)
	h.batch(connA.connect(true, 0, nil))
	h.batch(connA.disconnect(1, false, nil))
	h.restart()
	if h.next != 2 {
		t.Errorf("consumes from %d after restart, want 2", h.next)
	}
	checkOutputs(t, h.batch(connA2.connect(true, 0, nil)), outputs(wantPresence(connA2, true, false, 2), wantResult(connA2, 2)))
}

func TestBatchRoundsKeepPerClientOrder(t *testing.T) {
	h := newHarness(t)
	got := h.batch(connA.connect(true, 0, nil), connB.connect(true, 0, nil), connA2.connect(true, 0, nil))
	checkOutputs(t, got, outputs(
		// Round 1: A and B together, stage by stage.
		wantPresence(connA, true, false, 1), wantPresence(connB, true, false, 1),
		wantResult(connA, 1), wantResult(connB, 1),
		// Round 2: A's second connection, after A's first was answered.
		wantKick(connA),
		wantPresence(connA2, true, false, 2),
		wantResult(connA2, 2),
	))
	if len(h.writes) != 5 {
		t.Errorf("%d writes, want 5 (2 stages of round 1, 3 of round 2)", len(h.writes))
	}
}

func TestFailedBatchChangesNothing(t *testing.T) {
	for _, where := range []string{"write", "commit"} {
		t.Run(where, func(t *testing.T) {
			h := newHarness(t)
			h.batch(connA.connect(true, 0, nil))
			boom := errors.New("boom")
			if where == "write" {
				h.fail = boom
			} else {
				h.store.setFailCommit(boom)
			}
			next := h.next
			rec := record{offset: next, env: connA2.connect(true, 0, nil)}
			if err := h.p.process(t.Context(), []record{rec}, h.write); !errors.Is(err, boom) {
				t.Fatalf("process error %v, want %v", err, boom)
			}
			if s := h.session(connA); s.Generation != 1 || s.Route.GetSlot() != connA.slot {
				t.Errorf("state changed by a failed batch: %+v", s)
			}
			if got := h.p.nextOffset(); got != next {
				t.Errorf("next offset %d after a failed batch, want %d", got, next)
			}
			// Reload and replay: the same outputs again (at least once), the
			// same generation.
			h.fail = nil
			h.store.setFailCommit(nil)
			h.restart()
			h.next = next
			checkOutputs(t, h.batch(connA2.connect(true, 0, nil)), outputs(
				wantKick(connA), wantPresence(connA2, true, false, 2), wantResult(connA2, 2),
			))
		})
	}
}

func TestProcessSkipsAppliedAndUndecodable(t *testing.T) {
	h := newHarness(t)
	h.batch(connA.connect(true, 0, nil)) // offset 0
	recs := []record{
		{offset: 0, env: connA2.connect(true, 0, nil)}, // already applied
		{offset: 1, env: nil},                          // undecodable
		{offset: 2, env: &eventspb.Envelope{Tenant: "acme", Event: &eventspb.Envelope_Connect{Connect: &eventspb.Connect{}}}}, // no client id
		{offset: 3, env: connB.env(&eventspb.Envelope{Event: &eventspb.Envelope_Kick{Kick: &eventspb.Kick{}}})},               // not a session event
		{offset: 4, env: connB.env(&eventspb.Envelope{Event: &eventspb.Envelope_Connect{Connect: &eventspb.Connect{
			Route: &eventspb.Route{Slot: testDeliveriesPartitions},
		}}})}, // no valid slot
	}
	h.writes = nil
	if err := h.p.process(t.Context(), recs, h.write); err != nil {
		t.Fatal(err)
	}
	if len(h.writes) != 0 {
		t.Errorf("writes %v, want none", h.writes)
	}
	if got := h.p.nextOffset(); got != 5 {
		t.Errorf("next offset %d, want 5", got)
	}
	if s := h.session(connA); s.Generation != 1 {
		t.Errorf("an applied record was applied again: %+v", s)
	}
	if _, ok := h.p.snapshot(connB.key()); ok {
		t.Error("an invalid connect created a session")
	}
}

func TestOutputsDoNotAliasState(t *testing.T) {
	h := newHarness(t)
	w := testWill()
	got := h.batch(connA.connect(true, 0, w))
	got[0].env.GetPresence().Route.Slot = 99
	w.Message.Topic = "changed"
	s := h.session(connA)
	if s.Route.GetSlot() != connA.slot || s.Will.GetMessage().GetTopic() != "dev1/status" {
		t.Errorf("session aliases inputs or outputs: %+v", s)
	}
	if !proto.Equal(s.Will, testWill()) {
		t.Errorf("will %v, want %v", s.Will, testWill())
	}
}

// Every output of a record carries the record's trace context (the
// service writes a child of it into the produced record's header).
func TestOutputsCarryTheirRecordsTrace(t *testing.T) {
	h := newHarness(t)
	trace := []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	recs := []record{{offset: h.next, env: connA.connect(false, 60, nil), trace: trace}}
	h.next++
	if err := h.p.process(t.Context(), recs, h.write); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, w := range h.writes {
		for _, o := range w {
			if string(o.trace) != string(trace) {
				t.Fatalf("output %v without the connect's trace", o.env)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("no outputs")
	}
}

// The record produced for an output continues the output's trace: a child
// (the same trace id and flags, a new parent id) in its traceparent header;
// an output without a trace gets none.
func TestRecordContinuesTrace(t *testing.T) {
	const trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	s := &Service{topics: kafka.DefaultCatalogue()}
	o := output{stage: stagePresence, dest: toPresence, partition: byKey, key: kafka.Key("t", "c"),
		env: &eventspb.Envelope{Tenant: "t", ClientId: "c", Event: &eventspb.Envelope_Presence{Presence: &eventspb.Presence{Online: true}}}}
	if r := s.record(o); kafka.Traceparent(r) != "" || r.Topic != kafka.TopicPresence || string(r.Key) != "t/c" {
		t.Errorf("record of an output without a trace: topic %s key %q traceparent %q", r.Topic, r.Key, kafka.Traceparent(r))
	}
	o.trace = []byte(trace)
	r := s.record(o)
	if tp := kafka.Traceparent(r); len(tp) != len(trace) || tp[:36] != trace[:36] || tp[36:52] == trace[36:52] || tp[52:] != trace[52:] {
		t.Errorf("traceparent %q is not a child of %q", tp, trace)
	}
}

// A session is named by the generation of the connection that began it: a
// resumed connection keeps it, a clean start takes its own, and a session
// stored without it (by an older version) gets one at its next resumption
// that no earlier connection of a later session can have. The presence
// says it too (routers drop the subscriptions of older generations).
func TestSessionGeneration(t *testing.T) {
	h := newHarness(t)
	sessionGen := func(outs []output) uint64 {
		t.Helper()
		var g uint64
		found := false
		for _, o := range outs {
			if cr := o.env.GetConnectResult(); cr != nil {
				g, found = cr.GetSessionGeneration(), true
			}
		}
		if !found {
			t.Fatal("no ConnectResult")
		}
		presences := 0
		for _, o := range outs {
			if pr := o.env.GetPresence(); pr != nil {
				presences++
				if pr.GetSessionGeneration() != g {
					t.Errorf("presence: session generation %d, the answer's %d", pr.GetSessionGeneration(), g)
				}
			}
		}
		if presences == 0 {
			t.Error("no Presence")
		}
		return g
	}
	if g := sessionGen(h.batch(connA.connect(false, 3600, nil))); g != 1 {
		t.Errorf("first connection: session generation %d, want 1", g)
	}
	h.batch(connA.disconnect(1, false, nil))
	if g := sessionGen(h.batch(connA2.connect(false, 3600, nil))); g != 1 {
		t.Errorf("resumed: session generation %d, want 1", g)
	}
	for _, o := range h.batch(connA2.disconnect(2, false, nil)) {
		if pr := o.env.GetPresence(); pr != nil && pr.GetSessionGeneration() != 1 {
			t.Errorf("offline presence: session generation %d, want 1", pr.GetSessionGeneration())
		}
	}
	if g := sessionGen(h.batch(connA.connect(true, 3600, nil))); g != 3 {
		t.Errorf("clean start: session generation %d, want 3", g)
	}
	if s := h.session(connA); s.SessionGeneration != 3 {
		t.Errorf("stored session generation %d, want 3", s.SessionGeneration)
	}

	// A session stored before the field existed.
	h.batch(connA.disconnect(3, false, nil))
	old := h.session(connA)
	old.SessionGeneration = 0
	h.p.sessions[connA.key()] = old
	if g := sessionGen(h.batch(connA2.connect(false, 3600, nil))); g != 3 {
		t.Errorf("resumed session stored without it: session generation %d, want 3", g)
	}
}
