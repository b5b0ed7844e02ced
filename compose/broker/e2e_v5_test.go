package broker_test

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/shoal-mqtt/shoal/compose/broker"
	"github.com/shoal-mqtt/shoal/compose/broker/brokertest"
	"github.com/shoal-mqtt/shoal/compose/config"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/kafka"
)

func u32(v uint32) *uint32 { return &v }

func TestConnackProperties(t *testing.T) {
	b := startBroker(t, func(c *config.Config) { c.Gateway.MaxKeepAlive = 20 * time.Second })
	c, ca := dialV5(t, mqttAddr(b), "", func(cp *paho.Connect) { cp.KeepAlive = 600 })
	_ = c
	if ca.ReasonCode != 0 {
		t.Fatalf("reason = %#x", ca.ReasonCode)
	}
	p := ca.Properties
	if p == nil {
		t.Fatal("no CONNACK properties")
	}
	if p.AssignedClientID == "" {
		t.Error("no assigned client identifier for an empty one")
	}
	if p.ReceiveMaximum == nil || *p.ReceiveMaximum != config.Default().Gateway.ReceiveMaximum {
		t.Errorf("receive maximum = %v", p.ReceiveMaximum)
	}
	if p.MaximumPacketSize == nil || *p.MaximumPacketSize != config.Default().Gateway.MaxPacketSize {
		t.Errorf("maximum packet size = %v", p.MaximumPacketSize)
	}
	if p.TopicAliasMaximum == nil || *p.TopicAliasMaximum != config.Default().Gateway.TopicAliasMaximum {
		t.Errorf("topic alias maximum = %v", p.TopicAliasMaximum)
	}
	if p.ServerKeepAlive == nil || *p.ServerKeepAlive != 20 {
		t.Errorf("server keep alive = %v, want 20", p.ServerKeepAlive)
	}
}

func TestPubSubQoS(t *testing.T) {
	b := startBroker(t)
	for _, pubQoS := range []byte{0, 1, 2} {
		for _, subQoS := range []byte{0, 1, 2} {
			t.Run(fmt.Sprintf("pub%d-sub%d", pubQoS, subQoS), func(t *testing.T) {
				topic := fmt.Sprintf("qos/%d/%d", pubQoS, subQoS)
				sub, _ := dialV5(t, mqttAddr(b), fmt.Sprintf("qos-sub%d%d", pubQoS, subQoS))
				sa := sub.subscribe(t, paho.SubscribeOptions{Topic: topic, QoS: subQoS})
				if sa.Reasons[0] != subQoS {
					t.Fatalf("granted %d, want %d", sa.Reasons[0], subQoS)
				}
				pub, _ := dialV5(t, mqttAddr(b), fmt.Sprintf("qos-pub%d%d", pubQoS, subQoS))
				for i := 0; i < 10; i++ {
					pub.publish(t, &paho.Publish{Topic: topic, QoS: pubQoS, Payload: []byte(fmt.Sprint(i))})
				}
				for i := 0; i < 10; i++ {
					m := sub.expect(t)
					if string(m.Payload) != fmt.Sprint(i) || m.Topic != topic {
						t.Fatalf("message %d: %q on %q", i, m.Payload, m.Topic)
					}
					if want := min(pubQoS, subQoS); m.QoS != want {
						t.Fatalf("delivered at QoS %d, want %d", m.QoS, want)
					}
				}
				sub.expectNone(t, 100*time.Millisecond)
			})
		}
	}
}

func TestWildcardsAndDollarTopics(t *testing.T) {
	b := startBroker(t)
	sub, _ := dialV5(t, mqttAddr(b), "wild-sub")
	sub.subscribe(t,
		paho.SubscribeOptions{Topic: "sport/+/player1", QoS: 1},
		paho.SubscribeOptions{Topic: "finance/#", QoS: 1},
	)
	all, _ := dialV5(t, mqttAddr(b), "wild-all")
	all.subscribe(t, paho.SubscribeOptions{Topic: "#", QoS: 1})
	pub, _ := dialV5(t, mqttAddr(b), "wild-pub")
	for _, topic := range []string{"sport/tennis/player1", "sport/tennis/player2", "finance", "finance/usd/eur", "other"} {
		pub.publish(t, &paho.Publish{Topic: topic, QoS: 1, Payload: []byte(topic)})
	}
	var got []string
	for range 3 {
		got = append(got, sub.expect(t).Topic)
	}
	slices.Sort(got)
	if want := []string{"finance", "finance/usd/eur", "sport/tennis/player1"}; !slices.Equal(got, want) {
		t.Fatalf("wildcard subscriber got %v, want %v", got, want)
	}
	sub.expectNone(t, 100*time.Millisecond)
	for range 5 {
		all.expect(t)
	}
	all.expectNone(t, 100*time.Millisecond)
}

