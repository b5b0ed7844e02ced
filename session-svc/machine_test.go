package sessionsvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
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

func TestExpiredSessionDoesNotResume(t *testing.T) {
	h := newHarness(t)
	h.batch(connA.connect(false, 10, nil))
	h.batch(connA.disconnect(1, false, nil))
	// The connect comes 10 s later: its own time decides (the machine's
	// clock, which stamps the outputs, does not).
	h.m.now = func() time.Time { return testNow.Add(10 * time.Second) }
	late := connA2.connect(false, 10, nil)
	late.TimestampUs = testNow.Add(10 * time.Second).UnixMicro()
	got := h.batch(late)
	for i := range got { // the outputs carry the later time
		got[i].env.TimestampUs = testNow.UnixMicro()
	}
	checkOutputs(t, got, outputs(wantRemoveAll(connA, 1), wantPresence(connA2, true, true, 2), wantResult(connA2, 2)))
}

func TestTickExpiresSessions(t *testing.T) {
	h := newHarness(t)
	h.batch(connA.connect(false, 10, nil), connB.connect(false, kafka.SessionExpiryNever, nil))
	h.batch(connA.disconnect(1, false, nil), connB.disconnect(1, false, nil))
	tick := func(at time.Time) *eventspb.Envelope {
		return &eventspb.Envelope{TimestampUs: at.UnixMicro(), Event: &eventspb.Envelope_SessionTick{SessionTick: &eventspb.SessionTick{}}}
	}
	if got := h.batch(tick(testNow.Add(9 * time.Second))); len(got) != 0 {
		t.Fatalf("tick before the expiry: %d outputs", len(got))
	}
	got := h.batch(tick(testNow.Add(10 * time.Second)))
	for i := range got {
		got[i].env.TimestampUs = testNow.UnixMicro()
	}
	checkOutputs(t, got, outputs(wantRemoveAll(connA, 1)))
	if s := h.session(connA); s.Active {
		t.Error("the expired session is still active")
	}
	if s := h.session(connB); !s.Active {
		t.Error("a session that never expires ended")
	}
	// A restart replays nothing twice: the tick's effect is committed.
	h.restart()
	if got := h.batch(tick(testNow.Add(20 * time.Second))); len(got) != 0 {
		t.Fatalf("a later tick after the restart: %d outputs", len(got))
	}
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

func TestStaleDisconnectIgnored(t *testing.T) {
	h := newHarness(t)
	h.batch(connA.connect(true, 0, testWill()))
	h.batch(connA2.connect(true, 0, testWill()))
	// The old connection's first end brings its session's removal (the
	// takeover ended it); after that it is stale like the others.
	if got := removeAllIn(h.batch(connA.disconnect(1, true, nil))); len(got) != testMessagesPartitions {
		t.Errorf("the old connection's end: %d removals, want %d", len(got), testMessagesPartitions)
	}
	before := h.session(connA2)
	for name, env := range map[string]*eventspb.Envelope{
		"old connection":     connA.disconnect(1, true, nil),
		"old generation":     connA2.disconnect(1, true, nil),
		"future generation":  connA2.disconnect(3, true, nil),
		"another connection": connB.disconnect(2, true, nil),
	} {
		if name == "another connection" {
			env.ClientId = connA2.client
		}
		if got := h.batch(env); len(got) != 0 {
			t.Errorf("%s: outputs %v, want none", name, got)
		}
	}
	if after := h.session(connA2); !after.Equal(before) {
		t.Errorf("stale disconnects changed the session:\n got %+v\nwant %+v", after, before)
	}
	// And once the connection ended, its duplicate disconnect is stale too.
	if got := h.batch(connA2.disconnect(2, false, nil)); len(got) == 0 {
		t.Fatal("current disconnect ignored")
	}
	if got := h.batch(connA2.disconnect(2, true, nil)); len(got) != 0 {
		t.Errorf("duplicate disconnect: outputs %v, want none", got)
	}
}

func TestDisconnectPublishesWill(t *testing.T) {
	h := newHarness(t)
	w := testWill()
	h.batch(connA.connect(true, 0, w))
	got := h.batch(connA.disconnect(1, true, nil))
	checkOutputs(t, got, outputs(
		wantRemoveAll(connA, 1),
		wantPresence(connA, false, false, 1),
		wantWill(connA, w, 1),
	))
	s := h.session(connA)
	if s.Active || s.Online || s.Will != nil || s.Generation != 1 || !s.DisconnectedAt.Equal(testNow) {
		t.Errorf("session after disconnect: %+v", s)
	}
	// The next will gets the next sequence number.
	h.batch(connA2.connect(true, 0, w))
	checkOutputs(t, h.batch(connA2.disconnect(2, true, nil)), outputs(
		wantRemoveAll(connA2, 2),
		wantPresence(connA2, false, false, 2),
		wantWill(connA2, w, 2),
	))
}

func TestNormalDisconnectDiscardsWill(t *testing.T) {
	h := newHarness(t)
	h.batch(connA.connect(false, 60, testWill()))
	got := h.batch(connA.disconnect(1, false, nil))
	checkOutputs(t, got, outputs(wantPresence(connA, false, true, 1)))
	if s := h.session(connA); !s.Active || s.Online || s.Will != nil {
		t.Errorf("persistent session after disconnect: %+v", s)
	}
}

func TestDisconnectNonPersistentRemovesEverywhere(t *testing.T) {
	zero, hour := uint32(0), uint32(3600)
	tests := []struct {
		name       string
		connExpiry uint32
		discExpiry *uint32
		want       func() []output
		wantActive bool
	}{
		{"expiry 0", 0, nil, func() []output {
			return outputs(wantRemoveAll(connA, 1), wantPresence(connA, false, false, 1))
		}, false},
		{"set to 0 by DISCONNECT", 3600, &zero, func() []output {
			return outputs(wantRemoveAll(connA, 1), wantPresence(connA, false, false, 1))
		}, false},
		{"persistent", 3600, nil, func() []output {
			return outputs(wantPresence(connA, false, true, 1))
		}, true},
		{"0 raised by DISCONNECT is refused", 0, &hour, func() []output {
			return outputs(wantRemoveAll(connA, 1), wantPresence(connA, false, false, 1))
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.batch(connA.connect(true, tc.connExpiry, nil))
			h.batch(connA.subscriptions(1, nil, &eventspb.SessionSubscription{Filter: "a/#"}))
			checkOutputs(t, h.batch(connA.disconnect(1, true, tc.discExpiry)), tc.want())
			s := h.session(connA)
			if s.Active != tc.wantActive || (len(s.Subscriptions) == 1) != tc.wantActive {
				t.Errorf("session after disconnect: active %v, subscriptions %v", s.Active, s.Subscriptions)
			}
		})
	}
}

// A session that began with the connection that ends it is removed only
// from the partitions the gateway says the connection left state in
// (Disconnect.router_partitions); a session that outlived an earlier
// connection, a Disconnect that does not know, a list the service cannot
// trust, or the first end after one whose connection could still write,
// from every partition.
func TestDisconnectRemovesFromTheConnectionsPartitions(t *testing.T) {
	zero := uint32(0)
	t.Run("one partition", func(t *testing.T) {
		h := newHarness(t)
		h.batch(connA.connect(true, 0, nil))
		checkOutputs(t, h.batch(knownOf(connA, 1, nil, 2)), outputs(removeAllOf(connA, 1, 2), wantPresenceGone(connA)))
	})
	t.Run("none", func(t *testing.T) {
		h := newHarness(t)
		h.batch(connA.connect(true, 0, nil))
		checkOutputs(t, h.batch(knownOf(connA, 1, nil)), outputs(wantPresenceGone(connA)))
		if s := h.session(connA); s.Active {
			t.Error("the session is still active")
		}
	})
	t.Run("not known", func(t *testing.T) {
		h := newHarness(t)
		h.batch(connA.connect(true, 0, nil))
		checkOutputs(t, h.batch(connA.disconnect(1, false, nil)), outputs(wantRemoveAll(connA, 1), wantPresence(connA, false, false, 1)))
	})
	t.Run("out of range", func(t *testing.T) {
		for _, bad := range []int32{testMessagesPartitions, -1} {
			h := newHarness(t)
			h.batch(connA.connect(true, 0, nil))
			checkOutputs(t, h.batch(knownOf(connA, 1, nil, 1, bad)), outputs(wantRemoveAll(connA, 1), wantPresenceGone(connA)))
		}
	})
	t.Run("resumed session", func(t *testing.T) {
		// The session's first connection subscribed; its second knows
		// only its own records, so the session leaves every partition.
		h := newHarness(t)
		h.batch(connA.connect(false, 3600, nil))
		h.batch(connA.disconnect(1, false, nil))
		h.batch(connA2.connect(false, 3600, nil))
		got := h.batch(knownOf(connA2, 2, &zero))
		pr := wantPresence(connA2, false, false, 2)
		pr.env.GetPresence().SessionGeneration = 1
		checkOutputs(t, got, outputs(wantRemoveAll(connA2, 2), pr))
	})
	t.Run("after a takeover", func(t *testing.T) {
		// The session taken over has not left the routers yet (its
		// connection's end has not come): the next session's end removes
		// everywhere, the one after that only where its connection wrote.
		h := newHarness(t)
		h.batch(connA.connect(true, 0, nil))
		h.batch(connA2.connect(true, 0, nil))
		if s := h.session(connA2); s.PendingRemoval == nil {
			t.Error("a takeover left no removal pending")
		}
		got := h.batch(knownOf(connA2, 2, nil, 2))
		checkOutputs(t, got, outputs(wantRemoveAll(connA2, 2), wantPresence(connA2, false, false, 2)))
		h.batch(connA.connect(true, 0, nil))
		got = h.batch(knownOf(connA, 3, nil, 1))
		checkOutputs(t, got, outputs(removeAllOf(connA, 3, 1), wantPresenceGone(connA)))
	})
	t.Run("after its gateway was gone", func(t *testing.T) {
		h := newHarness(t)
		h.batch(connA.connect(true, 0, nil))
		sess := h.session(connA)
		outs, _ := h.p.m.gatewayGone(connA.key(), sess, testNow, nil)
		removals := 0
		for _, o := range outs {
			if o.env.GetSubscriptionChange() != nil {
				removals++
			}
		}
		if removals != testMessagesPartitions || !sess.RemoveEverywhere {
			t.Fatalf("gateway gone: %d removals, remove everywhere %v; want %d, true", removals, sess.RemoveEverywhere, testMessagesPartitions)
		}
		h.p.sessions[connA.key()] = sess
		h.batch(connA2.connect(true, 0, nil))
		got := h.batch(knownOf(connA2, 2, nil))
		checkOutputs(t, got, outputs(wantRemoveAll(connA2, 2), wantPresence(connA2, false, false, 2)))
		if s := h.session(connA2); s.RemoveEverywhere {
			t.Error("remove everywhere still set after a removal everywhere")
		}
	})
}

// knownOf is c's Disconnect of generation gen that names the partitions
// parts (router_partitions, known).
func knownOf(c conn, gen uint64, expiry *uint32, parts ...int32) *eventspb.Envelope {
	env := c.disconnect(gen, false, expiry)
	d := env.GetDisconnect()
	d.RouterPartitions, d.RouterPartitionsKnown = parts, true
	return env
}

// removeAllOf is the REMOVE_ALL of c's session of generation gen to the
// partitions parts alone.
func removeAllOf(c conn, gen uint64, parts ...int32) []output {
	var outs []output
	for _, o := range wantRemoveAll(c, gen) {
		if slices.Contains(parts, o.partition) {
			outs = append(outs, o)
		}
	}
	return outs
}

func TestSessionSubscriptionsRecorded(t *testing.T) {
	h := newHarness(t)
	h.batch(connA.connect(false, 3600, nil))
	sub := func(f string, qos uint32) *eventspb.SessionSubscription {
		return &eventspb.SessionSubscription{Filter: f, Options: &eventspb.SubscriptionOptions{Qos: qos}}
	}
	got := h.batch(
		connA.subscriptions(1, nil, sub("b/+", 1), sub("a/#", 0), sub("$share/g/c", 2)),
		connA.subscriptions(1, []string{"b/+", "missing"}),
		connA.subscriptions(1, nil, sub("a/#", 2)), // replaces
		connA.subscriptions(0, nil, sub("stale", 1)),
	)
	if len(got) != 0 {
		t.Errorf("session subscriptions produced %v", got)
	}
	want := []*eventspb.SessionSubscription{sub("$share/g/c", 2), sub("a/#", 2)}
	for _, w := range want {
		w.Generation = 1 // the connection's that set them
	}
	if diff := cmp.Diff(want, h.session(connA).Subscriptions, protocmp.Transform()); diff != "" {
		t.Errorf("subscriptions (-want +got):\n%s", diff)
	}
	// They are persisted with the session.
	h.restart()
	if diff := cmp.Diff(want, h.session(connA).Subscriptions, protocmp.Transform()); diff != "" {
		t.Errorf("subscriptions after restart (-want +got):\n%s", diff)
	}
}

// A SUBSCRIBE or UNSUBSCRIBE of an earlier connection of the same session
// (one that raced a resumption elsewhere) changes the session's list as it
// changes the routers' entries: per filter, the newer generation wins. One
// of a session that ended changes nothing.
func TestSessionSubscriptionsOfAnEarlierConnection(t *testing.T) {
	sub := func(f string) *eventspb.SessionSubscription {
		return &eventspb.SessionSubscription{Filter: f, Options: &eventspb.SubscriptionOptions{Qos: 1}}
	}
	filters := func(h *harness, c conn) []string {
		var fs []string
		for _, s := range h.session(c).Subscriptions {
			fs = append(fs, fmt.Sprintf("%s@%d", s.GetFilter(), s.GetGeneration()))
		}
		return fs
	}
	t.Run("a late SUBSCRIBE is kept", func(t *testing.T) {
		// The router keeps it (its generation is the session's), so the
		// session lists it: a later connection learns it, and its
		// UNSUBSCRIBE removes it from both.
		h := newHarness(t)
		h.batch(connA.connect(false, 3600, nil))
		h.batch(connA2.connect(false, 3600, nil)) // resumes, generation 2
		h.batch(connA.subscriptions(1, nil, sub("late")))
		if got := filters(h, connA2); !slices.Equal(got, []string{"late@1"}) {
			t.Fatalf("subscriptions %v, want [late@1]", got)
		}
		h.batch(connA2.subscriptions(2, []string{"late"}))
		if got := filters(h, connA2); len(got) != 0 {
			t.Errorf("after the newer connection's UNSUBSCRIBE: %v, want none", got)
		}
	})
	t.Run("a late UNSUBSCRIBE leaves what a resumption bound again", func(t *testing.T) {
		h := newHarness(t)
		h.batch(connA.connect(false, 3600, nil), connA.subscriptions(1, nil, sub("kept")))
		h.batch(connA2.connect(false, 3600, nil)) // binds "kept" with generation 2
		h.batch(connA.subscriptions(1, []string{"kept"}))
		if got := filters(h, connA2); !slices.Equal(got, []string{"kept@2"}) {
			t.Errorf("subscriptions %v, want [kept@2]: the router keeps the entry of generation 2", got)
		}
	})
	t.Run("a change of an ended session is ignored", func(t *testing.T) {
		h := newHarness(t)
		h.batch(connA.connect(false, 3600, nil))
		h.batch(connA2.connect(true, 3600, nil)) // Clean Start: a new session at 2
		h.batch(connA.subscriptions(1, nil, sub("old")))
		if got := filters(h, connA2); len(got) != 0 {
			t.Errorf("subscriptions %v, want none", got)
		}
	})
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

func delayedWill(delay uint32) *eventspb.Will {
	w := testWill()
	w.DelayIntervalS = delay
	return w
}

func tickAt(at time.Time) *eventspb.Envelope {
	return &eventspb.Envelope{TimestampUs: at.UnixMicro(), Event: &eventspb.Envelope_SessionTick{SessionTick: &eventspb.SessionTick{}}}
}

// atTestNow rewrites the outputs' timestamps to testNow, for outputs made
// at a tick's later time.
func atTestNow(outs []output) []output {
	for i := range outs {
		outs[i].env.TimestampUs = testNow.UnixMicro()
	}
	return outs
}

func TestWillDelay(t *testing.T) {
	t.Run("published after the delay", func(t *testing.T) {
		h := newHarness(t)
		h.batch(connA.connect(false, 60, delayedWill(5)))
		if got := h.batch(connA.disconnect(1, true, nil)); len(got) != 1 { // presence only
			t.Fatalf("disconnect with a delayed will: %d outputs, want the presence alone", len(got))
		}
		if got := h.batch(tickAt(testNow.Add(4 * time.Second))); len(got) != 0 {
			t.Fatalf("before the delay: %d outputs", len(got))
		}
		got := atTestNow(h.batch(tickAt(testNow.Add(5 * time.Second))))
		checkOutputs(t, got, outputs(wantWill(connA, delayedWill(5), 1)))
		if got := h.batch(tickAt(testNow.Add(6 * time.Second))); len(got) != 0 {
			t.Fatalf("the will was published twice: %d outputs", len(got))
		}
	})
	t.Run("cancelled by a resuming connection", func(t *testing.T) {
		h := newHarness(t)
		h.batch(connA.connect(false, 60, delayedWill(5)))
		h.batch(connA.disconnect(1, true, nil))
		h.batch(connA2.connect(false, 60, nil))
		if got := h.batch(tickAt(testNow.Add(10 * time.Second))); len(got) != 0 {
			t.Fatalf("a cancelled will produced %d outputs", len(got))
		}
	})
	t.Run("published at session expiry when that comes first", func(t *testing.T) {
		h := newHarness(t)
		h.batch(connA.connect(false, 10, delayedWill(100)))
		h.batch(connA.disconnect(1, true, nil))
		got := atTestNow(h.batch(tickAt(testNow.Add(10 * time.Second))))
		checkOutputs(t, got, outputs(wantRemoveAll(connA, 1), wantWill(connA, delayedWill(100), 1)))
	})
	t.Run("published by a clean start that ends the session", func(t *testing.T) {
		h := newHarness(t)
		h.batch(connA.connect(false, 60, delayedWill(30)))
		h.batch(connA.disconnect(1, true, nil))
		got := h.batch(connA2.connect(true, 0, nil))
		checkOutputs(t, got, outputs(wantRemoveAll(connA, 1), wantPresence(connA2, true, false, 2),
			wantWill(connA, delayedWill(30), 1), wantResult(connA2, 2)))
	})
	t.Run("at once for a session that ends with its connection", func(t *testing.T) {
		h := newHarness(t)
		h.batch(connA.connect(true, 0, delayedWill(30)))
		got := h.batch(connA.disconnect(1, true, nil))
		checkOutputs(t, got, outputs(wantRemoveAll(connA, 1), wantPresence(connA, false, false, 1), wantWill(connA, delayedWill(30), 1)))
	})
	t.Run("not published on a normal DISCONNECT", func(t *testing.T) {
		h := newHarness(t)
		h.batch(connA.connect(false, 60, delayedWill(5)))
		h.batch(connA.disconnect(1, false, nil))
		if got := h.batch(tickAt(testNow.Add(10 * time.Second))); len(got) != 0 {
			t.Fatalf("a discarded will produced %d outputs", len(got))
		}
	})
}

func inboxAppend(c conn, topic string) *eventspb.Envelope {
	return inboxAppendQoS(c, topic, 1)
}

func inboxAppendQoS(c conn, topic string, qos uint32) *eventspb.Envelope {
	return c.env(&eventspb.Envelope{Event: &eventspb.Envelope_InboxAppend{InboxAppend: &eventspb.InboxAppend{
		Message: &eventspb.Message{Topic: topic, Payload: []byte(topic), Qos: qos},
		Target:  &eventspb.Target{Qos: qos, SubscriptionIds: []uint32{7}},
	}}})
}

func inboxAck(c conn, seq uint64, received bool) *eventspb.Envelope {
	return c.env(&eventspb.Envelope{Event: &eventspb.Envelope_InboxAck{InboxAck: &eventspb.InboxAck{Seq: seq, Received: received}}})
}

// sent is what one delivery output says about its single target.
type sent struct {
	topic    string
	id       uint32
	seq      uint64
	dup, rel bool
}

// deliveries returns the deliveries among outs, checking that each goes to
// c's connection.
func deliveries(t *testing.T, c conn, outs []output) []sent {
	t.Helper()
	var got []sent
	for _, o := range outs {
		d := o.env.GetDelivery()
		if d == nil {
			continue
		}
		tg := d.Targets[0]
		if o.partition != c.slot || len(d.Targets) != 1 || tg.Connection != c.connection || tg.ClientId != c.client {
			t.Fatalf("delivery routed to %+v, want %s's connection %d on slot %d", o, c.client, c.connection, c.slot)
		}
		got = append(got, sent{d.Message.Topic, tg.PacketId, tg.InboxSeq, tg.Dup, tg.Release})
	}
	return got
}

func checkSent(t *testing.T, what string, got, want []sent) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: sent %+v, want %+v", what, got, want)
	}
}

