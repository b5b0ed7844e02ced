package sessionsvc

import (
	"context"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

func (c conn) command(op eventspb.SessionCommand_Op) *eventspb.Envelope {
	env := c.env(&eventspb.Envelope{Event: &eventspb.Envelope_SessionCommand{SessionCommand: &eventspb.SessionCommand{Op: op, Reason: "test"}}})
	env.Gateway = "" // an operator's command names no gateway
	return env
}

func wantAdminKick(c conn) output {
	o := wantKick(c)
	o.env.GetKick().ReasonCode = 0x98
	return o
}

func TestCommandKickOnlineClient(t *testing.T) {
	h := newHarness(t)
	h.batch(connA.connect(false, 3600, nil))
	got := h.batch(connA.command(eventspb.SessionCommand_OP_KICK))
	checkOutputs(t, got, outputs(wantAdminKick(connA)))
	// The session is what the connection's end makes it: the gateway's
	// Disconnect follows the kick.
	if s := h.session(connA); !s.Online || !s.Active {
		t.Errorf("session after kick %+v, want still online until the gateway reports the close", s)
	}
	h.batch(connA.disconnect(1, true, nil))
	if s := h.session(connA); s.Online || !s.Active {
		t.Errorf("session after the kicked connection ended %+v, want offline and kept", s)
	}
}

func TestCommandKickOfflineClientChangesNothing(t *testing.T) {
	h := newHarness(t)
	h.batch(connA.connect(false, 3600, nil))
	h.batch(connA.disconnect(1, false, nil))
	if got := h.batch(connA.command(eventspb.SessionCommand_OP_KICK)); len(got) != 0 {
		t.Errorf("kick of an offline client wrote %d outputs, want none", len(got))
	}
}

func TestCommandDeleteOnlineSession(t *testing.T) {
	h := newHarness(t)
	w := testWill()
	sub := &eventspb.SessionSubscription{Filter: "a/+", Options: &eventspb.SubscriptionOptions{Qos: 1}}
	h.batch(connA.connect(false, 3600, w), connA.subscriptions(1, nil, sub))
	got := h.batch(connA.command(eventspb.SessionCommand_OP_DELETE_SESSION))
	// Kicked with 0x98, its subscriptions removed everywhere, offline
	// presence, the will published (the connection ended uncleanly).
	checkOutputs(t, got, outputs(
		wantAdminKick(connA),
		wantRemoveAll(connA, 1),
		wantPresence(connA, false, true, 1),
		wantWill(connA, w, 1),
	))
	s := h.session(connA)
	if s.Active || s.Online || len(s.Subscriptions) != 0 || s.Inbox != nil {
		t.Errorf("session after deletion %+v, want ended", s)
	}
	// The gateway's late Disconnect of the kicked connection is stale.
	if got := h.batch(connA.disconnect(1, true, nil)); len(got) != 0 {
		t.Errorf("disconnect after deletion wrote %d outputs, want none", len(got))
	}
	// A reconnect without Clean Start finds no session.
	got = h.batch(connA2.connect(false, 3600, nil))
	if cr := got[len(got)-1].env.GetConnectResult(); cr == nil || cr.SessionPresent {
		t.Errorf("reconnect after deletion answered %v, want session present false", cr)
	}
}

func TestCommandDeleteOfflineSessionDiscardsInbox(t *testing.T) {
	h := newHarness(t)
	h.batch(connA.connect(false, 3600, nil))
	h.batch(connA.disconnect(1, false, nil))
	h.batch(connA.env(&eventspb.Envelope{Event: &eventspb.Envelope_InboxAppend{InboxAppend: &eventspb.InboxAppend{
		Message: &eventspb.Message{Topic: "a/b", Payload: []byte("x"), Qos: 1},
		Target:  &eventspb.Target{ClientId: connA.client, Qos: 1},
	}}}))
	if n := len(h.session(connA).Inbox); n != 1 {
		t.Fatalf("inbox before deletion holds %d, want 1", n)
	}
	got := h.batch(connA.command(eventspb.SessionCommand_OP_DELETE_SESSION))
	checkOutputs(t, got, outputs(wantRemoveAll(connA, 1)))
	if s := h.session(connA); s.Active || len(s.Inbox) != 0 {
		t.Errorf("session after deletion %+v, want ended with an empty inbox", s)
	}
	if got := h.batch(connA.command(eventspb.SessionCommand_OP_DELETE_SESSION)); len(got) != 0 {
		t.Errorf("second deletion wrote %d outputs, want none", len(got))
	}
}

// TestViewWaitEndsWithRequest: an operator's view waits for the batch under
// way (settle), but no longer than the request that asked: a cancelled
// context ends the wait at once, and the committed state is returned.
func TestViewWaitEndsWithRequest(t *testing.T) {
	k := clientKey{"acme", "acme-1"}
	p := &partition{
		sessions: map[clientKey]*Session{k: {Tenant: k.tenant, ClientID: k.client, Active: true}},
		settled:  make(chan struct{}), // a batch under way that never ends
	}
	s := &Service{parts: []*partition{p}, sessionsPartitions: 1}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	all := s.Sessions(ctx, "acme", false)
	one, err := s.Session(ctx, "acme", "acme-1")
	if waited := time.Since(start); waited >= commandSettle/2 {
		t.Errorf("views of a cancelled request waited %v for the batch under way", waited)
	}
	if len(all) != 1 || err != nil || one.ClientID != "acme-1" {
		t.Errorf("Sessions %d sessions, Session %v, %v: want the committed session", len(all), one, err)
	}
}