func TestRetained(t *testing.T) {
	b := startBroker(t)
	pub, _ := dialV5(t, mqttAddr(b), "ret-pub")
	pub.publish(t, &paho.Publish{Topic: "ret/a", QoS: 1, Retain: true, Payload: []byte("one")})
	pub.publish(t, &paho.Publish{Topic: "ret/a", QoS: 1, Retain: true, Payload: []byte("two")})
	pub.publish(t, &paho.Publish{Topic: "ret/b", QoS: 0, Retain: true, Payload: []byte("b")})
	// A QoS 0 publish returns once sent: a subscription made at once can
	// come before the router stored it, and then gets it live, without
	// the retain flag, as MQTT has it. Wait until it is stored.
	waitRetained(t, mqttAddr(b), "ret", "ret/b")

	s1, _ := dialV5(t, mqttAddr(b), "ret-s1")
	s1.subscribe(t, paho.SubscribeOptions{Topic: "ret/#", QoS: 1})
	got := map[string]string{}
	for range 2 {
		m := s1.expect(t)
		if !m.Retain {
			t.Errorf("retained message on %s without the retain flag", m.Topic)
		}
		got[m.Topic] = string(m.Payload)
	}
	if got["ret/a"] != "two" || got["ret/b"] != "b" {
		t.Fatalf("retained = %v, want ret/a=two (replaced) and ret/b=b", got)
	}
	s1.expectNone(t, 100*time.Millisecond)

	// An empty retained payload deletes; it is still delivered to current
	// subscribers.
	pub.publish(t, &paho.Publish{Topic: "ret/a", QoS: 1, Retain: true, Payload: nil})
	if m := s1.expect(t); m.Topic != "ret/a" || len(m.Payload) != 0 {
		t.Fatalf("delete: got %q on %s", m.Payload, m.Topic)
	}
	s2, _ := dialV5(t, mqttAddr(b), "ret-s2")
	s2.subscribe(t, paho.SubscribeOptions{Topic: "ret/#", QoS: 1})
	if m := s2.expect(t); m.Topic != "ret/b" {
		t.Fatalf("after delete got %s, want only ret/b", m.Topic)
	}
	s2.expectNone(t, 100*time.Millisecond)
}

// waitRetained waits (up to 50 tries of 200 ms) until a new subscription
// of tenant to topic gets a retained message: the broker has stored it.
func waitRetained(t *testing.T, addr, tenant, topic string) {
	t.Helper()
	for i := range 50 {
		p, _ := dialV5(t, addr, fmt.Sprintf("%s-probe-%d", tenant, i))
		p.subscribe(t, paho.SubscribeOptions{Topic: topic, QoS: 1})
		select {
		case m := <-p.msgs:
			if m.Retain {
				_ = p.Disconnect(&paho.Disconnect{})
				return
			}
		case <-time.After(200 * time.Millisecond):
		}
		_ = p.Disconnect(&paho.Disconnect{})
	}
	t.Fatalf("no retained message on %s after 50 tries", topic)
}

