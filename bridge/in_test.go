package bridge

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shoal-mqtt/shoal/internal/testutil/testlog"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// producer is a stock franz-go producer of the backbone.
func (bb *backbone) producer(t *testing.T) *kgo.Client {
	t.Helper()
	cfg := bb.e.ClientConfig(kafka.Config{})
	cl, err := kgo.NewClient(kgo.Dialer(cfg.Dial), kgo.SeedBrokers(cfg.Brokers...), kgo.SASL(scramOf(cfg.SASL)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// publishes reads shoal.messages (read_committed) until want Publishes came
// and nothing more for half a second.
func (bb *backbone) publishes(t *testing.T, want int) []*eventspb.Envelope {
	t.Helper()
	var out []*eventspb.Envelope
	for _, r := range next(t, bb.consumer(t, kafka.TopicMessages), want) {
		env := new(eventspb.Envelope)
		if err := env.UnmarshalVT(r.Value); err != nil {
			t.Fatal(err)
		}
		if env.GetPublish() != nil {
			out = append(out, env)
		}
	}
	return out
}

type denyTopic string

func (d denyTopic) AllowPublish(_ string, topic []byte) bool { return string(topic) != string(d) }

// TestInPublishes: each record of an in mapping's Kafka topic becomes a
// Publish of the mapping's tenant, as client $bridge/<name>, on the topic
// its template renders, at the mapping's QoS, its headers the message's
// properties (mqtt.retain makes it retained); a record whose topic renders
// invalid, or that the ACL denies, goes to the dead-letter topic with its
// cause, and the partition goes on.
func TestInPublishes(t *testing.T) {
	bb := startBackbone(t)
	m, err := Config{In: []InMapping{{Name: "commands", Tenant: "acme", KafkaTopic: "iot.commands",
		MQTTTopic: "plant/{key}/command", QoS: 1, DeadLetterTopic: "iot.commands.dead"}}}.Compile()
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(m, bb.c, testlog.New(t), time.Now, Options{Authorizer: denyTopic("plant/9/command")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	p := bb.producer(t)
	pctx, pcancel := context.WithTimeout(context.Background(), testWait)
	defer pcancel()
	for _, r := range []*kgo.Record{
		{Topic: "iot.commands", Key: []byte("7"), Value: []byte("open"), Headers: []kgo.RecordHeader{
			{Key: HeaderRetain, Value: []byte("true")}, {Key: HeaderContentType, Value: []byte("text/plain")}, {Key: "operator", Value: []byte("ann")}}},
		{Topic: "iot.commands", Key: []byte("+"), Value: []byte("a wildcard is no topic")},
		{Topic: "iot.commands", Key: []byte("9"), Value: []byte("denied")},
		{Topic: "iot.commands", Key: []byte("8"), Value: []byte("close")},
	} {
		if err := p.ProduceSync(pctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	pubs := bb.publishes(t, 2)
	if len(pubs) != 2 {
		t.Fatalf("%d publishes in shoal.messages, want 2", len(pubs))
	}
	first := pubs[0]
	if pubs[0].GetPublish().GetMessage().GetTopic() != "plant/7/command" {
		first = pubs[1]
	}
	msg := first.GetPublish().GetMessage()
	if first.Tenant != "acme" || first.ClientId != "$bridge/commands" || msg.Topic != "plant/7/command" ||
		string(msg.Payload) != "open" || msg.Qos != 1 || !msg.Retain || msg.ContentType != "text/plain" ||
		len(msg.UserProperties) != 1 || msg.UserProperties[0].Key != "operator" || first.MessageId == nil {
		t.Fatalf("publish %v, want acme's $bridge/commands on plant/7/command, QoS 1, retained, text/plain, operator=ann", first)
	}
	dead := next(t, bb.consumer(t, "iot.commands.dead"), 2)
	if len(dead) != 2 {
		t.Fatalf("%d records in the dead-letter topic, want 2", len(dead))
	}
	causes := map[string]string{}
	for _, r := range dead {
		causes[string(r.Key)], _ = header(r, HeaderDeadLetterCause)
	}
	if causes["+"] != causeBadTopic || causes["9"] != causeDenied {
		t.Errorf("dead letters by key and cause %v, want + %s and 9 %s", causes, causeBadTopic, causeDenied)
	}
}
