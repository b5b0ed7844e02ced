package sessionsvc

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

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