// TestRetainedOnePartition: a new wildcard subscription gets every
// matching retained message [MQTT-3.3.1-9], also several that one shard
// holds. The shard sends them all for the one SubscriptionChange record,
// each in a delivery of its own; when the gateway took every delivery of
// a record after the first as a repeat, the subscriber got only the
// first by topic (status/a, not status/c). After a restart, from the
// stored view, too.
func TestRetainedOnePartition(t *testing.T) {
	topics := []string{"status/a", "status/c"} // tenant acme, 4 partitions: both in partition 1
	p := kafka.PartitionForKey(kafka.Key("acme", topics[0]), 4)
	if q := kafka.PartitionForKey(kafka.Key("acme", topics[1]), 4); p != q {
		t.Fatalf("%s in partition %d, %s in %d: the test needs one partition", topics[0], p, topics[1], q)
	}
	var dir string
	b, stop := brokertest.Run(t, func(c *config.Config) { dir = c.DataDir })
	pub, _ := dialV5(t, mqttAddr(b), "acme-pub")
	for _, topic := range topics {
		pub.publish(t, &paho.Publish{Topic: topic, QoS: 1, Retain: true, Payload: []byte(topic)})
	}
	expectRetained := func(b *broker.Broker, id string) {
		t.Helper()
		s, _ := dialV5(t, mqttAddr(b), id)
		s.subscribe(t, paho.SubscribeOptions{Topic: "status/#", QoS: 1})
		var got []string
		for range topics {
			m := s.expect(t)
			if !m.Retain || string(m.Payload) != m.Topic {
				t.Errorf("%s: %q on %s, retain %v", id, m.Payload, m.Topic, m.Retain)
			}
			got = append(got, m.Topic)
		}
		slices.Sort(got)
		if !slices.Equal(got, topics) {
			t.Errorf("%s got %v, want %v", id, got, topics)
		}
		s.expectNone(t, 100*time.Millisecond)
	}
	expectRetained(b, "acme-sub1")
	stop()
	b = brokertest.Start(t, func(c *config.Config) { c.DataDir = dir })
	expectRetained(b, "acme-sub2")
}

func TestRetainHandling(t *testing.T) {
	b := startBroker(t)
	pub, _ := dialV5(t, mqttAddr(b), "rh-pub")
	pub.publish(t, &paho.Publish{Topic: "rh/x", QoS: 1, Retain: true, Payload: []byte("r")})

	c, _ := dialV5(t, mqttAddr(b), "rh-sub")
	// 2: never.
	c.subscribe(t, paho.SubscribeOptions{Topic: "rh/x", QoS: 1, RetainHandling: 2})
	c.expectNone(t, 200*time.Millisecond)
	// 1: only for a new subscription — this one exists.
	c.subscribe(t, paho.SubscribeOptions{Topic: "rh/x", QoS: 1, RetainHandling: 1})
	c.expectNone(t, 200*time.Millisecond)
	// 1 on a new filter: sent.
	c.subscribe(t, paho.SubscribeOptions{Topic: "rh/+", QoS: 1, RetainHandling: 1})
	if m := c.expect(t); string(m.Payload) != "r" || !m.Retain {
		t.Fatalf("retain handling 1, new subscription: got %q retain=%v", m.Payload, m.Retain)
	}
	// 0: always, also on resubscribe.
	c.subscribe(t, paho.SubscribeOptions{Topic: "rh/x", QoS: 1, RetainHandling: 0})
	if m := c.expect(t); string(m.Payload) != "r" {
		t.Fatalf("retain handling 0: got %q", m.Payload)
	}
}

func TestNoLocalAndRetainAsPublished(t *testing.T) {
	b := startBroker(t)
	c, _ := dialV5(t, mqttAddr(b), "nl-self")
	c.subscribe(t,
		paho.SubscribeOptions{Topic: "nl/local", QoS: 1, NoLocal: true},
		paho.SubscribeOptions{Topic: "nl/rap", QoS: 1, RetainAsPublished: true},
		paho.SubscribeOptions{Topic: "nl/plain", QoS: 1},
	)
	c.publish(t, &paho.Publish{Topic: "nl/local", QoS: 1, Payload: []byte("mine")})
	c.publish(t, &paho.Publish{Topic: "nl/rap", QoS: 1, Retain: true, Payload: []byte("rap")})
	c.publish(t, &paho.Publish{Topic: "nl/plain", QoS: 1, Retain: true, Payload: []byte("plain")})
	// Different topics live in different partitions: no order between them.
	retain := map[string]bool{}
	for range 2 {
		m := c.expect(t)
		retain[m.Topic] = m.Retain
	}
	if r, ok := retain["nl/rap"]; !ok || !r {
		t.Fatalf("retain-as-published: got %v, want nl/rap with retain set", retain)
	}
	if r, ok := retain["nl/plain"]; !ok || r {
		t.Fatalf("without retain-as-published: got %v, want nl/plain with retain cleared", retain)
	}
	c.expectNone(t, 200*time.Millisecond)
}