func TestInbox(t *testing.T) {
	h := newHarness(t)
	h.batch(connA.connect(false, 60, nil))
	// Online: kept and forwarded at once with its packet identifier.
	checkSent(t, "online", deliveries(t, connA, h.batch(inboxAppend(connA, "t/0"))), []sent{{"t/0", 1, 1, false, false}})
	if s := h.session(connA); len(s.Inbox) != 1 || !s.Inbox[0].Sent {
		t.Fatalf("online message not kept until acknowledged: %v", s.Inbox)
	}
	if got := h.batch(inboxAck(connA, 1, false)); len(got) != 0 {
		t.Fatalf("PUBACK produced %d outputs", len(got))
	}
	if s := h.session(connA); len(s.Inbox) != 0 {
		t.Fatal("acknowledged message still in the inbox")
	}
	h.batch(connA.disconnect(1, false, nil))
	// Offline: kept, up to maxInbox (2); the third is dropped.
	if got := h.batch(inboxAppend(connA, "t/1"), inboxAppend(connA, "t/2"), inboxAppend(connA, "t/3")); len(got) != 0 {
		t.Fatalf("offline: %d outputs, want none", len(got))
	}
	if s := h.session(connA); len(s.Inbox) != 2 || s.InboxDropped != 1 {
		t.Fatalf("inbox holds %d and dropped %d, want 2 (the bound) and 1", len(s.Inbox), s.InboxDropped)
	}
	h.restart() // the inbox is in the store
	got := h.batch(connA2.connect(false, 60, nil))
	for _, o := range got {
		if cr := o.env.GetConnectResult(); cr != nil && cr.InboxDropped != 1 {
			t.Fatalf("resumed answer reports %d dropped, want 1", cr.InboxDropped)
		}
	}
	checkSent(t, "resume", deliveries(t, connA2, got), []sent{{"t/1", 2, 2, false, false}, {"t/2", 3, 3, false, false}})
	// Unacknowledged: sent again on the next resume, with DUP and the same
	// packet identifier.
	h.batch(inboxAck(connA2, 2, false), connA2.disconnect(2, true, nil))
	checkSent(t, "second resume", deliveries(t, connA, h.batch(connA.connect(false, 60, nil))), []sent{{"t/2", 3, 3, true, false}})
	// A clean start discards the inbox.
	h.batch(connA.disconnect(3, false, nil), inboxAppend(connA, "t/4"))
	if d := deliveries(t, connA2, h.batch(connA2.connect(true, 60, nil))); len(d) != 0 {
		t.Fatalf("a clean start delivered the old session's inbox: %v", d)
	}
	if s := h.session(connA2); len(s.Inbox) != 0 {
		t.Fatalf("a clean start kept %d inbox entries", len(s.Inbox))
	}
}

