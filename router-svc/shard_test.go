package routersvc_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	routersvc "github.com/shoal-mqtt/shoal/router-svc"
	"github.com/shoal-mqtt/shoal/router-svc/storetest"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// step applies rec (after before, when set) and expects want from it.
type step struct {
	before func(p *routersvc.Presence, c *testClock)
	rec    *eventspb.Envelope
	want   []dlv
}

// P is a delivery of a given payload (a retained message or a live one).
func P(slot int32, tenant, topic, payload string, targets ...tgt) dlv {
	return dlv{Slot: slot, Tenant: tenant, Topic: topic, Payload: payload, Targets: targets}
}

func online(tenant, client string, slot int32, conn, gen uint64, on bool) func(*routersvc.Presence, *testClock) {
	return func(p *routersvc.Presence, _ *testClock) {
		p.Update(tenant, client, &eventspb.Presence{Online: on, Route: &eventspb.Route{Slot: slot, Connection: conn, Generation: gen}})
	}
}

// session records c's presence with the generation its session began
// with (Presence.session_generation).
func session(tenant, client string, slot int32, conn, gen, began uint64, on, persistent bool) func(*routersvc.Presence, *testClock) {
	return func(p *routersvc.Presence, _ *testClock) {
		p.Update(tenant, client, &eventspb.Presence{
			Online: on, Persistent: persistent, SessionGeneration: began,
			Route: &eventspb.Route{Slot: slot, Connection: conn, Generation: gen},
		})
	}
}

// persistent records c's presence with a persistent session.
func persistent(tenant, client string, slot int32, conn, gen uint64, on bool) func(*routersvc.Presence, *testClock) {
	return func(p *routersvc.Presence, _ *testClock) {
		p.Update(tenant, client, &eventspb.Presence{Online: on, Persistent: true, Route: &eventspb.Route{Slot: slot, Connection: conn, Generation: gen}})
	}
}

// I is a delivery of the default payload of topic to persistent sessions
// (through their inboxes).
func I(slot int32, tenant, topic string, targets ...tgt) dlv {
	d := D(slot, tenant, topic, targets...)
	d.Inbox = true
	return d
}

func advance(d time.Duration) func(*routersvc.Presence, *testClock) {
	return func(_ *routersvc.Presence, c *testClock) { c.now = c.now.Add(d) }
}

// runSteps applies steps to a new shard, checking each step's deliveries,
// and stores each step's mutations in a memory store.
func runSteps(t *testing.T, steps []step) (*routersvc.Shard, *storetest.Memory) {
	t.Helper()
	return applySteps(t, steps, true)
}

func applySteps(t *testing.T, steps []step, check bool) (*routersvc.Shard, *storetest.Memory) {
	t.Helper()
	clock := &testClock{now: t0}
	presence := routersvc.NewPresence()
	s := routersvc.NewShard(0, presence, clock.Now)
	st := storetest.NewMemory()
	out := routersvc.NewOutput()
	for i, stp := range steps {
		if stp.before != nil {
			stp.before(presence, clock)
		}
		if stp.rec == nil {
			continue
		}
		out.Reset()
		if err := s.Apply(stp.rec, int64(i), out); err != nil {
			t.Fatalf("step %d: Apply: %v", i, err)
		}
		if out.Mutations.Offset != int64(i) {
			t.Errorf("step %d: mutations offset %d", i, out.Mutations.Offset)
		}
		if got := normalize(t, out); check {
			diffDeliveries(t, fmt.Sprintf("step %d (%s)", i, describe(stp.rec)), stp.want, got)
		}
		if err := st.ApplyShard(t.Context(), 0, &out.Mutations); err != nil {
			t.Fatalf("step %d: store: %v", i, err)
		}
	}
	return s, st
}

func describe(env *eventspb.Envelope) string {
	switch ev := env.Event.(type) {
	case *eventspb.Envelope_Publish:
		return fmt.Sprintf("publish %s/%s by %s", env.Tenant, ev.Publish.Message.Topic, env.ClientId)
	case *eventspb.Envelope_SubscriptionChange:
		return fmt.Sprintf("%v %s/%s group %q by %s", ev.SubscriptionChange.Op, env.Tenant, ev.SubscriptionChange.Filter, ev.SubscriptionChange.ShareGroup, env.ClientId)
	}
	return fmt.Sprintf("%T", env.Event)
}

