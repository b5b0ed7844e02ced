package broker_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/eclipse/paho.golang/paho"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/shoal-mqtt/shoal/compose/broker/brokertest"
	"github.com/shoal-mqtt/shoal/compose/telemetry"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
)

// tracedBroker runs `shoal all` recording every span into the SDK's
// in-memory exporter.
func tracedBroker(t *testing.T) (addr string, exp *tracetest.InMemoryExporter) {
	t.Helper()
	exp = tracetest.NewInMemoryExporter()
	tel, err := telemetry.New(context.Background(), telemetry.DefaultConfig(), telemetry.Options{
		Role: "all", Version: "test", SpanProcessor: sdktrace.NewSimpleSpanProcessor(exp),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	b, _ := brokertest.RunTelemetry(t, tel)
	return mqttAddr(b), exp
}

// traceOf polls exp until the trace of id has a span of each name, and
// returns the trace's spans.
func traceOf(t *testing.T, exp *tracetest.InMemoryExporter, id trace.TraceID, names ...string) map[string][]tracetest.SpanStub {
	t.Helper()
	var byName map[string][]tracetest.SpanStub
	eventually.OK(t, wait, func() string {
		byName = map[string][]tracetest.SpanStub{}
		for _, s := range exp.GetSpans() {
			if s.SpanContext.TraceID() == id {
				byName[s.Name] = append(byName[s.Name], s)
			}
		}
		missing := []string{}
		for _, n := range names {
			if len(byName[n]) == 0 {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 {
			return ""
		}
		var have []string
		for n := range byName {
			have = append(have, n)
		}
		return fmt.Sprintf("trace %s lacks %v; has %v", id, missing, have)
	})
	return byName
}

// TestOneMessageOneTrace: a QoS 1 message published with the client's own
// traceparent yields one trace, the client's, whose spans chain from the
// gateway through the log, the router, the log again and back to the
// subscriber's gateway: mqtt.publish → shoal.messages publish → receive →
// router.route → shoal.deliveries publish → receive → mqtt.deliver, each
// the child of the one before, and mqtt.deliver lasting until the
// subscriber's PUBACK.
func TestOneMessageOneTrace(t *testing.T) {
	addr, exp := tracedBroker(t)
	sub, _ := dialV5(t, addr, "acme-sub")
	sub.subscribe(t, pahoSub("plant/+/temp", 1))
	pub, _ := dialV5(t, addr, "acme-pub")

	const clientTP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	pub.publish(t, &paho.Publish{Topic: "plant/7/temp", QoS: 1, Payload: []byte("21.5"),
		Properties: &paho.PublishProperties{User: paho.UserProperties{{Key: "traceparent", Value: clientTP}}}})
	if m := sub.expect(t); string(m.Payload) != "21.5" {
		t.Fatalf("received %q", m.Payload)
	}
	chain := []string{"mqtt.publish", "shoal.messages publish", "shoal.messages receive", "router.route",
		"shoal.deliveries publish", "shoal.deliveries receive", "mqtt.deliver"}
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	spans := traceOf(t, exp, tid, chain...)
	parent, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	for _, name := range chain {
		if len(spans[name]) != 1 {
			t.Fatalf("%d %s spans, want 1", len(spans[name]), name)
		}
		s := spans[name][0]
		if s.Parent.SpanID() != parent {
			t.Errorf("%s: parent %s, want %s (the span before it)", name, s.Parent.SpanID(), parent)
		}
		parent = s.SpanContext.SpanID()
	}
	attrs := func(s tracetest.SpanStub) map[string]string {
		m := map[string]string{}
		for _, kv := range s.Attributes {
			m[string(kv.Key)] = kv.Value.String()
		}
		return m
	}
	for name, want := range map[string]map[string]string{
		"mqtt.publish": {"messaging.system": "mqtt", "messaging.destination.name": "plant/7/temp",
			"messaging.client.id": "acme-pub", "shoal.tenant": "acme", "mqtt.qos": "1"},
		"router.route": {"shoal.router.matches": "1", "mqtt.topic": "plant/7/temp", "shoal.tenant": "acme"},
		"mqtt.deliver": {"messaging.client.id": "acme-sub", "messaging.destination.name": "plant/7/temp", "mqtt.qos": "1"},
	} {
		got := attrs(spans[name][0])
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s = %q, want %q", name, k, got[k], v)
			}
		}
	}
	pubSpan, routeSpan := spans["mqtt.publish"][0], spans["router.route"][0]
	if id := attrs(pubSpan)["messaging.message.id"]; id == "" || attrs(routeSpan)["messaging.message.id"] != id ||
		attrs(spans["mqtt.deliver"][0])["messaging.message.id"] != id {
		t.Errorf("message ids differ: publish %q, route %q, deliver %q", id,
			attrs(routeSpan)["messaging.message.id"], attrs(spans["mqtt.deliver"][0])["messaging.message.id"])
	}
	if pubSpan.SpanKind != trace.SpanKindServer || spans["mqtt.deliver"][0].SpanKind != trace.SpanKindProducer {
		t.Errorf("kinds: publish %v, deliver %v", pubSpan.SpanKind, spans["mqtt.deliver"][0].SpanKind)
	}

	// Without a traceparent of its own, a message starts a trace.
	pub.publish(t, &paho.Publish{Topic: "plant/8/temp", QoS: 0, Payload: []byte("19")})
	sub.expect(t)
	var fresh trace.TraceID
	eventually.True(t, wait, "an mqtt.publish span for the message without traceparent", func() bool {
		for _, s := range exp.GetSpans() {
			if s.Name == "mqtt.publish" && s.SpanContext.TraceID() != tid {
				fresh = s.SpanContext.TraceID()
				if s.Parent.IsValid() {
					t.Errorf("a publish without traceparent has parent %v", s.Parent)
				}
			}
		}
		return fresh.IsValid()
	})
	traceOf(t, exp, fresh, chain...)
	for _, s := range exp.GetSpans() {
		if strings.HasPrefix(s.Name, "session.") && s.SpanContext.TraceID() == tid {
			t.Errorf("session span %s in the message's trace", s.Name)
		}
	}
}

// TestSessionSpans: the session service records a span per sampled event:
// a connect, a takeover (marked), and a will published when a connection
// is lost (marked).
func TestSessionSpans(t *testing.T) {
	addr, exp := tracedBroker(t)
	dialV5(t, addr, "acme-twice")
	dialV5(t, addr, "acme-twice") // takes the session over
	will := dialRaw(t, addr, packet.V5)
	will.connect(&packet.Connect{ClientID: []byte("acme-will"), CleanStart: true, KeepAlive: 30,
		WillFlag: true, WillTopic: []byte("acme/gone"), WillPayload: []byte("bye")})
	_ = will.nc.Close() // lost without DISCONNECT: the will goes out

	eventually.OK(t, wait, func() string {
		var connects, takeovers, wills int
		for _, s := range exp.GetSpans() {
			a := map[string]string{}
			for _, kv := range s.Attributes {
				a[string(kv.Key)] = kv.Value.String()
			}
			switch {
			case s.Name == "session.connect" && a["messaging.client.id"] == "acme-twice":
				connects++
				if a["shoal.session.takeover"] == "true" {
					takeovers++
				}
			case strings.HasPrefix(s.Name, "session.") && a["messaging.client.id"] == "acme-will" && a["shoal.session.will"] == "true":
				wills++
			}
		}
		if connects == 2 && takeovers == 1 && wills == 1 {
			return ""
		}
		return fmt.Sprintf("%d session.connect spans of acme-twice (want 2), %d takeovers (want 1), %d wills (want 1)",
			connects, takeovers, wills)
	})
}
