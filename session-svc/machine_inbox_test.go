package sessionsvc

import (
	"bytes"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

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

// A full inbox logs its first drop and then one line per inboxDropLogEvery
// drops, not one per message: under a sustained overload a line per drop
// flooded the log.
func TestInboxFullLogsEveryThousandth(t *testing.T) {
	h := newHarness(t)
	var buf bytes.Buffer
	h.m.log = slog.New(slog.NewTextHandler(&buf, nil))
	h.batch(connA.connect(false, 60, nil))
	h.batch(connA.disconnect(1, false, nil))
	const appended = 2 + 2*inboxDropLogEvery + 1 // 2 kept, then 2,001 dropped
	envs := make([]*eventspb.Envelope, appended)
	for i := range envs {
		envs[i] = inboxAppend(connA, fmt.Sprintf("t/%d", i))
	}
	h.batch(envs...)
	if s := h.session(connA); s.InboxDropped != appended-2 {
		t.Fatalf("dropped %d, want %d", s.InboxDropped, appended-2)
	}
	lines := strings.Count(buf.String(), "inbox full; message dropped")
	if lines != 3 || !strings.Contains(buf.String(), "dropped_since_connect=2001") {
		t.Fatalf("%d warnings (want 3: drops 1, 1001 and 2001):\n%s", lines, buf.String())
	}
}