func TestShard(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"NoSubscribers", []step{
			{rec: pub("", "p", "a/b")},
			{rec: pub("", "p", "a/b", retain())},
			{rec: pub("t", "p", "x")},
		}},
		{"ConcreteAndWildcardFilters", []step{
			{rec: add("", "c1", "a/b")},
			{rec: add("", "c2", "a/+")},
			{rec: add("", "c3", "a/#")},
			{rec: add("", "c4", "+/b")},
			{rec: add("", "c5", "#")},
			{rec: add("", "c6", "a/b/c")},
			{rec: add("", "c7", "b/#")},
			{rec: add("", "c8", "+")},
			{rec: add("", "c9", "a")},
			{rec: add("", "c10", "+/+/#")},
			{rec: add("", "c11", "a/b/#")},
			{rec: pub("", "p", "a/b"), want: []dlv{D(1, "", "a/b",
				T("c1", 2, false), T("c2", 2, false), T("c3", 2, false), T("c4", 2, false),
				T("c5", 2, false), T("c10", 2, false), T("c11", 2, false))}},
			{rec: pub("", "p", "a"), want: []dlv{D(1, "", "a",
				T("c3", 2, false), T("c5", 2, false), T("c8", 2, false), T("c9", 2, false))}},
			{rec: pub("", "p", "z/z/z"), want: []dlv{D(1, "", "z/z/z", T("c5", 2, false), T("c10", 2, false))}},
		}},
		{"DollarTopics", []step{
			{rec: add("", "c1", "#")},
			{rec: add("", "c2", "+/uptime")},
			{rec: add("", "c3", "$SYS/#")},
			{rec: add("", "c4", "$SYS/+")},
			{rec: add("", "c5", "+/+")},
			{rec: add("", "c6", "$SYS/uptime")},
			{rec: pub("", "p", "$SYS/uptime"), want: []dlv{D(1, "", "$SYS/uptime", T("c3", 2, false), T("c4", 2, false), T("c6", 2, false))}},
			{rec: pub("", "p", "x/uptime"), want: []dlv{D(1, "", "x/uptime", T("c1", 2, false), T("c2", 2, false), T("c5", 2, false))}},
		}},
		{"NoLocal", []step{
			{rec: add("", "c1", "a", noLocal(), id(1))},
			{rec: add("", "c1", "#", id(2))},
			{rec: add("", "c2", "a", noLocal())},
			{rec: add("", "c3", "x", noLocal())},
			{rec: pub("", "c1", "a"), want: []dlv{D(1, "", "a", T("c1", 2, false, 2), T("c2", 2, false))}},
			{rec: pub("", "c2", "a"), want: []dlv{D(1, "", "a", T("c1", 2, false, 1, 2))}},
			{rec: pub("", "c3", "x"), want: []dlv{D(1, "", "x", T("c1", 2, false, 2))}},
		}},
		{"OverlappingSubscriptionsMerged", []step{
			{rec: add("", "c1", "a/b", qos(0), id(1))},
			{rec: add("", "c1", "a/+", qos(2), id(2))},
			{rec: add("", "c1", "#", qos(1))},
			{rec: add("", "c1", "a/#", qos(1), id(2))},
			{rec: add("", "c2", "a/#", qos(0), id(7))},
			{rec: add("", "c2", "+/b", qos(1), id(8))},
			{rec: pub("", "p", "a/b"), want: []dlv{D(1, "", "a/b", T("c1", 2, false, 1, 2), T("c2", 1, false, 7, 8))}},
			{rec: pub("", "p", "a/c", pqos(1)), want: []dlv{D(1, "", "a/c", T("c1", 1, false, 2), T("c2", 0, false, 7))}},
		}},
		{"QoSDowngrade", []step{
			{rec: add("", "c0", "a", qos(0))},
			{rec: add("", "c1", "a", qos(1))},
			{rec: add("", "c2", "a", qos(2))},
			{rec: pub("", "p", "a", pqos(0)), want: []dlv{D(1, "", "a", T("c0", 0, false), T("c1", 0, false), T("c2", 0, false))}},
			{rec: pub("", "p", "a", pqos(1)), want: []dlv{D(1, "", "a", T("c0", 0, false), T("c1", 1, false), T("c2", 1, false))}},
			{rec: pub("", "p", "a", pqos(2)), want: []dlv{D(1, "", "a", T("c0", 0, false), T("c1", 1, false), T("c2", 2, false))}},
		}},
		{"RetainAsPublished", []step{
			{rec: add("", "c1", "r", rap())},
			{rec: add("", "c2", "r")},
			{rec: add("", "c3", "r", qos(1))},
			{rec: add("", "c3", "#", rap())},
			{rec: pub("", "p", "r", retain()), want: []dlv{D(1, "", "r", T("c1", 2, true), T("c2", 2, false), T("c3", 2, true))}},
			{rec: pub("", "p", "r"), want: []dlv{D(1, "", "r", T("c1", 2, false), T("c2", 2, false), T("c3", 2, false))}},
		}},
		{"RetainedSetReplaceDelete", []step{
			{rec: pub("", "p", "r", retain(), payload("x"))},
			{rec: add("", "c1", "r"), want: []dlv{P(1, "", "r", "x", T("c1", 2, true))}},
			{rec: pub("", "p", "r", retain(), payload("y"), pqos(1)), want: []dlv{P(1, "", "r", "y", T("c1", 1, false))}},
			{rec: add("", "c2", "+", qos(2), id(5)), want: []dlv{P(1, "", "r", "y", T("c2", 1, true, 5))}},
			{rec: pub("", "p", "r", retain(), noPayload()), want: []dlv{P(1, "", "r", "", T("c1", 2, false), T("c2", 2, false, 5))}},
			{rec: add("", "c3", "#")},
			{rec: add("", "c3", "r")},
		}},
		{"RetainHandling", []step{
			{rec: pub("", "p", "r", retain(), payload("x"))},
			{rec: pub("", "p", "$SYS/x", retain(), payload("s"))},
			{rec: add("", "c0", "r", rh(0)), want: []dlv{P(1, "", "r", "x", T("c0", 2, true))}},
			{rec: add("", "c0", "r", rh(0), qos(1)), want: []dlv{P(1, "", "r", "x", T("c0", 1, true))}},
			{rec: add("", "c1", "r", rh(1)), want: []dlv{P(1, "", "r", "x", T("c1", 2, true))}},
			{rec: add("", "c1", "r", rh(1))},
			{rec: add("", "c2", "r", rh(2))},
			{rec: add("", "c3", "r", group("g"), rh(0))},
			{rec: add("", "c4", "#", rh(0)), want: []dlv{P(1, "", "r", "x", T("c4", 2, true))}},
			{rec: add("", "c5", "$SYS/#"), want: []dlv{P(1, "", "$SYS/x", "s", T("c5", 2, true))}},
			{rec: add("", "c6", "+/x")}, // the '$' rule
			{rec: add("", "c6", "$SYS/+"), want: []dlv{P(1, "", "$SYS/x", "s", T("c6", 2, true))}},
			// The subscriber is offline: nothing is sent.
			{before: online("", "c7", 3, 1, 5, false), rec: add("", "c7", "r")},
		}},
		{"RetainedExpiry", []step{
			{rec: pub("", "p", "r1", retain(), payload("x"), expires(t0.Add(10*time.Second).UnixMilli()))},
			{rec: pub("", "p", "r2", retain(), payload("y"), expires(t0.Add(-time.Second).UnixMilli()))},
			{rec: pub("", "p", "r3", retain(), payload("old"))},
			{rec: pub("", "p", "r3", retain(), payload("new"), expires(t0.Add(-time.Second).UnixMilli()))},
			{rec: add("", "c1", "#"), want: []dlv{P(1, "", "r1", "x", T("c1", 2, true))}},
			{rec: pub("", "p", "e", expires(t0.Add(-time.Millisecond).UnixMilli()))},
			{rec: pub("", "p", "e", expires(t0.UnixMilli())), want: []dlv{D(1, "", "e", T("c1", 2, false))}},
			{before: advance(11 * time.Second), rec: add("", "c2", "#")},
		}},
		{"RemoveAndGenerations", []step{
			{rec: add("", "c1", "a")},
			{rec: add("", "c1", "b", gen(2))},
			{rec: add("", "c1", "c", gen(3))},
			{rec: removeAll("", "c1", 1)},
			{rec: pub("", "p", "a")},
			{rec: pub("", "p", "b"), want: []dlv{D(1, "", "b", T("c1", 2, false))}},
			// A REMOVE from an older connection leaves the newer entry.
			{rec: remove("", "c1", "b", gen(1))},
			{rec: pub("", "p", "b"), want: []dlv{D(1, "", "b", T("c1", 2, false))}},
			{rec: remove("", "c1", "b", gen(2))},
			{rec: pub("", "p", "b")},
			{rec: removeAll("", "c1", 2)},
			{rec: pub("", "p", "c"), want: []dlv{D(1, "", "c", T("c1", 2, false))}},
			{rec: removeAll("", "c1", 3)},
			{rec: pub("", "p", "c")},
			// A late ADD of an older connection does not replace a newer one.
			{rec: add("", "c2", "x", gen(3), qos(2))},
			{rec: add("", "c2", "x", gen(2), qos(0))},
			{rec: pub("", "p", "x"), want: []dlv{D(1, "", "x", T("c2", 2, false))}},
			// Removing what does not exist is harmless.
			{rec: remove("", "c9", "x")},
			{rec: removeAll("nobody", "c9", 9)},
		}},
		{"TenantIsolation", []step{
			{rec: add("A", "c1", "#")},
			{rec: add("A", "c", "#")},
			{rec: add("B", "c", "#")},
			{rec: pub("B", "p", "x"), want: []dlv{D(1, "B", "x", T("c", 2, false))}},
			{rec: pub("B", "p", "r", retain(), payload("b")), want: []dlv{P(1, "B", "r", "b", T("c", 2, false))}},
			{rec: add("A", "c2", "#")},
			{rec: add("B", "c3", "#"), want: []dlv{P(1, "B", "r", "b", T("c3", 2, true))}},
			{rec: pub("A", "p", "x"), want: []dlv{D(1, "A", "x", T("c", 2, false), T("c1", 2, false), T("c2", 2, false))}},
			{rec: removeAll("A", "c", 1)},
			{rec: pub("B", "p", "y"), want: []dlv{D(1, "B", "y", T("c", 2, false), T("c3", 2, false))}},
		}},
		{"PersistentSessionsThroughInbox", []step{
			{before: persistent("", "c1", 1, conn("c1"), 1, true), rec: add("", "c1", "a")},
			{before: persistent("", "c2", 1, conn("c2"), 1, false), rec: add("", "c2", "a")},
			{rec: add("", "c3", "a")},
			// Online persistent c1: its own delivery to slot 1 marked for
			// the inbox; offline persistent c2: InboxSlot; c3 as before.
			{rec: pub("", "p", "a"), want: []dlv{
				I(routersvc.InboxSlot, "", "a", tgt{Client: "c2", QoS: 2}),
				D(1, "", "a", T("c3", 2, false)),
				I(1, "", "a", T("c1", 2, false)),
			}},
			// A shared group skips the offline persistent member.
			{rec: add("", "c2", "s", group("g"))},
			{rec: add("", "c1", "s", group("g"))},
			{rec: pub("", "p", "s"), want: []dlv{I(1, "", "s", T("c1", 2, false))}},
			{rec: pub("", "p", "s"), want: []dlv{I(1, "", "s", T("c1", 2, false))}},
		}},
		// A persistent session whose presence has not reached the router
		// yet (shoal.presence is another topic): its subscription says
		// the session is persistent, so its QoS 1/2 messages already go
		// through its inbox, not straight to the connection, where a
		// disconnect before the PUBACK would lose them. A later presence
		// of the same generation decides, as before.
		{"PersistentSessionBeforeItsPresence", []step{
			{rec: add("", "c1", "a", persistentSession())},
			{rec: add("", "c2", "a")},
			{rec: pub("", "p", "a"), want: []dlv{
				D(1, "", "a", T("c2", 2, false)),
				I(1, "", "a", T("c1", 2, false)),
			}},
			{before: online("", "c1", 1, conn("c1"), 1, true), rec: pub("", "p", "a"), want: []dlv{
				D(1, "", "a", T("c1", 2, false), T("c2", 2, false)),
			}},
			// A newer connection's subscription, again before its presence.
			{rec: add("", "c1", "a", persistentSession(), gen(2))},
			{rec: pub("", "p", "a"), want: []dlv{
				D(1, "", "a", T("c2", 2, false)),
				I(1, "", "a", T("c1", 2, false)),
			}},
		}},
		// An ADD written before a takeover can reach the shard after the
		// REMOVE_ALL that ended its session (the gateway of the old
		// connection and the session service produce separately). Its
		// subscription is the ended session's, never the new one's: no
		// live message, no retained one, no inbox append, no shared pick.
		{"SubscriptionOfAnEndedSession", []step{
			{rec: add("", "c1", "a")},
			{rec: removeAll("", "c1", 1)},
			// The late ADD, before the new session's presence: it routes
			// to the old connection, which is closing anyway.
			{rec: add("", "c1", "a")},
			{rec: pub("", "p", "a"), want: []dlv{D(1, "", "a", T("c1", 2, false))}},
			// The new session (generation 2, began at 2) is online.
			{before: session("", "c1", 7, 70, 2, 2, true, false), rec: pub("", "p", "a")},
			// Its own subscription is delivered; the old one still not.
			{rec: add("", "c1", "b", gen(2), slot(7))},
			{rec: pub("", "p", "a")},
			{rec: pub("", "p", "b"), want: []dlv{D(7, "", "b", tgt{Client: "c1", Conn: 70, QoS: 2})}},
			// Offline with a persistent session: nothing for its inbox.
			{before: session("", "c1", 7, 70, 2, 2, false, true), rec: pub("", "p", "a", pqos(1))},
			// An ADD that arrives after the presence sends no retained
			// message either (it is kept: the view is the log's).
			{rec: pub("", "p", "r", retain())},
			{before: session("", "c1", 7, 70, 2, 2, true, false), rec: add("", "c1", "r")},
			{rec: pub("", "p", "r"), want: nil},
			// The client's next REMOVE_ALL removes the old entries.
			{rec: removeAll("", "c1", 2)},
			{before: session("", "c1", 7, 71, 3, 3, true, false), rec: add("", "c1", "a", gen(3), slot(7))},
			{rec: pub("", "p", "a"), want: []dlv{D(7, "", "a", tgt{Client: "c1", Conn: 71, QoS: 2})}},
			{rec: pub("", "p", "r"), want: nil},
			// A resumed session keeps the subscriptions of its earlier
			// connections: generation 4 began at 3.
			{before: session("", "c1", 7, 72, 4, 3, true, false), rec: pub("", "p", "a"), want: []dlv{D(7, "", "a", tgt{Client: "c1", Conn: 72, QoS: 2})}},
		}},
		// A takeover leaves the old session's entries in place until the
		// old connection's end brings their REMOVE_ALL: they route
		// nothing once the new session's presence is known, a new
		// session's ADD of the same filter is a new subscription (retain
		// handling 1 sends the retained message), and the late REMOVE_ALL
		// of the old generation leaves the new session's entries alone.
		{"TakeoverBeforeItsRemoval", []step{
			{rec: pub("", "p", "r", retain(), payload("x"))},
			{rec: add("", "c1", "r", rh(1), began(1)), want: []dlv{P(1, "", "r", "x", T("c1", 2, true))}},
			{rec: add("", "c1", "s", began(1))},
			// Taken over: the new session (generation 2, on slot 7).
			{before: session("", "c1", 7, 70, 2, 2, true, false), rec: pub("", "p", "s")},
			{rec: add("", "c1", "r", rh(1), gen(2), slot(7), began(2)), want: []dlv{P(7, "", "r", "x", tgt{Client: "c1", Conn: 70, QoS: 2, Retain: true})}},
			// Again in the same session: it exists now.
			{rec: add("", "c1", "r", rh(1), gen(2), slot(7), began(2))},
			{rec: pub("", "p", "r", payload("y")), want: []dlv{P(7, "", "r", "y", tgt{Client: "c1", Conn: 70, QoS: 2})}},
			// The old connection's end: its REMOVE_ALL (generation 1).
			{rec: removeAll("", "c1", 1)},
			{rec: pub("", "p", "r", payload("z")), want: []dlv{P(7, "", "r", "z", tgt{Client: "c1", Conn: 70, QoS: 2})}},
			{rec: pub("", "p", "s")},
		}},
		// One publish matching a live and a late subscription of the same
		// client, in either order: only the live one's options count.
		{"LiveAndEndedSubscriptionsOfOneClient", []step{
			{rec: removeAll("", "c1", 1)},
			{rec: add("", "c1", "x/#", id(5))},
			{rec: add("", "c1", "x/y", id(6))},
			{rec: add("", "c1", "#", id(8))},
			{before: session("", "c1", 1, 70, 2, 2, true, false), rec: add("", "c1", "x/+", id(7), qos(1), gen(2))},
			{rec: pub("", "p", "x/y"), want: []dlv{D(1, "", "x/y", tgt{Client: "c1", Conn: 70, QoS: 1, IDs: []uint32{7}})}},
		}},
		// Without a presence (nothing tells which session is current)
		// a late ADD routes to its own, closed, connection, and the
		// client's next REMOVE_ALL removes it.
		{"LateAddLeavesAtTheNextRemoveAll", []step{
			{rec: add("", "c9", "a")},
			{rec: removeAll("", "c9", 1)},
			{rec: add("", "c9", "a")},
			{rec: pub("", "p", "a"), want: []dlv{D(1, "", "a", T("c9", 2, false))}},
			{rec: removeAll("", "c9", 2)},
			{rec: pub("", "p", "a")},
		}},
		{"SharedMemberOfAnEndedSession", []step{
			{rec: add("", "c1", "s", group("g"))},
			{rec: add("", "c2", "s", group("g"))},
			{rec: removeAll("", "c1", 1)},
			{rec: add("", "c1", "s", group("g"))},
			{before: session("", "c1", 1, 70, 2, 2, true, false), rec: pub("", "p", "s"), want: []dlv{D(1, "", "s", T("c2", 2, false))}},
			{rec: pub("", "p", "s"), want: []dlv{D(1, "", "s", T("c2", 2, false))}},
			{rec: pub("", "p", "s"), want: []dlv{D(1, "", "s", T("c2", 2, false))}},
		}},
		{"OneDeliveryPerSlot", []step{
			{rec: add("", "c1", "a")},
			{rec: add("", "c2", "#", slot(1))},
			{rec: add("", "c3", "a", slot(2))},
			{rec: add("", "c4", "+", slot(3))},
			{rec: pub("", "p", "a"), want: []dlv{
				D(1, "", "a", T("c1", 2, false), T("c2", 2, false)),
				D(2, "", "a", T("c3", 2, false)),
				D(3, "", "a", T("c4", 2, false)),
			}},
		}},
		{"Presence", []step{
			{rec: add("", "c1", "a")},
			{before: online("", "c1", 5, 77, 2, true), rec: pub("", "p", "a"), want: []dlv{D(5, "", "a", tgt{Client: "c1", Conn: 77, QoS: 2})}},
			{before: online("", "c1", 5, 77, 2, false), rec: pub("", "p", "a")},
			// An older presence changes nothing.
			{before: online("", "c1", 9, 1, 1, true), rec: pub("", "p", "a")},
			// A subscription of a newer connection is newer than the presence.
			{rec: add("", "c1", "b", gen(3), slot(4))},
			{rec: pub("", "p", "a"), want: []dlv{D(4, "", "a", T("c1", 2, false))}},
			// A presence of the same generation says more (it may be offline).
			{before: online("", "c1", 4, conn("c1"), 3, false), rec: pub("", "p", "a")},
		}},
		{"PresenceChanges", []step{
			{rec: add("", "c1", "a")},
			{rec: add("", "c2", "a")},
			{before: online("", "c1", 5, 50, 2, true), rec: pub("", "p", "a"), want: []dlv{
				D(5, "", "a", tgt{Client: "c1", Conn: 50, QoS: 2}), D(1, "", "a", T("c2", 2, false))}},
			{before: func(p *routersvc.Presence, _ *testClock) { p.Delete("", "c1") }, rec: pub("", "p", "a"), want: []dlv{
				D(1, "", "a", T("c1", 2, false), T("c2", 2, false))}},
			{before: online("", "c1", 6, 60, 3, true), rec: pub("", "p", "a"), want: []dlv{
				D(6, "", "a", tgt{Client: "c1", Conn: 60, QoS: 2}), D(1, "", "a", T("c2", 2, false))}},
			{before: online("", "c2", 7, 70, 2, true), rec: pub("", "p", "a"), want: []dlv{
				D(6, "", "a", tgt{Client: "c1", Conn: 60, QoS: 2}), D(7, "", "a", tgt{Client: "c2", Conn: 70, QoS: 2})}},
			{before: online("", "c2", 7, 70, 2, false), rec: pub("", "p", "a"), want: []dlv{
				D(6, "", "a", tgt{Client: "c1", Conn: 60, QoS: 2})}},
		}},
		{"SharedRoundRobin", []step{
			{rec: add("", "c2", "s/#", group("g"))},
			{rec: add("", "c1", "s/#", group("g"))},
			{rec: add("", "c3", "s/#", group("g"), slot(2))},
			{rec: add("", "c4", "s/#", group("h"))},
			{rec: add("", "c5", "s/+", group("g"))},
			{rec: pub("", "p", "s/x"), want: []dlv{D(1, "", "s/x", T("c1", 2, false), T("c4", 2, false), T("c5", 2, false))}},
			{rec: pub("", "p", "s/x"), want: []dlv{D(1, "", "s/x", T("c2", 2, false), T("c4", 2, false), T("c5", 2, false))}},
			{rec: pub("", "p", "s/x"), want: []dlv{D(1, "", "s/x", T("c4", 2, false), T("c5", 2, false)), D(2, "", "s/x", T("c3", 2, false))}},
			{rec: pub("", "p", "s/x/y"), want: []dlv{D(1, "", "s/x/y", T("c1", 2, false), T("c4", 2, false))}},
			// c2 is offline: skipped.
			{before: online("", "c2", 1, 5, 1, false), rec: pub("", "p", "s/x/y"), want: []dlv{D(1, "", "s/x/y", T("c4", 2, false)), D(2, "", "s/x/y", T("c3", 2, false))}},
			{rec: pub("", "p", "s/x/y"), want: []dlv{D(1, "", "s/x/y", T("c1", 2, false), T("c4", 2, false))}},
			{rec: remove("", "c1", "s/#", group("g"))},
			{rec: pub("", "p", "s/x/y"), want: []dlv{D(1, "", "s/x/y", T("c4", 2, false)), D(2, "", "s/x/y", T("c3", 2, false))}},
			// A member with a plain subscription too gets one copy.
			{rec: add("", "c4", "s/#", id(9), qos(1))},
			{rec: pub("", "p", "s/z/z"), want: []dlv{D(1, "", "s/z/z", T("c4", 2, false, 9)), D(2, "", "s/z/z", T("c3", 2, false))}},
			// Everyone of g offline: g gets nothing.
			{before: online("", "c3", 1, 5, 1, false), rec: pub("", "p", "s/z/z"), want: []dlv{D(1, "", "s/z/z", T("c4", 2, false, 9))}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { runSteps(t, tc.steps) })
	}
}