func TestInboxQoS2ResumesWithPubrel(t *testing.T) {
	h := newHarness(t)
	h.batch(connA.connect(false, 60, nil))
	checkSent(t, "online", deliveries(t, connA, h.batch(inboxAppendQoS(connA, "q2", 2))), []sent{{"q2", 1, 1, false, false}})
	h.batch(inboxAck(connA, 1, true)) // PUBREC
	if s := h.session(connA); len(s.Inbox) != 1 || !s.Inbox[0].Received {
		t.Fatalf("PUBREC not recorded: %v", s.Inbox)
	}
	h.batch(connA.disconnect(1, true, nil))
	h.restart()
	checkSent(t, "resume", deliveries(t, connA2, h.batch(connA2.connect(false, 60, nil))), []sent{{"q2", 1, 1, true, true}})
	h.batch(inboxAck(connA2, 1, false)) // PUBCOMP
	if s := h.session(connA2); len(s.Inbox) != 0 {
		t.Fatal("PUBCOMP did not end the entry")
	}
	// An acknowledgement of an ended entry, and a PUBREC of a QoS 1 one,
	// change nothing.
	h.batch(inboxAppend(connA2, "q1"))
	if got := h.batch(inboxAck(connA2, 1, false), inboxAck(connA2, 2, true)); len(got) != 0 {
		t.Fatalf("stale acknowledgements produced %d outputs", len(got))
	}
	if s := h.session(connA2); len(s.Inbox) != 1 || s.Inbox[0].Received {
		t.Fatalf("stale acknowledgements changed the inbox: %v", s.Inbox)
	}
}