func TestPassThroughProperties(t *testing.T) {
	b := startBroker(t)
	sub, _ := dialV5(t, mqttAddr(b), "pt-sub")
	sub.subscribe(t, paho.SubscribeOptions{Topic: "pt", QoS: 1})
	pub, _ := dialV5(t, mqttAddr(b), "pt-pub")
	format := byte(1)
	pub.publish(t, &paho.Publish{Topic: "pt", QoS: 1, Payload: []byte("héllo"), Properties: &paho.PublishProperties{
		PayloadFormat:   &format,
		ContentType:     "text/plain",
		ResponseTopic:   "pt/reply",
		CorrelationData: []byte{1, 2, 3},
		User:            paho.UserProperties{{Key: "a", Value: "1"}, {Key: "a", Value: "2"}, {Key: "b", Value: "3"}},
	}})
	m := sub.expect(t)
	p := m.Properties
	if p == nil || p.PayloadFormat == nil || *p.PayloadFormat != 1 || p.ContentType != "text/plain" ||
		p.ResponseTopic != "pt/reply" || !bytes.Equal(p.CorrelationData, []byte{1, 2, 3}) {
		t.Fatalf("properties not passed through: %+v", p)
	}
	want := paho.UserProperties{{Key: "a", Value: "1"}, {Key: "a", Value: "2"}, {Key: "b", Value: "3"}}
	if !slices.Equal(p.User, want) {
		t.Fatalf("user properties = %v, want %v in order", p.User, want)
	}
}

func TestMessageExpiry(t *testing.T) {
	b := startBroker(t)
	pub, _ := dialV5(t, mqttAddr(b), "exp-pub")
	pub.publish(t, &paho.Publish{Topic: "exp/short", QoS: 1, Retain: true, Payload: []byte("gone"),
		Properties: &paho.PublishProperties{MessageExpiry: u32(1)}})
	pub.publish(t, &paho.Publish{Topic: "exp/long", QoS: 1, Retain: true, Payload: []byte("kept"),
		Properties: &paho.PublishProperties{MessageExpiry: u32(100)}})
	time.Sleep(2100 * time.Millisecond) // real time: the broker counts the 1 s expiry on its real clock
	sub, _ := dialV5(t, mqttAddr(b), "exp-sub")
	sub.subscribe(t, paho.SubscribeOptions{Topic: "exp/#", QoS: 1})
	m := sub.expect(t)
	if m.Topic != "exp/long" {
		t.Fatalf("got %s: the expired retained message was delivered", m.Topic)
	}
	if m.Properties == nil || m.Properties.MessageExpiry == nil {
		t.Fatal("remaining message expiry interval not forwarded")
	}
	if left := *m.Properties.MessageExpiry; left > 98 || left < 90 {
		t.Fatalf("remaining expiry = %d s, want about 98", left)
	}
	sub.expectNone(t, 200*time.Millisecond)
}

func TestSubscriptionIdentifiersAndOverlap(t *testing.T) {
	b := startBroker(t)
	r := dialRaw(t, mqttAddr(b), packet.V5)
	r.connect(&packet.Connect{ClientID: []byte("ids-sub"), CleanStart: true, KeepAlive: 30})
	for i, f := range []struct {
		filter string
		qos    byte
	}{{"ids/+", 0}, {"ids/#", 2}} {
		s := &packet.Subscribe{PacketID: uint16(i + 1), Filters: []packet.Subscription{{Filter: []byte(f.filter), QoS: f.qos}}}
		s.Props.SubscriptionIDs = []uint32{uint32(11 - i)} // the higher identifier subscribed first
		s.Props.Set(packet.PropSubscriptionID)
		r.send(s)
		if sa, ok := r.next(wait).(*packet.Suback); !ok || sa.Codes[0] != packet.ReasonCode(f.qos) {
			t.Fatalf("suback for %s: %+v", f.filter, sa)
		}
	}
	pub, _ := dialV5(t, mqttAddr(b), "ids-pub")
	pub.publish(t, &paho.Publish{Topic: "ids/x", QoS: 2, Payload: []byte("once")})
	p, ok := r.next(wait).(*packet.Publish)
	if !ok {
		t.Fatal("want PUBLISH")
	}
	// Every matching identifier, in ascending order.
	if ids := p.Props.SubscriptionIDs; p.QoS != 2 || !slices.Equal(ids, []uint32{10, 11}) {
		t.Fatalf("overlapping subscriptions: QoS %d ids %v, want one delivery at QoS 2 with ids [10 11]", p.QoS, ids)
	}
	r.send(&packet.Ack{Kind: packet.PUBREC, PacketID: p.PacketID})
	if rel, ok := r.next(wait).(*packet.Ack); !ok || rel.Kind != packet.PUBREL {
		t.Fatal("want PUBREL")
	}
	r.send(&packet.Ack{Kind: packet.PUBCOMP, PacketID: p.PacketID})
	if _, err := r.read(200 * time.Millisecond); err == nil {
		t.Fatal("a second delivery for overlapping subscriptions")
	}
}