// A client's target carries the identifiers of every matching
// subscription once, in ascending order, whatever order the subscriptions
// were made in or the trie matches them in.
func TestShardSubscriptionIDsAscending(t *testing.T) {
	runSteps(t, []step{
		{rec: add("", "c", "a/b/c", id(40))},
		{rec: add("", "c", "a/+/c", id(7))},
		{rec: add("", "c", "#", id(300))},
		{rec: add("", "c", "a/#", id(2))},
		{rec: add("", "c", "+/b/#", id(7))},
		{rec: add("", "c", "a/b/+", id(268435455))},
		{rec: add("", "c", "+/+/+", id(1))},
		{rec: pub("", "p", "a/b/c"), want: []dlv{D(1, "", "a/b/c", T("c", 2, false, 1, 2, 7, 40, 300, 268435455))}},
	})
}

func TestShardManySlots(t *testing.T) {
	var steps []step
	var want []dlv
	for sl := range int32(12) {
		d := D(sl, "", "a/b")
		for k := range 3 {
			c := fmt.Sprintf("c%d-%d", sl, k)
			steps = append(steps, step{rec: add("", c, []string{"a/b", "a/+", "#"}[k], slot(sl))})
			d.Targets = append(d.Targets, T(c, 2, false))
		}
		want = append(want, d)
	}
	steps = append(steps, step{rec: pub("", "p", "a/b"), want: want})
	runSteps(t, steps)
}