func TestInboxWithoutPersistentSession(t *testing.T) {
	h := newHarness(t)
	h.batch(connA.connect(true, 0, nil))
	// The router saw a persistent session that has since become a clean
	// one: forwarded without tracking.
	checkSent(t, "clean session", deliveries(t, connA, h.batch(inboxAppend(connA, "t"))), []sent{{"t", 0, 0, false, false}})
	if s := h.session(connA); len(s.Inbox) != 0 {
		t.Fatal("a clean session keeps an inbox")
	}
}

func TestInboxSharedEntriesReturnToGroup(t *testing.T) {
	h := newHarness(t)
	h.m.maxInbox = 3
	h.batch(connA.connect(false, 60, nil))
	shared := func(topic string, qos uint32) *eventspb.Envelope {
		env := inboxAppendQoS(connA, topic, qos)
		env.GetInboxAppend().Target.ShareGroup, env.GetInboxAppend().Target.ShareFilter = "g", "jobs/+"
		return env
	}
	h.batch(shared("jobs/1", 1), shared("jobs/2", 2), inboxAppend(connA, "own"))
	h.batch(inboxAck(connA, 2, true)) // jobs/2 is the client's now
	got := h.batch(connA.disconnect(1, true, nil))
	var redispatched []string
	for _, o := range got {
		if sr := o.env.GetSharedRedispatch(); sr != nil {
			if o.dest != toMessages || string(o.key) != "acme/jobs/1" || sr.ExcludeClient != connA.client || sr.ShareGroup != "g" || sr.Filter != "jobs/+" {
				t.Fatalf("redispatch %+v", o)
			}
			redispatched = append(redispatched, sr.Message.Topic)
		}
	}
	if !slices.Equal(redispatched, []string{"jobs/1"}) {
		t.Fatalf("redispatched %v, want [jobs/1]", redispatched)
	}
	var kept []string
	for _, e := range h.session(connA).Inbox {
		kept = append(kept, e.Message.Topic)
	}
	if !slices.Equal(kept, []string{"jobs/2", "own"}) {
		t.Fatalf("inbox keeps %v, want [jobs/2 own]", kept)
	}
}