func TestTopicAliases(t *testing.T) {
	b := startBroker(t)
	// Outbound: the subscriber allows 5 aliases.
	sub := dialRaw(t, mqttAddr(b), packet.V5)
	cp := &packet.Connect{ClientID: []byte("alias-sub"), CleanStart: true, KeepAlive: 30}
	cp.Props.TopicAliasMax = 5
	cp.Props.Set(packet.PropTopicAliasMax)
	sub.connect(cp)
	sub.subscribeOne("alias/t", 0)

	// Inbound: the publisher sets alias 3, then publishes by alias only.
	pub := dialRaw(t, mqttAddr(b), packet.V5)
	pub.connect(&packet.Connect{ClientID: []byte("alias-pub"), CleanStart: true, KeepAlive: 30})
	p := &packet.Publish{Topic: []byte("alias/t"), Payload: []byte("1")}
	p.Props.TopicAlias = 3
	p.Props.Set(packet.PropTopicAlias)
	pub.send(p)
	p2 := &packet.Publish{Payload: []byte("2")}
	p2.Props.TopicAlias = 3
	p2.Props.Set(packet.PropTopicAlias)
	pub.send(p2)

	first := nextAs[*packet.Publish](sub)
	if string(first.Topic) != "alias/t" || !first.Props.Present(packet.PropTopicAlias) {
		t.Fatalf("first delivery: topic %q alias %v; want the topic and a new alias", first.Topic, first.Props.Present(packet.PropTopicAlias))
	}
	second := nextAs[*packet.Publish](sub)
	if len(second.Topic) != 0 || second.Props.TopicAlias != first.Props.TopicAlias || string(second.Payload) != "2" {
		t.Fatalf("second delivery: topic %q alias %d payload %q; want the alias alone", second.Topic, second.Props.TopicAlias, second.Payload)
	}

	// An alias above our maximum is a protocol fault: DISCONNECT 0x94.
	bad := &packet.Publish{Topic: []byte("alias/t")}
	bad.Props.TopicAlias = config.Default().Gateway.TopicAliasMaximum + 1
	bad.Props.Set(packet.PropTopicAlias)
	pub.send(bad)
	if d := pub.expectClosed(wait); d == nil || d.Code != packet.CodeTopicAliasInvalid {
		t.Fatalf("alias above maximum: disconnect %+v, want 0x94", d)
	}
}

func TestOutboundReceiveMaximum(t *testing.T) {
	b := startBroker(t)
	sub := dialRaw(t, mqttAddr(b), packet.V5)
	cp := &packet.Connect{ClientID: []byte("rm-sub"), CleanStart: true, KeepAlive: 30}
	cp.Props.ReceiveMax = 2
	cp.Props.Set(packet.PropReceiveMax)
	sub.connect(cp)
	sub.subscribeOne("rm", 1)
	pub, _ := dialV5(t, mqttAddr(b), "rm-pub")
	for i := range 5 {
		pub.publish(t, &paho.Publish{Topic: "rm", QoS: 1, Payload: []byte{byte('0' + i)}})
	}
	// Packets alias the reader's buffer: keep what is compared.
	type rec struct {
		id      uint16
		payload string
	}
	var got []rec
	recv := func() {
		p := nextAs[*packet.Publish](sub)
		got = append(got, rec{p.PacketID, string(p.Payload)})
	}
	recv()
	recv()
	if _, err := sub.read(300 * time.Millisecond); err == nil {
		t.Fatal("a third message while two are unacknowledged (receive maximum 2)")
	}
	for len(got) < 5 {
		sub.send(&packet.Ack{Kind: packet.PUBACK, PacketID: got[len(got)-2].id})
		recv()
	}
	for i, p := range got {
		if p.payload != string(rune('0'+i)) {
			t.Fatalf("message %d = %q: order lost", i, p.payload)
		}
	}
}