func TestShardMaxTargets(t *testing.T) {
	clock := &testClock{now: t0}
	s := routersvc.NewShard(0, routersvc.NewPresence(), clock.Now)
	s.SetMaxTargets(2)
	out := routersvc.NewOutput()
	for i := range 5 {
		mustApply(t, s, add("", fmt.Sprintf("c%d", i), "a"), out)
	}
	for i := range 9 {
		mustApply(t, s, add("", fmt.Sprintf("d%d", i), "a", slot(int32(2+i%8))), out)
	}
	out.Reset()
	mustApply(t, s, pub("", "p", "a"), out)
	perSlot := map[int32][]int{}
	total := 0
	for _, d := range out.Deliveries {
		n := len(d.Envelope.GetDelivery().Targets)
		perSlot[d.Slot] = append(perSlot[d.Slot], n)
		total += n
	}
	if total != 14 {
		t.Errorf("%d targets, want 14", total)
	}
	if got := perSlot[1]; len(got) != 3 || got[0] != 2 || got[1] != 2 || got[2] != 1 {
		t.Errorf("slot 1 deliveries hold %v targets, want [2 2 1]", got)
	}
	if got := perSlot[2]; len(got) != 1 || got[0] != 2 {
		t.Errorf("slot 2 deliveries hold %v targets, want [2]", got)
	}
}