func TestInboxPacketIDs(t *testing.T) {
	s := &Session{LastPacketID: kafka.MaxInboxPacketID - 1}
	for _, id := range []uint32{kafka.MaxInboxPacketID, 1, 2} {
		s.Inbox = append(s.Inbox, &eventspb.InboxAppend{PacketId: id})
	}
	// kafka.MaxInboxPacketID, 1 and 2 are in use: the next free is 3, then 4.
	if got := nextPacketID(s); got != 3 {
		t.Fatalf("next id %d, want 3", got)
	}
	if got := nextPacketID(s); got != 4 {
		t.Fatalf("next id %d, want 4", got)
	}
}

func TestInboxForwardsShareOneRound(t *testing.T) {
	h := newHarness(t)
	h.batch(connA.connect(false, 60, nil))
	got := deliveries(t, connA, h.batch(inboxAppend(connA, "a"), inboxAppend(connA, "b")))
	checkSent(t, "run", got, []sent{{"a", 1, 1, false, false}, {"b", 2, 2, false, false}})
	if len(h.writes) != 1 {
		t.Fatalf("%d writes for a run of forwarded messages, want 1", len(h.writes))
	}
}

// heartbeat is slot's gateway heartbeat of the run with connection base
// base, at.
func heartbeat(slot int32, base uint64, at time.Time) *eventspb.Envelope {
	return &eventspb.Envelope{Gateway: "gw", TimestampUs: at.UnixMicro(), Event: &eventspb.Envelope_GatewayHeartbeat{
		GatewayHeartbeat: &eventspb.GatewayHeartbeat{Slot: slot, IntervalMs: 1000, ConnectionBase: base},
	}}
}

