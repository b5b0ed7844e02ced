package gateway

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// TestQoS2PersistentSessionRelease: a persistent session's QoS 2 Publish
// carries its packet identifier and session generation for the router;
// PUBCOMP waits until the PublishRelease is durable, in the partition of
// the Publish; an identifier an earlier connection of the resumed session
// received is released in every partition, and its PUBCOMP does not count
// against this connection's receive window.
func TestQoS2PersistentSessionRelease(t *testing.T) {
	fl := newFakeLog()
	fl.answer = func(cr *eventspb.ConnectResult) {
		cr.Generation, cr.SessionGeneration, cr.SessionPresent = 4, 2, true
	}
	g := startGateway(t, fl)
	cp := &packet.Connect{Version: packet.V5, ClientID: []byte("t-p"), CleanStart: false}
	cp.Props.SessionExpiry = 300
	cp.Props.Set(packet.PropSessionExpiry)
	nc, rd, ca := connectWith(t, g, cp)
	if !ca.SessionPresent {
		t.Fatalf("want CONNACK with session present, got %v", ca)
	}

	write(t, nc, &packet.Publish{QoS: 2, PacketID: 8, Topic: []byte("b"), Payload: []byte("2")})
	fl.waitProduced(t, 1)
	_, env := fl.heldEnvelope(t, 0)
	if pub := env.GetPublish(); pub.GetPacketId() != 8 || pub.GetSessionGeneration() != 2 {
		t.Fatalf("publish carries packet id %d, session generation %d; want 8, 2", pub.GetPacketId(), pub.GetSessionGeneration())
	}
	fl.complete(0, nil)
	if a := readAck(t, nc, rd); a.Kind != packet.PUBREC || a.PacketID != 8 {
		t.Fatalf("got %v %d, want PUBREC 8", a.Kind, a.PacketID)
	}

	write(t, nc, &packet.Ack{Kind: packet.PUBREL, PacketID: 8})
	fl.waitProduced(t, 1)
	rec, env := fl.heldEnvelope(t, 1)
	want := kafka.PartitionForKey([]byte("t/b"), fl.Partitions(kafka.TopicMessages))
	if rel := env.GetPublishRelease(); rel.GetPacketId() != 8 || rel.GetSessionGeneration() != 2 ||
		rec.Topic != kafka.TopicMessages || rec.Partition != want || env.ClientId != "t-p" {
		t.Fatalf("release %v to %s/%d, want packet 8, session generation 2, to %s/%d", env, rec.Topic, rec.Partition, kafka.TopicMessages, want)
	}
	expectSilence(t, nc, rd, 100*time.Millisecond) // no PUBCOMP before the release is durable
	fl.complete(1, nil)
	if a := readAck(t, nc, rd); a.Kind != packet.PUBCOMP || a.PacketID != 8 || a.Code != 0 {
		t.Fatalf("got %v %d %v, want PUBCOMP 8", a.Kind, a.PacketID, a.Code)
	}

	// An identifier of an earlier connection of the session.
	write(t, nc, &packet.Ack{Kind: packet.PUBREL, PacketID: 9})
	fl.waitProduced(t, 4)
	seen := map[int32]bool{}
	for i := 2; i < 6; i++ {
		rec, env := fl.heldEnvelope(t, i)
		if env.GetPublishRelease().GetPacketId() != 9 || rec.Topic != kafka.TopicMessages {
			t.Fatalf("record %d: %v to %s, want a release of 9", i, env, rec.Topic)
		}
		seen[rec.Partition] = true
		fl.complete(i, nil)
	}
	if len(seen) != 4 {
		t.Errorf("released in partitions %v, want all 4", seen)
	}
	if a := readAck(t, nc, rd); a.Kind != packet.PUBCOMP || a.PacketID != 9 || a.Code != 0 {
		t.Fatalf("got %v %d %v, want PUBCOMP 9", a.Kind, a.PacketID, a.Code)
	}
	if n := connOf(t, g, "t-p").inInflight.Load(); n != 0 {
		t.Errorf("%d publishes in flight after every flow completed, want 0", n)
	}
}