// mustApply applies rec at the shard's next offset.
func mustApply(t testing.TB, s *routersvc.Shard, rec *eventspb.Envelope, out *routersvc.Output) {
	t.Helper()
	if err := s.Apply(rec, s.Offset()+1, out); err != nil {
		t.Fatalf("Apply(%s): %v", describe(rec), err)
	}
}

func TestShardMutations(t *testing.T) {
	clock := &testClock{now: t0}
	s := routersvc.NewShard(3, routersvc.NewPresence(), clock.Now)
	out := routersvc.NewOutput()

	mustApply(t, s, add("t", "c1", "a/+", qos(1), id(4), rap(), rh(2), gen(7), slot(2)), out)
	mustApply(t, s, add("t", "c1", "a/+", qos(1), group("g")), out)
	mustApply(t, s, add("t", "c1", "x"), out)
	mustApply(t, s, remove("t", "c1", "x"), out) // added and removed in one batch: one deletion
	mustApply(t, s, pub("t", "p", "r", retain(), payload("v"), expires(t0.Add(time.Minute).UnixMilli())), out)
	mustApply(t, s, pub("t", "p", "q", retain(), payload("w")), out)
	mustApply(t, s, pub("t", "p", "q", retain(), noPayload()), out) // set and deleted: one deletion

	m := &out.Mutations
	if m.Offset != 6 || s.Offset() != 6 {
		t.Errorf("offset: mutations %d, shard %d, want 6", m.Offset, s.Offset())
	}
	subs := map[routersvc.SubscriptionKey]routersvc.SubscriptionMutation{}
	for _, sm := range m.Subscriptions {
		if _, dup := subs[sm.SubscriptionKey]; dup {
			t.Errorf("two writes of %+v", sm.SubscriptionKey)
		}
		subs[sm.SubscriptionKey] = sm
	}
	if len(subs) != 3 {
		t.Errorf("%d subscription writes, want 3: %+v", len(subs), m.Subscriptions)
	}
	plain := subs[routersvc.SubscriptionKey{Tenant: "t", Client: "c1", Filter: "a/+"}]
	wantOpts := &eventspb.SubscriptionOptions{Qos: 1, SubscriptionId: 4, RetainAsPublished: true, RetainHandling: 2}
	wantRoute := &eventspb.Route{Slot: 2, Connection: conn("c1"), Generation: 7}
	if plain.Delete || !plain.Options.EqualVT(wantOpts) || !plain.Route.EqualVT(wantRoute) {
		t.Errorf("plain subscription write %+v, want options %v route %v", plain, wantOpts, wantRoute)
	}
	if sh := subs[routersvc.SubscriptionKey{Tenant: "t", Client: "c1", ShareGroup: "g", Filter: "a/+"}]; sh.Delete || sh.Options == nil {
		t.Errorf("shared subscription write %+v", sh)
	}
	if x := subs[routersvc.SubscriptionKey{Tenant: "t", Client: "c1", Filter: "x"}]; !x.Delete {
		t.Errorf("subscription x: %+v, want a deletion", x)
	}
	if len(m.Retained) != 2 {
		t.Fatalf("retained writes %+v, want 2", m.Retained)
	}
	for _, r := range m.Retained {
		switch r.Key {
		case routersvc.RetainedKey{Tenant: "t", Topic: "r"}:
			if got := string(r.Publish.GetPublish().GetMessage().GetPayload()); got != "v" || r.Publish.Tenant != "t" || r.Publish.MessageId == nil {
				t.Errorf("retained r stored as %v", r.Publish)
			}
		case routersvc.RetainedKey{Tenant: "t", Topic: "q"}:
			if r.Publish != nil {
				t.Errorf("retained q: %v, want a deletion", r.Publish)
			}
		default:
			t.Errorf("unexpected retained write %+v", r.Key)
		}
	}

	// REMOVE_ALL deletes both entries of generation ≤ 7.
	out.Reset()
	mustApply(t, s, removeAll("t", "c1", 7), out)
	if len(out.Mutations.Subscriptions) != 2 {
		t.Errorf("REMOVE_ALL wrote %+v, want 2 deletions", out.Mutations.Subscriptions)
	}
	for _, sm := range out.Mutations.Subscriptions {
		if !sm.Delete {
			t.Errorf("REMOVE_ALL wrote %+v", sm)
		}
	}
	if s.Subscriptions() != 0 {
		t.Errorf("%d subscriptions left", s.Subscriptions())
	}

	// Expiry deletes the retained message once its time has passed.
	out.Reset()
	if n := s.ExpireRetained(out); n != 0 {
		t.Errorf("ExpireRetained before expiry: %d", n)
	}
	clock.now = clock.now.Add(2 * time.Minute)
	if n := s.ExpireRetained(out); n != 1 || len(out.Mutations.Retained) != 1 || out.Mutations.Retained[0].Publish != nil {
		t.Errorf("ExpireRetained: %d, writes %+v, want 1 deletion", n, out.Mutations.Retained)
	}
	if out.Mutations.Offset != s.Offset() {
		t.Errorf("expiry mutations at offset %d, want the shard's %d", out.Mutations.Offset, s.Offset())
	}
	if s.RetainedCount() != 0 {
		t.Errorf("%d retained left", s.RetainedCount())
	}
}