var (
	run5 = conn{tenant: "acme", client: "acme-dev1", gateway: "gw-1", slot: 1, connection: 5<<24 | 1, request: 100}
	run6 = conn{tenant: "acme", client: "acme-dev2", gateway: "gw-1", slot: 1, connection: 6<<24 | 1, request: 101}
)

func TestGatewayRestartEndsOlderConnections(t *testing.T) {
	h := newHarness(t)
	h.batch(heartbeat(1, 5<<24, testNow), run5.connect(false, 60, testWill()))
	// The same run again: nothing happens.
	if got := h.batch(heartbeat(1, 5<<24, testNow.Add(time.Second))); len(got) != 0 {
		t.Fatalf("heartbeat of the same run: %d outputs", len(got))
	}
	// Run 6 on slot 1: run 5's connections are gone, uncleanly.
	got := h.batch(heartbeat(1, 6<<24, testNow.Add(2*time.Second)), run6.connect(true, 0, nil))
	// (One round, stage by stage: presences, then the will and the answer.)
	checkOutputs(t, got, outputs(wantGoneKick(run5), wantPresence(run5, false, true, 1), wantPresence(run6, true, false, 1),
		wantWill(run5, testWill(), 1), wantResult(run6, 1)))
	if s := h.session(run5); s.Online || !s.Active {
		t.Fatalf("after its gateway restarted: online %v active %v, want an offline persistent session", s.Online, s.Active)
	}
	if s := h.session(run6); !s.Online {
		t.Fatal("the new run's client is offline")
	}
}

// wantGoneKick is the kick of c's connection when its gateway is judged
// gone (in case it is alive after all).
func wantGoneKick(c conn) output {
	o := wantKick(c)
	o.env.GetKick().ReasonCode = 0x80
	return o
}

// ticks processes one SessionTick per second from testNow+from to
// testNow+to (seconds) and returns the second at which outputs came, with
// them (-1 and nil when none came).
func (h *harness) ticks(from, to int) (int, []output) {
	h.t.Helper()
	for sec := from; sec <= to; sec++ {
		if got := h.batch(tickAt(testNow.Add(time.Duration(sec) * time.Second))); len(got) > 0 {
			return sec, got
		}
	}
	return -1, nil
}

func TestSilentGatewayEndsConnections(t *testing.T) {
	h := newHarness(t)
	h.batch(heartbeat(1, 5<<24, testNow), run5.connect(false, 60, testWill()))
	// The first tick starts the clock (grace from it); silent for more
	// than the 10 s timeout after it, the gateway's connections end.
	at, got := h.ticks(1, 20)
	if at != 12 {
		t.Fatalf("connections ended at +%ds, want +12s (10 s after the first tick at +1s)", at)
	}
	checkOutputs(t, got, outputs(wantGoneKick(run5), wantPresence(run5, false, true, 1), wantWill(run5, testWill(), 1)))
	// A heartbeat keeps a gateway alive.
	h.batch(run5.connect(false, 60, nil))
	for sec := 21; sec <= 40; sec++ {
		h.batch(heartbeat(1, 5<<24, testNow.Add(time.Duration(sec)*time.Second)))
		if got := h.batch(tickAt(testNow.Add(time.Duration(sec) * time.Second))); len(got) != 0 {
			t.Fatalf("a live gateway's clients at +%ds: %d outputs", sec, len(got))
		}
	}
}

func TestSilentLogGivesGrace(t *testing.T) {
	h := newHarness(t)
	h.batch(heartbeat(1, 5<<24, testNow), run5.connect(false, 3600, nil), tickAt(testNow.Add(time.Second)))
	// Kafka was down for a minute: no heartbeats, and no ticks either. The
	// gap between ticks gives every gateway a new grace period.
	if at, _ := h.ticks(61, 70); at != -1 {
		t.Fatalf("connections ended at +%ds, right after the log came back", at)
	}
	// The gateway stays silent: its connections end 10 s after the grace began.
	at, got := h.ticks(71, 80)
	if at != 72 {
		t.Fatalf("connections ended at +%ds, want +72s", at)
	}
	checkOutputs(t, got, outputs(wantGoneKick(run5), wantPresence(run5, false, true, 1)))
}

