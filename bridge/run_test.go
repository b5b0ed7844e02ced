package bridge

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/shoal-mqtt/shoal/internal/obs"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
	"github.com/shoal-mqtt/shoal/internal/testutil/testmetrics"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// waitStatus polls the bridge's status until ok holds, to testWait.
func waitStatus(t *testing.T, b *Bridge, what string, ok func([]MappingStatus) bool) {
	t.Helper()
	eventually.OK(t, testWait, func() string {
		st, ready := b.Status(), b.Ready()
		if ok(st) && ready {
			return ""
		}
		return fmt.Sprintf("bridge status %+v (ready %t), want %s", st, ready, what)
	})
}

// TestReload: a reload changes the out mappings at the next poll, starts
// an in mapping that is new, and stops one that is gone; started again,
// it goes on from its committed offsets, each record published once.
func TestReload(t *testing.T) {
	bb := startBackbone(t)
	b, _ := bb.runBridge(t, telemetry)
	waitStatus(t, b, "two out mappings running", func(st []MappingStatus) bool { return len(st) == 2 && st[0].Running })
	bb.publish(t, "acme", "acme-d", "plant/1/telemetry", "before")
	next(t, bb.consumer(t, "iot.telemetry"), 1)

	commands := InMapping{Name: "commands", Tenant: "acme", KafkaTopic: "iot.commands", MQTTTopic: "plant/{key}/command", QoS: 1}
	reload := func(c Config) {
		t.Helper()
		m, err := c.Compile()
		if err != nil {
			t.Fatal(err)
		}
		b.Reload(m)
	}
	reload(Config{
		Out: []OutMapping{{Name: "telemetry", Tenant: "acme", MQTTFilter: "plant/+/telemetry", KafkaTopic: "iot.telemetry.v2", Key: "{topic}"}},
		In:  []InMapping{commands},
	})
	waitStatus(t, b, "one out and one in mapping running", func(st []MappingStatus) bool {
		return len(st) == 2 && st[0].To == "iot.telemetry.v2" && st[1].Direction == "in" && st[1].Running
	})
	bb.publish(t, "acme", "acme-d", "plant/1/telemetry", "after")
	if recs := next(t, bb.consumer(t, "iot.telemetry.v2"), 1); len(recs) != 1 || string(recs[0].Value) != "after" {
		t.Fatalf("iot.telemetry.v2 holds %d records, want the one published after the reload", len(recs))
	}
	p := bb.producer(t)
	produce := func(key string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), testWait)
		defer cancel()
		if err := p.ProduceSync(ctx, &kgo.Record{Topic: "iot.commands", Key: []byte(key), Value: []byte("go")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce("1")
	bb.publishes(t, 3) // the two above, and the in mapping's first

	reload(telemetry) // the in mapping goes
	waitStatus(t, b, "the in mapping gone", func(st []MappingStatus) bool { return len(st) == 2 && st[1].Direction == "out" })
	produce("2") // while no mapping reads it
	reload(Config{Out: telemetry.Out, In: []InMapping{commands}})
	waitStatus(t, b, "the in mapping back", func(st []MappingStatus) bool { return len(st) == 3 && st[2].Running })

	var topics []string
	for _, env := range bb.publishes(t, 4) {
		if env.ClientId == InClientPrefix+"commands" {
			topics = append(topics, env.GetPublish().GetMessage().GetTopic())
		}
	}
	if len(topics) != 2 || topics[0] != "plant/1/command" || topics[1] != "plant/2/command" {
		t.Fatalf("the in mapping published on %q, want plant/1/command then plant/2/command, once each", topics)
	}
}

// TestHopSpans: with tracing on, a message whose trace is sampled gets a
// bridge.out span, child of its record's traceparent, and the bridged
// record's traceparent is the span's; a record of an in mapping's topic
// gets a bridge.in span, whose traceparent the Publish carries.
func TestHopSpans(t *testing.T) {
	bb := startBackbone(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	cfg := Config{Out: telemetry.Out[:1], In: []InMapping{{Name: "commands", Tenant: "acme", KafkaTopic: "iot.commands", MQTTTopic: "plant/{key}/command"}}}
	bb.runBridge(t, cfg, func(o *Options) { o.Telemetry = obs.Providers{Tracer: tp, Tracing: true} })

	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	env := &eventspb.Envelope{Tenant: "acme", ClientId: "acme-d", TimestampUs: time.Now().UnixMicro(),
		MessageId: &eventspb.MessageID{GatewayEpoch: 7, Seq: 1},
		Event:     &eventspb.Envelope_Publish{Publish: &eventspb.Publish{Message: &eventspb.Message{Topic: "plant/1/telemetry", Payload: []byte("x")}}}}
	r := kafka.NewRecord(kafka.TopicMessages, kafka.AppendKey(nil, "acme", "plant/1/telemetry"), kafka.PartitionByKey, env)
	kafka.WithTraceparent(r, parent)
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if err := bb.c.ProduceSync(ctx, r); err != nil {
		t.Fatal(err)
	}
	out := next(t, bb.consumer(t, "iot.telemetry"), 1)
	got, _ := header(out[0], HeaderTraceparent)

	if err := bb.producer(t).ProduceSync(ctx, &kgo.Record{Topic: "iot.commands", Key: []byte("3"), Value: []byte("go"),
		Headers: []kgo.RecordHeader{{Key: HeaderTraceparent, Value: []byte(parent)}}}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var in *kafka.Record
	for _, r := range next(t, bb.consumer(t, kafka.TopicMessages), 2) {
		if string(r.Key) != string(kafka.AppendKey(nil, "acme", "plant/1/telemetry")) {
			in = &kafka.Record{Headers: []kafka.Header{}}
			for _, h := range r.Headers {
				in.Headers = append(in.Headers, kafka.Header{Key: h.Key, Value: h.Value})
			}
		}
	}
	if in == nil {
		t.Fatal("no publish of the in mapping in shoal.messages")
	}

	spans := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		spans[s.Name()] = s
	}
	for name, tpHeader := range map[string]string{spanOut: got, spanIn: kafka.Traceparent(in)} {
		s, ok := spans[name]
		if !ok {
			t.Errorf("no %s span among %d", name, len(rec.Ended()))
			continue
		}
		if s.Parent().SpanID().String() != "00f067aa0ba902b7" || s.SpanContext().TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("%s span of trace %s, parent %s; want the record's", name, s.SpanContext().TraceID(), s.Parent().SpanID())
		}
		if want := string(obs.AppendTraceparent(nil, s.SpanContext())); tpHeader != want {
			t.Errorf("%s: the record written carries traceparent %q, want the span's %q", name, tpHeader, want)
		}
	}
}

// TestAcrossClusters: with the mappings' topics on a cluster of their own
// (bridges.kafka.brokers), a message of Shoal's cluster lands once in the
// other's topic, also when its client sends it again after the bridge
// restarted (the state and the offsets are kept on that cluster); a record
// of the other cluster becomes a Publish on Shoal's, and one the mapping
// cannot publish goes to its dead-letter topic there.
func TestAcrossClusters(t *testing.T) {
	shoal, users := startBackbone(t), startBackbone(t)
	cfg := Config{Out: telemetry.Out[:1], In: []InMapping{{Name: "commands", Tenant: "acme", KafkaTopic: "iot.commands",
		MQTTTopic: "plant/{key}/command", QoS: 1, DeadLetterTopic: "iot.commands.dead"}}}
	across := func(o *Options) { o.Target = users.c }
	_, stop := shoal.runBridge(t, cfg, across)
	qos2 := func(p *eventspb.Publish) { p.Message.Qos, p.PacketId, p.SessionGeneration = 2, 9, 4 }
	shoal.publish(t, "acme", "acme-d", "plant/1/telemetry", "first", qos2)
	shoal.publish(t, "acme", "acme-d", "plant/1/telemetry", "second")
	out := users.consumer(t, "iot.telemetry")
	if recs := next(t, out, 2); len(recs) != 2 {
		t.Fatalf("%d records on the other cluster, want 2", len(recs))
	}
	stop()
	shoal.runBridge(t, cfg, across)
	shoal.publish(t, "acme", "acme-d", "plant/1/telemetry", "first", qos2) // the resend
	shoal.publish(t, "acme", "acme-d", "plant/1/telemetry", "third")
	var got []string
	for _, r := range next(t, out, 1) {
		got = append(got, string(r.Value))
	}
	if len(got) != 1 || got[0] != "third" {
		t.Fatalf("after the restart the other cluster got %q, want only third: the resend and the poll before are not bridged again", got)
	}

	p := users.producer(t)
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	for _, key := range []string{"5", "+"} {
		if err := p.ProduceSync(ctx, &kgo.Record{Topic: "iot.commands", Key: []byte(key), Value: []byte("go")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var in []string
	for _, env := range shoal.publishes(t, 5) {
		if env.ClientId == InClientPrefix+"commands" {
			in = append(in, env.GetPublish().GetMessage().GetTopic())
		}
	}
	if len(in) != 1 || in[0] != "plant/5/command" {
		t.Fatalf("publishes of the in mapping on Shoal's cluster %q, want plant/5/command once", in)
	}
	if dead := next(t, users.consumer(t, "iot.commands.dead"), 1); len(dead) != 1 || string(dead[0].Key) != "+" {
		t.Fatalf("dead letters on the other cluster: %d, want the record of key +", len(dead))
	}
}

// TestRecordCounters: shoal.bridge.records and shoal.bridge.bytes count
// each record written, per mapping and direction, though they are added
// to once per poll.
func TestRecordCounters(t *testing.T) {
	bb := startBackbone(t)
	p, r := testmetrics.New(t, 10)
	cfg := Config{Out: telemetry.Out, In: []InMapping{{Name: "commands", Tenant: "acme", KafkaTopic: "iot.commands", MQTTTopic: "plant/{key}/command"}}}
	bb.runBridge(t, cfg, func(o *Options) { o.Telemetry = p })
	for range 3 {
		bb.publish(t, "acme", "acme-d", "plant/1/telemetry", "1234")
	}
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if err := bb.producer(t).ProduceSync(ctx, &kgo.Record{Topic: "iot.commands", Key: []byte("1"), Value: []byte("ab")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	want := map[[2]string][2]float64{
		// per-plant (plant/#) takes the in mapping's plant/1/command too.
		{"telemetry", "out"}: {3, 12}, {"per-plant", "out"}: {4, 14}, {"commands", "in"}: {1, 2},
	}
	eventually.OK(t, testWait, func() string {
		for k, w := range want {
			got := [2]float64{r.Value("shoal.bridge.records", "mapping", k[0], "direction", k[1]), r.Value("shoal.bridge.bytes", "mapping", k[0], "direction", k[1])}
			if got != w {
				return fmt.Sprintf("%s %s: records and bytes %v, want %v", k[1], k[0], got, w)
			}
		}
		return ""
	})
}