func TestShardOffsetsAndMalformed(t *testing.T) {
	s := routersvc.NewShard(0, routersvc.NewPresence(), func() time.Time { return t0 })
	out := routersvc.NewOutput()
	if err := s.Apply(add("", "c1", "a"), 5, out); err != nil {
		t.Fatal(err)
	}
	// At or below the offset: already applied, ignored.
	out.Reset()
	if err := s.Apply(pub("", "p", "a"), 5, out); err != nil || len(out.Deliveries) != 0 {
		t.Errorf("replayed record: err %v, %d deliveries", err, len(out.Deliveries))
	}
	bad := []*eventspb.Envelope{
		{},
		{Event: &eventspb.Envelope_Presence{Presence: &eventspb.Presence{}}},
		{Event: &eventspb.Envelope_Publish{Publish: &eventspb.Publish{}}},
		pub("", "p", "a/+"),
		pub("", "p", ""),
		add("", "c", "a/#/b"),
		add("", "", "a"),
		change(eventspb.SubscriptionChange_OP_UNSPECIFIED, "", "c", "a"),
		{ClientId: "c", Event: &eventspb.Envelope_SubscriptionChange{SubscriptionChange: &eventspb.SubscriptionChange{Op: eventspb.SubscriptionChange_OP_ADD, Filter: "a"}}},
	}
	for i, rec := range bad {
		out.Reset()
		err := s.Apply(rec, int64(10+i), out)
		if !errors.Is(err, routersvc.ErrMalformed) {
			t.Errorf("record %d: got %v, want ErrMalformed", i, err)
		}
		if s.Offset() != int64(10+i) || out.Mutations.Offset != int64(10+i) {
			t.Errorf("record %d: offset %d (mutations %d) not advanced", i, s.Offset(), out.Mutations.Offset)
		}
		if len(out.Deliveries) != 0 || out.Mutations.Len() != 0 {
			t.Errorf("record %d: output %+v", i, out)
		}
	}
	out.Reset()
	s.Skip(100, out)
	if s.Offset() != 100 || out.Mutations.Offset != 100 {
		t.Errorf("Skip: offset %d", s.Offset())
	}
	if s.Subscriptions() != 1 {
		t.Errorf("%d subscriptions, want 1", s.Subscriptions())
	}
}