func TestSilentGatewayAfterRestartGetsGrace(t *testing.T) {
	h := newHarness(t)
	h.batch(heartbeat(1, 5<<24, testNow), run5.connect(false, 3600, nil))
	h.restart() // liveness is not stored
	at, got := h.ticks(60, 80)
	if at != 71 {
		t.Fatalf("connections ended at +%ds, want +71s (grace from the first tick after the restart)", at)
	}
	checkOutputs(t, got, outputs(wantGoneKick(run5), wantPresence(run5, false, true, 1)))
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

func TestInboxDropsRoutersRepeats(t *testing.T) {
	h := newHarness(t)
	h.m.maxInbox = 10
	h.batch(connA.connect(false, 60, nil))
	from := func(topic string, partition int32, offset int64) *eventspb.Envelope {
		env := inboxAppend(connA, topic)
		env.GetInboxAppend().Source = &eventspb.Source{Partition: partition, Offset: offset}
		return env
	}
	got := deliveries(t, connA, h.batch(from("a", 1, 5), from("b", 2, 3), from("a-again", 1, 5), from("c", 1, 6)))
	checkSent(t, "first run", got, []sent{{"a", 1, 1, false, false}, {"b", 2, 2, false, false}, {"c", 3, 3, false, false}})
	h.restart() // what was seen is stored with the session
	got = deliveries(t, connA, h.batch(from("b-again", 2, 3), from("c-again", 1, 6), from("d", 2, 4)))
	checkSent(t, "after a restart", got, []sent{{"d", 4, 4, false, false}})
	// A message a gateway returns has no source and is never a repeat.
	if got := deliveries(t, connA, h.batch(inboxAppend(connA, "bounced"))); len(got) != 1 {
		t.Fatalf("returned message: %v", got)
	}
}

func (c conn) abandon() *eventspb.Envelope {
	return c.env(&eventspb.Envelope{Event: &eventspb.Envelope_Disconnect{Disconnect: &eventspb.Disconnect{
		Connection: c.connection, ReasonCode: 0x88, Abandoned: true,
	}}})
}

// A gateway that gave up waiting for a Connect's answer writes an abandoned
// Disconnect right after it: the connection ends without its will, as if
// the client had sent DISCONNECT, and only while it is the client's current
// connection.
func TestAbandonedConnect(t *testing.T) {
	t.Run("non-persistent, in the Connect's batch", func(t *testing.T) {
		h := newHarness(t)
		got := h.batch(connA.connect(true, 0, testWill()), connA.abandon())
		checkOutputs(t, got, outputs(
			wantPresence(connA, true, false, 1),
			wantResult(connA, 1),
			wantRemoveAll(connA, 1),
			wantPresence(connA, false, false, 1),
		)) // no will
		if s := h.session(connA); s.Online || s.Active || s.Will != nil || s.Generation != 1 {
			t.Errorf("session after the abandoned connect: %+v", s)
		}
	})
	t.Run("persistent, in a later batch", func(t *testing.T) {
		h := newHarness(t)
		w := testWill()
		w.DelayIntervalS = 30
		h.batch(connA.connect(false, 3600, w))
		checkOutputs(t, h.batch(connA.abandon()), outputs(wantPresence(connA, false, true, 1)))
		s := h.session(connA)
		if s.Online || !s.Active || s.Will != nil || !s.WillDueAt.IsZero() || s.ExpiryS != 3600 {
			t.Errorf("persistent session after the abandoned connect: %+v", s)
		}
		// Nothing is due later either.
		if _, outs := h.ticks(1, 120); len(outs) != 0 {
			t.Errorf("ticks after the abandoned connect: outputs %v, want none", outs)
		}
		// The client's next connection resumes the session.
		res := h.batch(connA2.connect(false, 3600, nil))
		if len(res) == 0 || !res[len(res)-1].env.GetConnectResult().GetSessionPresent() {
			t.Errorf("reconnect after the abandoned connect: %v, want the session present", res)
		}
	})
	t.Run("a newer connection is never affected", func(t *testing.T) {
		h := newHarness(t)
		h.batch(connA.connect(true, 0, testWill()))
		h.batch(connA2.connect(false, 3600, testWill())) // takes over
		before := h.session(connA2)
		if got := h.batch(connA.abandon()); len(got) != 0 {
			t.Errorf("abandoned connect of a connection taken over: outputs %v, want none", got)
		}
		if after := h.session(connA2); !after.Equal(before) {
			t.Errorf("the newer connection's session changed:\n got %+v\nwant %+v", after, before)
		}
	})
	t.Run("a Connect never written or refused", func(t *testing.T) {
		h := newHarness(t)
		if got := h.batch(connA.abandon()); len(got) != 0 {
			t.Errorf("abandoned connect of an unknown client: outputs %v, want none", got)
		}
		h.batch(connA.connect(false, 3600, nil))
		h.batch(connA.disconnect(1, false, nil))
		before := h.session(connA)
		if got := h.batch(connA.abandon()); len(got) != 0 {
			t.Errorf("abandoned connect of an offline session: outputs %v, want none", got)
		}
		if after := h.session(connA); !after.Equal(before) {
			t.Errorf("the offline session changed:\n got %+v\nwant %+v", after, before)
		}
	})
}

// heartbeatAt is the heartbeat of a gateway run (connection base) whose
// marker is at marker in its slot of shoal.deliveries.
func heartbeatAt(slot int32, base uint64, marker int64, at time.Time) *eventspb.Envelope {
	env := heartbeat(slot, base, at)
	env.GetGatewayHeartbeat().MarkerOffset = marker
	return env
}

// A run of a slot's gateway that lost the slot (paused past its lease while
// another run took the slot) may write heartbeats before it notices: they
// are not a restart (the newer run's connections stay) and do not keep the
// slot alive.
func TestHeartbeatOfEarlierRunIgnored(t *testing.T) {
	h := newHarness(t)
	h.batch(heartbeatAt(1, 5<<24, 10, testNow), run5.connect(false, 60, testWill()))
	got := h.batch(heartbeatAt(1, 6<<24, 20, testNow.Add(time.Second)), run6.connect(true, 0, nil))
	if len(got) == 0 || h.session(run5).Online {
		t.Fatalf("the newer run (marker 20) did not end the older run's connection: %v", got)
	}
	if got := h.batch(heartbeatAt(1, 5<<24, 10, testNow.Add(2*time.Second))); len(got) != 0 {
		t.Fatalf("heartbeat of the earlier run: outputs %v, want none", got)
	}
	if !h.session(run6).Online {
		t.Fatal("the earlier run's heartbeat ended the newer run's connection")
	}
	// Only the earlier run keeps writing: the slot is silent for the newer
	// one, whose connection ends after the gateway timeout (10 s, counted
	// from the first tick).
	for sec := 3; sec <= 20; sec++ {
		at := testNow.Add(time.Duration(sec) * time.Second)
		got := h.batch(heartbeatAt(1, 5<<24, 10, at), tickAt(at))
		if len(got) == 0 {
			continue
		}
		if sec < 13 {
			t.Fatalf("second %d: outputs %v before the gateway timeout", sec, got)
		}
		if h.session(run6).Online {
			t.Fatalf("second %d: outputs %v, but the newer run's connection is still online", sec, got)
		}
		return
	}
	t.Fatal("the newer run's connection outlived its silent gateway")
}

// TestTickLeavesIdleSessionsAlone: a tick copies only the sessions it may
// change, so its cost does not grow with the idle sessions of the
// partition; the one session that expires among them still ends.
func TestTickLeavesIdleSessionsAlone(t *testing.T) {
	h := newHarness(t)
	const n = 500
	var envs []*eventspb.Envelope
	for i := range n {
		c := conn{tenant: "acme", client: fmt.Sprintf("acme-idle%d", i), gateway: "gw-1", slot: 1,
			connection: uint64(1000 + i), request: uint64(5000 + i)}
		envs = append(envs, c.connect(true, 0, nil))
	}
	h.batch(envs...)
	h.batch(connB.connect(false, 10, nil))
	h.batch(connB.disconnect(1, false, nil)) // persistent: expires 10 s after testNow
	at := testNow.Add(time.Second)
	hb := func() *eventspb.Envelope { // keeps gw-1 alive
		return &eventspb.Envelope{TimestampUs: at.UnixMicro(), Event: &eventspb.Envelope_GatewayHeartbeat{
			GatewayHeartbeat: &eventspb.GatewayHeartbeat{Slot: 1, ConnectionBase: 0}}}
	}
	h.batch(hb(), tickAt(at))
	allocs := testing.AllocsPerRun(20, func() {
		at = at.Add(100 * time.Millisecond)
		if outs := h.batch(hb(), tickAt(at)); len(outs) != 0 {
			t.Fatalf("tick at +%v: %d outputs from idle sessions", at.Sub(testNow), len(outs))
		}
	})
	if allocs > 150 {
		t.Errorf("a tick over %d idle sessions allocates %.0f times, want it independent of them", n, allocs)
	}
	got := h.batch(tickAt(testNow.Add(20 * time.Second)))
	var ended bool
	for _, o := range got {
		if o.key != nil && string(o.key) == "acme/acme-dev2" {
			ended = true
		}
	}
	if !ended {
		t.Fatalf("the expired session did not end at the tick: %d outputs", len(got))
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

// The gateway of a connection taken over is gone before that connection's
// end came (a restart on its slot, or silence): the old session's removal
// goes to every partition then, instead of waiting for the client's next
// session end, which a resumed persistent session may never have.
func TestTakenOverConnectionOfAGoneGateway(t *testing.T) {
	taker := conn{tenant: "acme", client: "acme-dev1", gateway: "gw-2", slot: 2, connection: 7<<24 | 1, request: 200}
	gone := func() []output {
		outs := wantRemoveAll(run5, 1)
		for _, o := range outs {
			o.env.Gateway = ""
		}
		return outs
	}
	t.Run("restarted", func(t *testing.T) {
		h := newHarness(t)
		h.batch(heartbeat(1, 5<<24, testNow), heartbeat(2, 7<<24, testNow), run5.connect(true, 0, nil))
		h.batch(taker.connect(true, 0, nil))
		if s := h.session(taker); s.PendingRemoval == nil {
			t.Fatal("the takeover left no removal pending")
		}
		checkOutputs(t, h.batch(heartbeat(1, 6<<24, testNow.Add(time.Second))), gone())
		if s := h.session(taker); s.PendingRemoval != nil || !s.RemoveEverywhere || !s.Online {
			t.Errorf("after the old gateway's restart: pending %v, remove everywhere %v, online %v; want nil, true, true",
				s.PendingRemoval, s.RemoveEverywhere, s.Online)
		}
	})
	t.Run("silent", func(t *testing.T) {
		h := newHarness(t)
		h.batch(heartbeat(1, 5<<24, testNow), run5.connect(true, 0, nil))
		h.batch(taker.connect(true, 0, nil))
		for sec := 1; sec <= 20; sec++ {
			at := testNow.Add(time.Duration(sec) * time.Second)
			h.batch(heartbeat(2, 7<<24, at)) // the taker's gateway lives
			if got := h.batch(tickAt(at)); len(got) > 0 {
				if sec != 12 {
					t.Errorf("the removal came at +%ds, want +12s (10 s after the first tick)", sec)
				}
				checkOutputs(t, got, gone())
				if s := h.session(taker); s.PendingRemoval != nil || !s.Online {
					t.Errorf("after the old gateway went silent: pending %v, online %v", s.PendingRemoval, s.Online)
				}
				return
			}
		}
		t.Fatal("the silent gateway's connection taken over was never removed")
	})
}
