package main

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/eclipse/paho.golang/paho"
)

// consoleSpan is what the console exporter prints of a span (JSON).
type consoleSpan struct {
	Name        string
	SpanContext struct{ TraceID, SpanID string }
	Parent      struct{ TraceID, SpanID string }
}

// TestConsoleTraces: OTEL_TRACES_EXPORTER=console shoal all, one publish
// with a subscriber, prints the message's spans on standard output, linked
// parent to child from the PUBLISH to the delivery, through the
// subscriber's inbox.
func TestConsoleTraces(t *testing.T) {
	if testing.Short() {
		t.Skip("starts shoal as a process")
	}
	p := startShoal(t, t.TempDir(), "OTEL_TRACES_EXPORTER=console", "OTEL_SERVICE_NAME=shoal-console-test")
	sub, _ := connect(t, p.mqtt, "acme-sub", true)
	sub.subscribe(t, "plant/#")
	pub, _ := connect(t, p.mqtt, "acme-pub", true)
	pub.publish(t, "plant/1/temp", "20", 1, false)
	sub.expect(t, "plant/1/temp", "20")
	_ = sub.Disconnect(&paho.Disconnect{})
	_ = pub.Disconnect(&paho.Disconnect{})
	p.stop() // the batching processor exports at shutdown

	f, err := os.Open(p.out)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	byID := map[string]consoleSpan{}
	var deliver *consoleSpan
	for dec := json.NewDecoder(f); ; {
		var s consoleSpan
		if err := dec.Decode(&s); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("standard output is not JSON spans: %v", err)
		}
		byID[s.SpanContext.SpanID] = s
		if s.Name == "mqtt.deliver" {
			deliver = &s
		}
	}
	if deliver == nil {
		t.Fatalf("no mqtt.deliver span among %d spans printed", len(byID))
	}
	// Walk from the delivery up to the publish. The subscriber has a
	// persistent session (connect's expiry), so its QoS 1 message went
	// through its inbox: the session service's span is in the path.
	want := []string{"mqtt.deliver", "shoal.deliveries receive", "shoal.deliveries publish",
		"session.inbox_append", "shoal.sessions receive", "shoal.sessions publish", "router.route",
		"shoal.messages receive", "shoal.messages publish", "mqtt.publish"}
	s := *deliver
	for i, name := range want {
		if s.Name != name {
			t.Fatalf("span %d up from the delivery is %q, want %q", i, s.Name, name)
		}
		if s.SpanContext.TraceID != deliver.SpanContext.TraceID {
			t.Fatalf("%s is in trace %s, the delivery in %s", name, s.SpanContext.TraceID, deliver.SpanContext.TraceID)
		}
		if i == len(want)-1 {
			break
		}
		parent, ok := byID[s.Parent.SpanID]
		if !ok {
			t.Fatalf("the parent %s of %s was not printed", s.Parent.SpanID, name)
		}
		s = parent
	}
}