// TestShardAliasing checks that the shard copies what it keeps: records
// decoded with UnmarshalVTUnsafe alias the fetch buffer.
func TestShardAliasing(t *testing.T) {
	s := routersvc.NewShard(0, routersvc.NewPresence(), func() time.Time { return t0 })
	out := routersvc.NewOutput()
	decode := func(env *eventspb.Envelope) (*eventspb.Envelope, []byte) {
		b, err := env.MarshalVT()
		if err != nil {
			t.Fatal(err)
		}
		d := &eventspb.Envelope{}
		if err := d.UnmarshalVTUnsafe(b); err != nil {
			t.Fatal(err)
		}
		return d, b
	}
	for _, rec := range []*eventspb.Envelope{add("ten", "client", "a/+", group("grp")), add("ten", "client", "a/b"), pub("ten", "p", "a/b", retain(), payload("kept"))} {
		env, buf := decode(rec)
		mustApply(t, s, env, out)
		for i := range buf {
			buf[i] = 'X' // the fetch buffer is gone
		}
	}
	out.Reset()
	mustApply(t, s, add("ten", "c2", "a/#"), out)
	mustApply(t, s, pub("ten", "p", "a/b"), out)
	got := normalize(t, out)
	want := []dlv{
		P(1, "ten", "a/b", "kept", T("c2", 2, true)),
		D(1, "ten", "a/b", T("c2", 2, false), T("client", 2, false)),
	}
	diffDeliveries(t, "after the buffers changed", want, got)
}