// TestQoS2ResumedWithoutExpiryKeepsIdentifiers: a 5.0 client that
// resumes its session with a session expiry of 0 on this connect resends
// the QoS 2 PUBLISHes it has no PUBREC for; an earlier connection may have
// left their identifiers with the router, so the Publish carries its
// identifier and session generation (else the router would route the
// resend again) and PUBREL releases it in the log.
func TestQoS2ResumedWithoutExpiryKeepsIdentifiers(t *testing.T) {
	fl := newFakeLog()
	fl.answer = func(cr *eventspb.ConnectResult) {
		cr.Generation, cr.SessionGeneration, cr.SessionPresent = 4, 2, true
	}
	g := startGateway(t, fl)
	cp := &packet.Connect{Version: packet.V5, ClientID: []byte("t-z"), CleanStart: false}
	nc, rd, ca := connectWith(t, g, cp)
	if !ca.SessionPresent {
		t.Fatalf("want CONNACK with session present, got %v", ca)
	}
	write(t, nc, &packet.Publish{QoS: 2, PacketID: 3, Dup: true, Topic: []byte("b"), Payload: []byte("2")})
	fl.waitProduced(t, 1)
	if _, env := fl.heldEnvelope(t, 0); env.GetPublish().GetPacketId() != 3 || env.GetPublish().GetSessionGeneration() != 2 {
		t.Fatalf("resent publish carries packet id %d, session generation %d; want 3, 2",
			env.GetPublish().GetPacketId(), env.GetPublish().GetSessionGeneration())
	}
	fl.complete(0, nil)
	if a := readAck(t, nc, rd); a.Kind != packet.PUBREC || a.PacketID != 3 {
		t.Fatalf("got %v %d, want PUBREC 3", a.Kind, a.PacketID)
	}
	write(t, nc, &packet.Ack{Kind: packet.PUBREL, PacketID: 3})
	fl.waitProduced(t, 1)
	if _, env := fl.heldEnvelope(t, 1); env.GetPublishRelease().GetPacketId() != 3 {
		t.Fatalf("record after PUBREL is %v, want the release of 3", env)
	}
	fl.complete(1, nil)
	if a := readAck(t, nc, rd); a.Kind != packet.PUBCOMP || a.PacketID != 3 || a.Code != 0 {
		t.Fatalf("got %v %d %v, want PUBCOMP 3", a.Kind, a.PacketID, a.Code)
	}
}

// TestQoS2CleanSessionKeepsNothingInTheRouter: without a persistent
// session the identifiers die with the connection: the Publish carries no
// packet identifier, PUBCOMP needs no log write, and an unknown
// identifier is answered 0x92.
func TestQoS2CleanSessionKeepsNothingInTheRouter(t *testing.T) {
	fl := newFakeLog()
	g := startGateway(t, fl)
	nc, rd := dial(t, g)
	write(t, nc, &packet.Publish{QoS: 2, PacketID: 8, Topic: []byte("b"), Payload: []byte("2")})
	fl.waitProduced(t, 1)
	if _, env := fl.heldEnvelope(t, 0); env.GetPublish().GetPacketId() != 0 {
		t.Fatalf("publish of a clean session carries packet id %d", env.GetPublish().GetPacketId())
	}
	fl.complete(0, nil)
	readAck(t, nc, rd)
	write(t, nc, &packet.Ack{Kind: packet.PUBREL, PacketID: 8})
	if a := readAck(t, nc, rd); a.Kind != packet.PUBCOMP || a.Code != 0 {
		t.Fatalf("got %v %v, want PUBCOMP", a.Kind, a.Code)
	}
	write(t, nc, &packet.Ack{Kind: packet.PUBREL, PacketID: 9})
	if a := readAck(t, nc, rd); a.Kind != packet.PUBCOMP || a.Code != packet.CodePacketIdentifierNotFound {
		t.Fatalf("got %v %v, want PUBCOMP 0x92", a.Kind, a.Code)
	}
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if len(fl.held) != 1 {
		t.Errorf("%d records, want 1 (the publish)", len(fl.held))
	}
}