func TestInboundReceiveMaximumExceeded(t *testing.T) {
	b := startBroker(t, func(c *config.Config) { c.Gateway.ReceiveMaximum = 1 })
	r := dialRaw(t, mqttAddr(b), packet.V5)
	r.connect(&packet.Connect{ClientID: []byte("rmx"), CleanStart: true, KeepAlive: 30})
	var burst []byte
	for i := range 3 {
		burst = (&packet.Publish{QoS: 1, PacketID: uint16(i + 1), Topic: []byte("rmx"), Payload: []byte("x")}).Append(burst, packet.V5)
	}
	r.sendBytes(burst)
	if d := r.expectClosed(wait); d == nil || d.Code != packet.CodeReceiveMaximumExceeded {
		t.Fatalf("disconnect %+v, want 0x93 receive maximum exceeded", d)
	}
}

func TestQueueQuotaExceeded(t *testing.T) {
	b := startBroker(t, func(c *config.Config) { c.Gateway.MaxQueued = 2 })
	sub := dialRaw(t, mqttAddr(b), packet.V5)
	cp := &packet.Connect{ClientID: []byte("quota-sub"), CleanStart: true, KeepAlive: 30}
	cp.Props.ReceiveMax = 1
	cp.Props.Set(packet.PropReceiveMax)
	sub.connect(cp)
	sub.subscribeOne("quota", 1)
	pub, _ := dialV5(t, mqttAddr(b), "quota-pub")
	for i := range 5 { // 1 in flight + 2 queued, then the fourth overflows
		pub.publish(t, &paho.Publish{Topic: "quota", QoS: 1, Payload: []byte{byte('0' + i)}})
	}
	if d := sub.expectClosed(wait); d == nil || d.Code != packet.CodeQuotaExceeded {
		t.Fatalf("disconnect %+v, want 0x97 quota exceeded", d)
	}
}

func TestUnsubscribe(t *testing.T) {
	b := startBroker(t)
	r := dialRaw(t, mqttAddr(b), packet.V5)
	r.connect(&packet.Connect{ClientID: []byte("uns-sub"), CleanStart: true, KeepAlive: 30})
	r.send(&packet.Subscribe{PacketID: 1, Filters: []packet.Subscription{{Filter: []byte("uns/+"), QoS: 1}, {Filter: []byte("uns/a"), QoS: 0}}})
	nextAs[*packet.Suback](r)
	r.send(&packet.Unsubscribe{PacketID: 2, Filters: [][]byte{[]byte("uns/+"), []byte("never/subscribed")}})
	ua := nextAs[*packet.Unsuback](r)
	if ua.PacketID != 2 || !slices.Equal(ua.Codes, []packet.ReasonCode{packet.CodeSuccess, packet.CodeNoSubscriptionExisted}) {
		t.Fatalf("UNSUBACK %+v, want [0x00 0x11]", ua)
	}
	pub, _ := dialV5(t, mqttAddr(b), "uns-pub")
	pub.publish(t, &paho.Publish{Topic: "uns/b", QoS: 1, Payload: []byte("gone")})
	pub.publish(t, &paho.Publish{Topic: "uns/a", QoS: 1, Payload: []byte("still")})
	p := nextAs[*packet.Publish](r)
	if string(p.Topic) != "uns/a" || string(p.Payload) != "still" || p.QoS != 0 {
		t.Fatalf("got %q on %q at QoS %d; uns/b must not arrive after its filter was removed", p.Payload, p.Topic, p.QoS)
	}
	if _, err := r.read(200 * time.Millisecond); err == nil {
		t.Fatal("a message for an unsubscribed filter")
	}
}