// TestSharedHashStrategy: with SharedHash the member is a function of the
// message id — the same message picks the same member again (a replay
// decides the same), and different messages spread over the members.
func TestSharedHashStrategy(t *testing.T) {
	clock := &testClock{now: t0}
	s := routersvc.NewShard(0, routersvc.NewPresence(), clock.Now)
	s.SetSharedStrategy(routersvc.SharedHash)
	out := routersvc.NewOutput()
	off := int64(0)
	apply := func(env *eventspb.Envelope) []dlv {
		t.Helper()
		out.Reset()
		off++
		if err := s.Apply(env, off, out); err != nil {
			t.Fatal(err)
		}
		return normalize(t, out)
	}
	for _, c := range []string{"m1", "m2", "m3"} {
		apply(add("acme", c, "h/#", group("g")))
	}
	picked := map[string]int{}
	for seq := range uint64(60) {
		env := pub("acme", "p", "h/t")
		env.MessageId.Seq = seq
		ds := apply(env)
		if len(ds) != 1 || len(ds[0].Targets) != 1 {
			t.Fatalf("message %d: deliveries %+v, want one member", seq, ds)
		}
		first := ds[0].Targets[0].Client
		picked[first]++
		again := pub("acme", "p", "h/t")
		again.MessageId.Seq = seq
		if ds := apply(again); ds[0].Targets[0].Client != first {
			t.Fatalf("message %d went to %s, then to %s: the hash strategy must decide the same", seq, first, ds[0].Targets[0].Client)
		}
	}
	if len(picked) != 3 {
		t.Fatalf("60 messages reached %v: want all three members", picked)
	}
}
