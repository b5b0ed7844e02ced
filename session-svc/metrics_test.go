package sessionsvc

import (
	"testing"

	"github.com/shoal-mqtt/shoal/internal/testutil/testmetrics"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// TestSessionMetrics: the partition counts its sessions online and
// offline and the messages in the offline ones' inboxes as it commits,
// and the same from its store after a restart; the service's gauges sum
// its partitions; a full inbox and an expired inbox message count as
// dropped.
func TestSessionMetrics(t *testing.T) {
	p, r := testmetrics.New(t, 10)
	h := newHarness(t)
	s := &Service{tel: p, m: h.m}
	if err := s.registerMetrics(); err != nil {
		t.Fatal(err)
	}
	check := func(what string, online, offline, inbox float64) {
		t.Helper()
		s.setParts([]*partition{h.p, nil}) // a partition not loaded counts nothing
		got := [3]float64{
			r.Value("shoal.session.sessions", "state", "online"),
			r.Value("shoal.session.sessions", "state", "offline"),
			r.Value("shoal.session.inbox.depth"),
		}
		if want := [3]float64{online, offline, inbox}; got != want {
			t.Errorf("%s: online, offline, inbox depth %v, want %v", what, got, want)
		}
	}
	check("empty", 0, 0, 0)
	h.batch(connA.connect(false, 60, nil), connB.connect(true, 0, nil))
	check("two connected", 2, 0, 0)
	h.batch(connA.disconnect(1, false, nil))
	check("a persistent session left", 1, 1, 0)
	h.batch(inboxAppend(connA, "t/1"), inboxAppend(connA, "t/2"), inboxAppend(connA, "t/3"))
	check("its inbox filled (max 2)", 1, 1, 2)
	h.restart()
	check("after a restart", 1, 1, 2)
	h.batch(connB.disconnect(1, false, nil)) // a clean session ends
	check("the clean session ended", 0, 1, 2)
	h.batch(connA2.connect(false, 60, nil))
	check("resumed", 1, 0, 0)
	if got := r.Value("shoal.messages.dropped", "cause", "inbox_full"); got != 1 {
		t.Errorf("dropped{cause=inbox_full} = %v, want 1", got)
	}
}

// TestInboxForwardCarriesPublishTime: a message forwarded to its online
// client as it arrives carries the publish time the router gave it; one
// kept while the client was away does not when the session resumes.
func TestInboxForwardCarriesPublishTime(t *testing.T) {
	h := newHarness(t)
	const published = 1_700_000_000_123_456
	withTime := func(env *eventspb.Envelope) *eventspb.Envelope {
		env.GetInboxAppend().PublishedUs = published
		return env
	}
	h.batch(connA.connect(false, 60, nil), connB.connect(true, 0, nil))
	for _, c := range []conn{connA, connB} { // persistent, and not
		outs := h.batch(withTime(inboxAppend(c, "t/0")))
		if len(outs) != 1 || outs[0].env.GetDelivery().GetPublishedUs() != published {
			t.Fatalf("%s: forwarded %+v, want one delivery published at %d", c.client, outs, int64(published))
		}
	}
	h.batch(connA.disconnect(1, false, nil), withTime(inboxAppend(connA, "t/1")))
	for _, o := range h.batch(connA2.connect(false, 60, nil)) {
		if d := o.env.GetDelivery(); d != nil && d.PublishedUs != 0 {
			t.Errorf("a resumed session's inbox message carries its publish time: %v", d)
		}
	}
}