// TestQoS2UnknownReleasesBounded: PUBRELs of identifiers the connection
// never received write to every partition for at most receive_maximum of
// them; after that a made-up identifier is answered 0x92 without a write.
func TestQoS2UnknownReleasesBounded(t *testing.T) {
	fl := newFakeLog()
	fl.answer = func(cr *eventspb.ConnectResult) { cr.SessionPresent = true }
	g := startGateway(t, fl, func(c *Config) { c.ReceiveMaximum = 2 })
	nc, err := net.Dial("tcp", g.Addr("mqtt").String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	rd := packet.NewReader(nc, 256)
	cp := &packet.Connect{Version: packet.V5, ClientID: []byte("t-r"), CleanStart: false}
	cp.Props.SessionExpiry = 300
	cp.Props.Set(packet.PropSessionExpiry)
	write(t, nc, cp)
	if _, ok := read(t, nc, rd, 5*time.Second).(*packet.Connack); !ok {
		t.Fatal("want CONNACK")
	}
	for id := uint16(1); id <= 2; id++ {
		write(t, nc, &packet.Ack{Kind: packet.PUBREL, PacketID: id})
		fl.waitProduced(t, 4)
		for i := 4 * int(id-1); i < 4*int(id); i++ {
			fl.complete(i, nil)
		}
		if a := readAck(t, nc, rd); a.Kind != packet.PUBCOMP || a.PacketID != id || a.Code != 0 {
			t.Fatalf("got %v %d %v, want PUBCOMP %d", a.Kind, a.PacketID, a.Code, id)
		}
	}
	write(t, nc, &packet.Ack{Kind: packet.PUBREL, PacketID: 3})
	if a := readAck(t, nc, rd); a.Kind != packet.PUBCOMP || a.PacketID != 3 || a.Code != packet.CodePacketIdentifierNotFound {
		t.Fatalf("got %v %d %v, want PUBCOMP 3 with 0x92", a.Kind, a.PacketID, a.Code)
	}
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if len(fl.held) != 8 {
		t.Errorf("%d records written, want 8 (two releases to 4 partitions)", len(fl.held))
	}
}

// TestSubscriptionCarriesSessionGeneration: an ADD carries the generation
// the client's session began with, so that a router tells a new session's
// subscription from an entry of an ended one whose removal is still to
// come (a takeover's).
func TestSubscriptionCarriesSessionGeneration(t *testing.T) {
	fl := newFakeLog()
	fl.answer = func(cr *eventspb.ConnectResult) { cr.Generation, cr.SessionGeneration = 4, 3 }
	g := startGateway(t, fl)
	nc, _, _ := connectWith(t, g, &packet.Connect{Version: packet.V5, ClientID: []byte("t-s"), CleanStart: true})
	s := &packet.Subscribe{PacketID: 1, Filters: []packet.Subscription{{Filter: []byte("a/b"), QoS: 1}}}
	if _, err := nc.Write(s.Append(nil, packet.V5)); err != nil {
		t.Fatal(err)
	}
	fl.waitProduced(t, 2) // the ADD and the session's list
	adds := 0
	for i := range 2 {
		if _, env := fl.heldEnvelope(t, i); env.GetSubscriptionChange() != nil {
			adds++
			if ch := env.GetSubscriptionChange(); ch.GetSessionGeneration() != 3 || ch.GetRoute().GetGeneration() != 4 {
				t.Errorf("ADD of session generation %d, route generation %d; want 3, 4", ch.GetSessionGeneration(), ch.GetRoute().GetGeneration())
			}
		}
	}
	for i := range 2 {
		fl.complete(i, nil)
	}
	if adds != 1 {
		t.Fatalf("%d subscription changes written, want 1", adds)
	}
}

// TestQoS2PubrelAfterPubrecRecorded: the PUBREL of a QoS 2 message of the
// session's inbox goes out only once the session service has the PUBREC
// (its InboxAck written): a client that completed the message and resumes
// elsewhere must get PUBREL again, never the message as a new one
// (TestFaults/RollingRestart found it). A PUBREC written in vain ends the
// connection, without a PUBREL.
func TestQoS2PubrelAfterPubrecRecorded(t *testing.T) {
	for _, fail := range []bool{false, true} {
		fl := newFakeLog()
		g := startGateway(t, fl)
		nc, rd := dial(t, g)
		c := connOf(t, g, "t-1")
		env := &eventspb.Envelope{Tenant: "t", ClientId: "t-1", Event: &eventspb.Envelope_Delivery{Delivery: &eventspb.Delivery{
			Message: &eventspb.Message{Topic: "a", Payload: []byte("m"), Qos: 2},
			Targets: []*eventspb.Target{{ClientId: "t-1", Connection: c.id, Qos: 2, PacketId: 5, InboxSeq: 1}},
		}}}
		fl.slot <- kafka.Batch{Records: []*kafka.Record{kafka.NewRecord(kafka.TopicDeliveries, nil, 0, env)}}
		if p, ok := read(t, nc, rd, 5*time.Second).(*packet.Publish); !ok || p.PacketID != 5 {
			t.Fatalf("got %+v, want PUBLISH 5", p)
		}
		fl.mu.Lock()
		before := len(fl.held)
		fl.mu.Unlock()
		write(t, nc, &packet.Ack{Kind: packet.PUBREC, PacketID: 5})
		fl.waitProduced(t, 1)
		_, ack := fl.heldEnvelope(t, before)
		if a := ack.GetInboxAck(); a.GetSeq() != 1 || !a.GetReceived() {
			t.Fatalf("after PUBREC the gateway wrote %v, want InboxAck seq 1 received", ack)
		}
		expectSilence(t, nc, rd, 200*time.Millisecond) // no PUBREL while it is written
		if fail {
			fl.complete(before, errors.New("the log refused it"))
			expectDisconnect(t, nc, rd, packet.CodeUnspecifiedError)
			continue
		}
		fl.complete(before, nil)
		if a, ok := read(t, nc, rd, 5*time.Second).(*packet.Ack); !ok || a.Kind != packet.PUBREL || a.PacketID != 5 {
			t.Fatalf("got %+v, want PUBREL 5 once the PUBREC is recorded", a)
		}
		write(t, nc, &packet.Ack{Kind: packet.PUBCOMP, PacketID: 5})
		fl.waitProduced(t, 1)
		if _, done := fl.heldEnvelope(t, before+1); done.GetInboxAck().GetSeq() != 1 || done.GetInboxAck().GetReceived() {
			t.Fatalf("after PUBCOMP the gateway wrote %v, want InboxAck seq 1 done", done)
		}
		fl.complete(before+1, nil)
	}
}
