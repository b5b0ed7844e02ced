package bridge

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
	"github.com/shoal-mqtt/shoal/internal/testutil/testlog"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

const testWait = 20 * time.Second

// backbone is an embedded Kafka with Shoal's topics (4 partitions each).
type backbone struct {
	e *kafka.Embedded
	c *kafka.Client
}

func startBackbone(t *testing.T) *backbone {
	t.Helper()
	e, err := kafka.StartEmbedded(kafka.EmbeddedConfig{Dir: t.TempDir()}, testlog.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	cat := kafka.DefaultCatalogue()
	for _, s := range []*kafka.TopicSpec{&cat.Messages, &cat.Sessions, &cat.Presence, &cat.Deliveries} {
		s.Partitions = 4
	}
	cat.SetMaxMessageBytes(kafka.MaxMessageBytesFor(1 << 20))
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	c, err := kafka.NewClient(ctx, e.ClientConfig(kafka.Config{Catalogue: cat}), testlog.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.EnsureTopics(ctx); err != nil {
		t.Fatal(err)
	}
	return &backbone{e: e, c: c}
}

// publish writes a Publish as a gateway does: to the partition of its
// tenant and topic.
func (bb *backbone) publish(t *testing.T, tenant, client, topic string, payload string, mut ...func(*eventspb.Publish)) {
	t.Helper()
	pub := &eventspb.Publish{Message: &eventspb.Message{Topic: topic, Payload: []byte(payload), Qos: 1}}
	for _, m := range mut {
		m(pub)
	}
	bb.write(t, tenant, client, topic, &eventspb.Envelope_Publish{Publish: pub})
}

func (bb *backbone) write(t *testing.T, tenant, client, topic string, ev any) {
	t.Helper()
	env := &eventspb.Envelope{Tenant: tenant, ClientId: client, TimestampUs: time.Now().UnixMicro(),
		MessageId: &eventspb.MessageID{GatewayEpoch: 7, Seq: uint64(time.Now().UnixNano())}}
	switch ev := ev.(type) {
	case *eventspb.Envelope_Publish:
		env.Event = ev
	case *eventspb.Envelope_PublishRelease:
		env.Event = ev
	}
	r := kafka.NewRecord(kafka.TopicMessages, kafka.AppendKey(nil, tenant, topic), kafka.PartitionByKey, env)
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if err := bb.c.ProduceSync(ctx, r); err != nil {
		t.Fatal(err)
	}
}

// run starts a bridge of the configuration on bb until the returned stop.
func (bb *backbone) run(t *testing.T, cfg Config) (stop func()) {
	t.Helper()
	_, stop = bb.runBridge(t, cfg)
	return stop
}

// runBridge is run that returns the bridge too.
func (bb *backbone) runBridge(t *testing.T, cfg Config, opts ...func(*Options)) (b *Bridge, stop func()) {
	t.Helper()
	m, err := cfg.Compile()
	if err != nil {
		t.Fatal(err)
	}
	o := Options{LagInterval: 50 * time.Millisecond}
	for _, f := range opts {
		f(&o)
	}
	b, err = New(m, bb.c, testlog.New(t), time.Now, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("bridge: %v", err)
		}
	}
	t.Cleanup(stop)
	return b, stop
}

// consumer is a read_committed consumer of topics, a stock franz-go client
// that owes nothing to Shoal.
func (bb *backbone) consumer(t *testing.T, topics ...string) *kgo.Client {
	t.Helper()
	cfg := bb.e.ClientConfig(kafka.Config{})
	cl, err := kgo.NewClient(kgo.Dialer(cfg.Dial), kgo.SeedBrokers(cfg.Brokers...),
		kgo.SASL(scramOf(cfg.SASL)), kgo.ConsumeTopics(topics...), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// next reads until want records came and nothing more for half a second.
func next(t *testing.T, cl *kgo.Client, want int) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	var got []*kgo.Record
	for {
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := cl.PollFetches(pctx)
		pcancel()
		n := len(got)
		fs.EachRecord(func(r *kgo.Record) { got = append(got, r) })
		if ctx.Err() != nil {
			t.Fatalf("%d records, want %d", len(got), want)
		}
		if len(got) == n && len(got) >= want {
			return got
		}
	}
}

func header(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

var telemetry = Config{Out: []OutMapping{
	{Name: "telemetry", Tenant: "acme", MQTTFilter: "plant/+/telemetry", KafkaTopic: "iot.telemetry", Key: "{topic}"},
	{Name: "per-plant", Tenant: "acme", MQTTFilter: "plant/#", KafkaTopic: "plant.{topic[1]}", Key: ""},
}}

// TestOutRecordFormat: a message of the mapping's tenant and filter lands
// in the rendered topic as a plain record: key from the template, the
// payload byte for byte, the publish time, and the headers of the
// contract; another tenant's, and another filter's, do not.
func TestOutRecordFormat(t *testing.T) {
	bb := startBackbone(t)
	bb.run(t, telemetry)
	bb.publish(t, "acme", "acme-dev1", "plant/7/telemetry", "21.5", func(p *eventspb.Publish) {
		m := p.Message
		m.Qos, m.Retain, m.ContentType, m.PayloadUtf8 = 1, true, "text/plain", true
		m.UserProperties = []*eventspb.UserProperty{{Key: "unit", Value: "C"}, {Key: "unit", Value: "K"}}
	})
	bb.publish(t, "other", "other-dev1", "plant/7/telemetry", "not acme's")
	bb.publish(t, "acme", "acme-dev1", "office/7/telemetry", "not the filter's")

	recs := next(t, bb.consumer(t, "iot.telemetry"), 1)
	if len(recs) != 1 {
		t.Fatalf("%d records in iot.telemetry, want 1", len(recs))
	}
	r := recs[0]
	if string(r.Key) != "plant/7/telemetry" || string(r.Value) != "21.5" {
		t.Errorf("record key %q value %q, want plant/7/telemetry and 21.5", r.Key, r.Value)
	}
	if time.Since(r.Timestamp) > time.Minute {
		t.Errorf("record time %v, want the publish time", r.Timestamp)
	}
	for k, want := range map[string]string{
		HeaderTopic: "plant/7/telemetry", HeaderQoS: "1", HeaderRetain: "true", HeaderClientID: "acme-dev1",
		HeaderTenant: "acme", HeaderContentType: "text/plain", HeaderPayloadFormat: "1",
	} {
		if got, ok := header(r, k); !ok || got != want {
			t.Errorf("header %s = %q (present %t), want %q", k, got, ok, want)
		}
	}
	if id, _ := header(r, HeaderMessageID); id == "" {
		t.Error("no shoal.message_id header")
	}
	var units []string
	for _, h := range r.Headers {
		if h.Key == "unit" {
			units = append(units, string(h.Value))
		}
	}
	if !slices.Equal(units, []string{"C", "K"}) {
		t.Errorf("user properties as headers %q, want C and K in order", units)
	}
	// The second mapping renders its topic from a level of the topic.
	if recs := next(t, bb.consumer(t, "plant.7"), 1); len(recs) != 1 || recs[0].Key != nil {
		t.Fatalf("plant.7: %d records (key %q), want 1 without a key", len(recs), recs[0].Key)
	}
}

// TestOutQoS2ResendOnce: a QoS 2 message its client sends again (the same
// packet identifier and session) lands once, also when the bridge
// restarted in between; once released, the identifier takes a new
// message again.
func TestOutQoS2ResendOnce(t *testing.T) {
	bb := startBackbone(t)
	stop := bb.run(t, telemetry)
	qos2 := func(id uint32, gen uint64) func(*eventspb.Publish) {
		return func(p *eventspb.Publish) { p.Message.Qos, p.PacketId, p.SessionGeneration = 2, id, gen }
	}
	const topic = "plant/1/telemetry"
	bb.publish(t, "acme", "acme-d", topic, "first", qos2(5, 2))
	cl := bb.consumer(t, "iot.telemetry")
	next(t, cl, 1)
	stop()
	bb.run(t, telemetry)                                                     // the state comes back from the log
	bb.publish(t, "acme", "acme-d", topic, "first", qos2(5, 2))              // the resend
	bb.publish(t, "acme", "acme-d", topic, "of a later session", qos2(5, 3)) // another session's message
	bb.write(t, "acme", "acme-d", topic, &eventspb.Envelope_PublishRelease{PublishRelease: &eventspb.PublishRelease{PacketId: 5, SessionGeneration: 3}})
	bb.publish(t, "acme", "acme-d", topic, "after the release", qos2(5, 3))
	recs := next(t, cl, 2)
	var got []string
	for _, r := range recs {
		got = append(got, string(r.Value))
	}
	if want := []string{"of a later session", "after the release"}; !slices.Equal(got, want) {
		t.Fatalf("records after the restart %q, want %q (the resend of %q must not land again)", got, want, "first")
	}
}

// scramOf is the embedded backbone's SASL mechanism for a franz-go client.
func scramOf(s *kafka.SASL) sasl.Mechanism {
	return scram.Auth{User: s.User, Pass: s.Password}.AsSha512Mechanism()
}

// TestOutLag: the out mappings' lag is what the out group has yet to read
// of shoal.messages: 0 once the bridge caught up.
func TestOutLag(t *testing.T) {
	bb := startBackbone(t)
	for i := range 5 {
		bb.publish(t, "acme", "acme-d", "plant/1/telemetry", strconv.Itoa(i))
	}
	b, _ := bb.runBridge(t, telemetry)
	next(t, bb.consumer(t, "iot.telemetry"), 5)
	eventually.OK(t, testWait, func() string {
		st := b.Status()
		caughtUp := len(st) == 2
		for _, m := range st {
			caughtUp = caughtUp && m.Direction == "out" && m.LagKnown && m.Lag == 0 && m.Running
		}
		if caughtUp {
			return ""
		}
		return fmt.Sprintf("status %+v after the bridge caught up, want both out mappings running with lag 0", st)
	})
}
