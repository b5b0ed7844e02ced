package routersvc_test

import (
	"testing"

	routersvc "github.com/shoal-mqtt/shoal/router-svc"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// qos2 is a QoS 2 publish of a persistent session: packet identifier id,
// session generation sgen.
func qos2(env *eventspb.Envelope, id uint32, sgen uint64) *eventspb.Envelope {
	env.GetPublish().PacketId = id
	env.GetPublish().SessionGeneration = sgen
	return env
}

func release(tenant, client string, id uint32, sgen uint64) *eventspb.Envelope {
	return &eventspb.Envelope{
		Tenant: tenant, ClientId: client, TimestampUs: t0.UnixMicro(),
		Event: &eventspb.Envelope_PublishRelease{PublishRelease: &eventspb.PublishRelease{PacketId: id, SessionGeneration: sgen}},
	}
}

// A QoS 2 message sent again with the packet identifier it took is routed
// once, until the identifier is released or the session ends; a new
// session's identifiers are its own.
func TestShardQoS2ExactlyOnce(t *testing.T) {
	steps := []step{
		{rec: add("t", "sub", "a/+")},
		{rec: qos2(pub("t", "p", "a/1"), 5, 1), want: []dlv{D(1, "t", "a/1", T("sub", 2, false))}},
		// The client sends it again (a reconnect before PUBREC): not routed.
		{rec: qos2(pub("t", "p", "a/1"), 5, 1)},
		{rec: qos2(pub("t", "p", "a/1", payload("m:a/1")), 5, 1)},
		// Another identifier is another message; so is another client's.
		{rec: qos2(pub("t", "p", "a/2"), 6, 1), want: []dlv{D(1, "t", "a/2", T("sub", 2, false))}},
		{rec: qos2(pub("t", "p2", "a/1"), 5, 1), want: []dlv{D(1, "t", "a/1", T("sub", 2, false))}},
		// So is the same identifier in another tenant.
		{rec: add("u", "sub", "a/+")},
		{rec: qos2(pub("u", "p", "a/1"), 5, 1), want: []dlv{D(1, "u", "a/1", T("sub", 2, false))}},
		// QoS 1 never takes part.
		{rec: qos2(pub("t", "p", "a/1", pqos(1)), 5, 1), want: []dlv{D(1, "t", "a/1", T("sub", 1, false))}},
		// PUBREL releases it: the identifier may carry a new message.
		{rec: release("t", "p", 5, 1)},
		{rec: qos2(pub("t", "p", "a/1"), 5, 1), want: []dlv{D(1, "t", "a/1", T("sub", 2, false))}},
		{rec: qos2(pub("t", "p", "a/1"), 5, 1)},
		// A release of an identifier not kept changes nothing.
		{rec: release("t", "p", 9, 1)},
		{rec: qos2(pub("t", "p", "a/2"), 6, 1)},
		// The session ends (REMOVE_ALL of its generation): its identifiers
		// go, and the next session's message with identifier 6 is new.
		{rec: removeAll("t", "p", 3)},
		{rec: qos2(pub("t", "p", "a/2"), 6, 4), want: []dlv{D(1, "t", "a/2", T("sub", 2, false))}},
		{rec: qos2(pub("t", "p", "a/2"), 6, 4)},
		// A late record of the ended session's connection: routed (it is a
		// message the client sent), but it does not take the newer
		// session's identifier from it.
		{rec: qos2(pub("t", "p", "a/2"), 6, 1), want: []dlv{D(1, "t", "a/2", T("sub", 2, false))}},
		{rec: qos2(pub("t", "p", "a/2"), 6, 4)},
		// A session that began without REMOVE_ALL reaching this shard yet
		// (its records come later): an identifier of an earlier session
		// never makes its message a repeat.
		{rec: qos2(pub("t", "p", "a/1"), 7, 4), want: []dlv{D(1, "t", "a/1", T("sub", 2, false))}},
		{rec: qos2(pub("t", "p", "a/1"), 7, 6), want: []dlv{D(1, "t", "a/1", T("sub", 2, false))}},
		{rec: qos2(pub("t", "p", "a/1"), 7, 6)},
	}
	s, st := runSteps(t, steps)
	// Kept: (t,p2,5), (u,p,5), (t,p,6)@4, (t,p,7)@6.
	if n := s.UnreleasedCount(); n != 4 {
		t.Errorf("%d packet identifiers kept, want 4", n)
	}

	// A restarted router loads them with the shard: repeats stay repeats.
	loaded, err := routersvc.OpenShard(t.Context(), st, 0, routersvc.NewPresence(), (&testClock{now: t0}).Now)
	if err != nil {
		t.Fatal(err)
	}
	if n := loaded.UnreleasedCount(); n != 4 {
		t.Errorf("loaded %d packet identifiers, want 4", n)
	}
	out := routersvc.NewOutput()
	for _, rec := range []*eventspb.Envelope{
		qos2(pub("t", "p2", "a/1"), 5, 1), qos2(pub("u", "p", "a/1"), 5, 1),
		qos2(pub("t", "p", "a/2"), 6, 4), qos2(pub("t", "p", "a/1"), 7, 6),
	} {
		out.Reset()
		mustApply(t, loaded, rec, out)
		if len(out.Deliveries) != 0 || out.Mutations.Len() != 0 {
			t.Errorf("after a reload, %s was routed again or changed state: %d deliveries, %d writes",
				describe(rec), len(out.Deliveries), out.Mutations.Len())
		}
	}
}

// A repeat changes no retained message: a message that replaced or
// deleted the retained one meanwhile stays in force.
func TestShardQoS2RepeatLeavesRetained(t *testing.T) {
	steps := []step{
		{rec: qos2(pub("t", "p", "r", retain(), payload("first")), 1, 1)},
		{rec: pub("t", "other", "r", retain(), noPayload())}, // deletes it
		{rec: qos2(pub("t", "p", "r", retain(), payload("first")), 1, 1)},
		{rec: add("t", "sub", "r")}, // would get a retained message if there were one
	}
	s, _ := runSteps(t, steps)
	if n := s.RetainedCount(); n != 0 {
		t.Errorf("%d retained messages, want 0: the repeat set it again", n)
	}
}

// The writes a kept identifier makes: one put when it is kept, one delete
// when it is released or its session ends, none for a repeat.
func TestShardQoS2Mutations(t *testing.T) {
	s := routersvc.NewShard(0, routersvc.NewPresence(), (&testClock{now: t0}).Now)
	out := routersvc.NewOutput()
	mustApply(t, s, qos2(pub("t", "p", "a"), 5, 2), out)
	want := []routersvc.UnreleasedMutation{{Unreleased: routersvc.Unreleased{
		UnreleasedKey: routersvc.UnreleasedKey{Tenant: "t", Client: "p", PacketID: 5}, SessionGeneration: 2,
	}}}
	if got := out.Mutations.Unreleased; len(got) != 1 || got[0] != want[0] {
		t.Errorf("kept: writes %+v, want %+v", got, want)
	}
	out.Reset()
	mustApply(t, s, qos2(pub("t", "p", "a"), 5, 2), out)
	if n := out.Mutations.Len(); n != 0 {
		t.Errorf("a repeat wrote %d rows", n)
	}
	mustApply(t, s, qos2(pub("t", "p", "b"), 6, 2), out)
	mustApply(t, s, release("t", "p", 5, 2), out)
	mustApply(t, s, removeAll("t", "p", 3), out)
	got := out.Mutations.Unreleased
	if len(got) != 2 || !got[0].Delete || !got[1].Delete || got[0].PacketID != 6 || got[1].PacketID != 5 {
		t.Errorf("released and ended: writes %+v, want deletions of 6 and 5", got)
	}
	if s.UnreleasedCount() != 0 {
		t.Errorf("%d identifiers left", s.UnreleasedCount())
	}
	// A malformed release is skipped with ErrMalformed.
	if err := s.Apply(release("t", "", 5, 2), 100, out); err == nil {
		t.Error("a release without a client was applied")
	}
}