func TestRefusedFilters(t *testing.T) {
	b := startBroker(t)
	for _, v := range []packet.Version{packet.V5, packet.V311} {
		t.Run(v.String(), func(t *testing.T) {
			r := dialRaw(t, mqttAddr(b), v)
			r.connect(&packet.Connect{ClientID: []byte("ref-" + v.String()), CleanStart: true, KeepAlive: 30})
			r.send(&packet.Subscribe{PacketID: 9, Filters: []packet.Subscription{
				{Filter: []byte("ok/+"), QoS: 2},
				{Filter: []byte("bad/#/x"), QoS: 1},
				{Filter: []byte("bad+"), QoS: 1},
				{Filter: []byte("$share/g"), QoS: 1},
				{Filter: []byte("$share/g/ok"), QoS: 1},
			}})
			sa := nextAs[*packet.Suback](r)
			bad := packet.CodeTopicFilterInvalid
			if v == packet.V311 {
				bad = 0x80
			}
			want := []packet.ReasonCode{packet.CodeGrantedQoS2, bad, bad, bad, packet.CodeGrantedQoS1}
			if !slices.Equal(sa.Codes, want) {
				t.Fatalf("SUBACK codes %v, want %v", sa.Codes, want)
			}
		})
	}
}

func TestTenantIsolation(t *testing.T) {
	b := startBroker(t)
	other, _ := dialV5(t, mqttAddr(b), "globex-pub")
	other.publish(t, &paho.Publish{Topic: "shared/name", QoS: 1, Retain: true, Payload: []byte("globex retained")})
	spy, _ := dialV5(t, mqttAddr(b), "acme-spy")
	spy.subscribe(t, paho.SubscribeOptions{Topic: "#", QoS: 1})
	mate, _ := dialV5(t, mqttAddr(b), "globex-sub")
	mate.subscribe(t, paho.SubscribeOptions{Topic: "shared/#", QoS: 1})
	if m := mate.expect(t); string(m.Payload) != "globex retained" {
		t.Fatalf("own tenant's retained message: got %q", m.Payload)
	}
	other.publish(t, &paho.Publish{Topic: "shared/name", QoS: 1, Payload: []byte("globex live")})
	if m := mate.expect(t); string(m.Payload) != "globex live" {
		t.Fatalf("own tenant's live message: got %q", m.Payload)
	}
	spy.expectNone(t, 300*time.Millisecond)
	// And the other way round: acme's messages reach only acme.
	spy.publish(t, &paho.Publish{Topic: "shared/name", QoS: 1, Payload: []byte("acme")})
	if m := spy.expect(t); string(m.Payload) != "acme" {
		t.Fatalf("acme's own message: got %q", m.Payload)
	}
	mate.expectNone(t, 300*time.Millisecond)
}

func TestClientLimitsAndConnectProperties(t *testing.T) {
	b := startBroker(t)
	// Every CONNECT property a client may send is accepted.
	sub := dialRaw(t, mqttAddr(b), packet.V5)
	cp := &packet.Connect{ClientID: []byte("lim-sub"), CleanStart: true, KeepAlive: 30}
	p := &cp.Props
	p.MaxPacketSize = 128
	p.ReceiveMax = 10
	p.TopicAliasMax = 0
	p.RequestProblemInfo = 0
	p.RequestResponseInfo = 1
	p.SessionExpiry = 0
	p.User = []packet.UserProperty{{Key: []byte("k"), Value: []byte("v")}}
	for _, id := range []packet.PropID{packet.PropMaxPacketSize, packet.PropReceiveMax, packet.PropTopicAliasMax,
		packet.PropRequestProblemInfo, packet.PropRequestResponseInfo, packet.PropSessionExpiry, packet.PropUser} {
		p.Set(id)
	}
	if ca := sub.connect(cp); ca.Code != 0 {
		t.Fatalf("CONNACK %v", ca.Code)
	}
	sub.subscribeOne("lim/#", 1)
	pub, _ := dialV5(t, mqttAddr(b), "lim-pub")
	pub.publish(t, &paho.Publish{Topic: "lim/big", QoS: 1, Payload: make([]byte, 200)})
	pub.publish(t, &paho.Publish{Topic: "lim/small", QoS: 1, Payload: []byte("fits")})
	// The 200-byte message exceeds the client's maximum packet size of 128
	// bytes: it is dropped, never sent; the next one arrives.
	got := nextAs[*packet.Publish](sub)
	if string(got.Topic) != "lim/small" {
		t.Fatalf("got %q first: a packet above the client's maximum packet size was sent", got.Topic)
	}
	if size := got.Size(packet.V5); size > 128 {
		t.Fatalf("sent a %d-byte packet to a client whose maximum is 128", size)
	}
}
