package broker_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	dto "github.com/prometheus/client_model/go"

	"github.com/shoal-mqtt/shoal/compose/broker"
	"github.com/shoal-mqtt/shoal/compose/config"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
)

// The metrics end to end: `shoal all` driven by MQTT clients,
// /metrics read as a Prometheus server reads it (scrape).

// series returns the samples of family name whose labels include kv
// (name, value pairs).
func series(fams map[string]*dto.MetricFamily, name string, kv ...string) []*dto.Metric {
	var ms []*dto.Metric
	for _, m := range fams[name].GetMetric() {
		if hasLabels(m, kv) {
			ms = append(ms, m)
		}
	}
	return ms
}

func hasLabels(m *dto.Metric, kv []string) bool {
	for i := 0; i+1 < len(kv); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == kv[i] && l.GetValue() == kv[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// value returns the value of the one counter or gauge sample of name
// with labels kv, failing the test unless there is exactly one.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, kv ...string) float64 {
	t.Helper()
	ms := series(fams, name, kv...)
	if len(ms) != 1 {
		t.Fatalf("%s%v: %d samples, want 1: %v", name, kv, len(ms), fams[name].GetMetric())
	}
	if c := ms[0].GetCounter(); c != nil {
		return c.GetValue()
	}
	return ms[0].GetGauge().GetValue()
}

// gaugeSum returns the sum of the gauge samples of name with labels kv.
func gaugeSum(fams map[string]*dto.MetricFamily, name string, kv ...string) float64 {
	var sum float64
	for _, m := range series(fams, name, kv...) {
		sum += m.GetGauge().GetValue()
	}
	return sum
}

// histogram returns the sample count and sum of the histogram name with
// labels kv (all its series summed).
func histogram(fams map[string]*dto.MetricFamily, name string, kv ...string) (uint64, float64) {
	var n uint64
	var sum float64
	for _, m := range series(fams, name, kv...) {
		n += m.GetHistogram().GetSampleCount()
		sum += m.GetHistogram().GetSampleSum()
	}
	return n, sum
}

// waitScrape scrapes until ok holds on what it read, failing after wait.
func waitScrape(t *testing.T, b *broker.Broker, what string, ok func(map[string]*dto.MetricFamily) bool) map[string]*dto.MetricFamily {
	t.Helper()
	var fams map[string]*dto.MetricFamily
	eventually.True(t, wait, "/metrics: "+what, func() bool {
		fams = scrape(t, b)
		return ok(fams)
	})
	return fams
}

// withPasswords sets the password file (a copy of the one made by
// mosquitto_passwd) and lets clients without credentials in.
func withPasswords(t *testing.T) func(*config.Config) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "gateway", "auth", "testdata", "mosquitto.passwd"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(path, src, 0o600); err != nil {
		t.Fatal(err)
	}
	return func(c *config.Config) { c.Auth.PasswordFile, c.Auth.AllowAnonymous = path, true }
}

// TestMetricsEndToEnd: a refused CONNECT, a QoS 1 publish to a
// subscriber and a retained message show in every new metric, with the
// values the traffic implies.
func TestMetricsEndToEnd(t *testing.T) {
	b := startBroker(t, withPasswords(t))
	r := dialRaw(t, mqttAddr(b), packet.V5)
	if ca := r.connect(&packet.Connect{ClientID: []byte("acme-x"), CleanStart: true, UsernameFlag: true,
		Username: []byte("acme-alice"), PasswordFlag: true, Password: []byte("wrong horse")}); ca.Code != packet.CodeBadUserNameOrPassword {
		t.Fatalf("CONNACK %v, want bad user name or password", ca.Code)
	}
	sub, _ := dialV5(t, mqttAddr(b), "acme-sub")
	sub.subscribe(t, pahoSub("m/#", 1))
	pub, _ := dialV5(t, mqttAddr(b), "acme-pub")
	pub.publish(t, &paho.Publish{Topic: "m/1", QoS: 1, Payload: []byte("hello")})
	if m := sub.expect(t); string(m.Payload) != "hello" {
		t.Fatalf("received %q", m.Payload)
	}
	pub.publish(t, &paho.Publish{Topic: "kept/1", QoS: 1, Retain: true, Payload: []byte("kept")})

	fams := waitScrape(t, b, "the retained message counted", func(fams map[string]*dto.MetricFamily) bool {
		return len(series(fams, "shoal_router_retained", "tenant", "acme")) == 1
	})
	// One QoS 1 publish measured per PUBLISH (two), one delivery.
	if n, sum := histogram(fams, "shoal_gateway_puback_duration_seconds"); n != 2 || sum <= 0 || sum > 2*wait.Seconds() {
		t.Errorf("PUBACK duration: %d samples summing to %vs, want 2", n, sum)
	}
	if n, sum := histogram(fams, "shoal_delivery_latency_seconds"); n != 1 || sum <= 0 || sum > wait.Seconds() {
		t.Errorf("delivery latency: %d samples summing to %vs, want 1", n, sum)
	}
	for _, topic := range []string{"shoal.messages", "shoal.deliveries", "shoal.sessions"} {
		if n, _ := histogram(fams, "shoal_kafka_produce_duration_seconds", "topic", topic); n == 0 {
			t.Errorf("no produce to %s timed", topic)
		}
		if v := value(t, fams, "shoal_kafka_produce_errors_total", "topic", topic); v != 0 {
			t.Errorf("%v produce errors on %s", v, topic)
		}
	}
	// Two publishes routed: the first matched the subscription and made
	// one delivery record, the retained one matched nothing.
	if n, sum := histogram(fams, "shoal_router_matches"); n != 2 || sum != 1 {
		t.Errorf("router matches: %d samples summing to %v, want 2 summing to 1", n, sum)
	}
	if n, sum := histogram(fams, "shoal_router_fanout"); n != 2 || sum != 1 {
		t.Errorf("router fan-out: %d samples summing to %v, want 2 summing to 1", n, sum)
	}
	if v := value(t, fams, "shoal_router_retained", "tenant", "acme"); v != 1 {
		t.Errorf("retained of acme = %v, want 1", v)
	}
	for _, want := range []struct {
		kv []string
		v  float64
	}{
		{[]string{"result", "refused", "reason", "bad_username_or_password"}, 1},
		{[]string{"result", "accepted", "reason", "success", "tenant", "acme"}, 2},
	} {
		if v := value(t, fams, "shoal_gateway_connects_total", want.kv...); v != want.v {
			t.Errorf("connects %v = %v, want %v", want.kv, v, want.v)
		}
	}
	for _, m := range series(fams, "shoal_gateway_connects_total", "reason", "bad_username_or_password") {
		if hasLabels(m, []string{"tenant", "acme"}) {
			t.Error("a refused, unauthenticated client's claimed tenant was labelled")
		}
	}
	if v := value(t, fams, "shoal_gateway_tenant_messages_received_total", "tenant", "acme"); v != 2 {
		t.Errorf("messages received from acme = %v, want 2", v)
	}
	if v := value(t, fams, "shoal_gateway_tenant_messages_sent_total", "tenant", "acme"); v != 1 {
		t.Errorf("messages sent to acme = %v, want 1", v)
	}
	for _, cause := range []string{"buffer_full", "queue_full", "packet_too_large", "acl", "expired", "inbox_full"} {
		if v := value(t, fams, "shoal_messages_dropped_total", "cause", cause); v != 0 {
			t.Errorf("%v messages dropped for %s", v, cause)
		}
	}
	// Every consumer reports its partitions' lag once it fetched records
	// of them: the router's of shoal.messages, the session service's of
	// shoal.sessions, the gateway's slot of shoal.deliveries; all caught
	// up once the traffic stops.
	fams = waitScrape(t, b, "every consumer caught up", func(fams map[string]*dto.MetricFamily) bool {
		for _, m := range series(fams, "shoal_kafka_consumer_lag") {
			if m.GetGauge().GetValue() != 0 {
				return false
			}
		}
		return true
	})
	for _, topic := range []string{"shoal.messages", "shoal.sessions", "shoal.deliveries"} {
		ms := series(fams, "shoal_kafka_consumer_lag", "topic", topic)
		if len(ms) == 0 {
			t.Errorf("no lag series of %s", topic)
		}
		for _, m := range ms {
			for _, l := range m.GetLabel() {
				if l.GetName() != "partition" {
					continue
				}
				if p, err := strconv.Atoi(l.GetValue()); err != nil || p < 0 || p >= 4 {
					t.Errorf("lag series of %s with partition %q", topic, l.GetValue())
				}
			}
		}
	}
}

// TestSessionMetricsEndToEnd: a persistent session counts online while
// its client is connected and offline once it left, and the QoS 1
// messages queued for it meanwhile are its inbox's depth until it
// resumes. Their delivery then is not a publish → delivery latency (they
// waited for the client), but that of a message published once it is
// back, forwarded through its inbox, is.
func TestSessionMetricsEndToEnd(t *testing.T) {
	b := startBroker(t)
	sessions := func(fams map[string]*dto.MetricFamily, state string) float64 {
		return value(t, fams, "shoal_session_sessions", "state", state)
	}
	persistent := func(cp *paho.Connect) {
		cp.CleanStart = false
		cp.Properties = &paho.ConnectProperties{SessionExpiryInterval: u32(300)}
	}
	keep, _ := dialV5(t, mqttAddr(b), "acme-keep", persistent)
	keep.subscribe(t, pahoSub("k/#", 1))
	waitScrape(t, b, "one session online", func(fams map[string]*dto.MetricFamily) bool {
		return sessions(fams, "online") == 1 && sessions(fams, "offline") == 0
	})
	if err := keep.Disconnect(&paho.Disconnect{ReasonCode: 0}); err != nil {
		t.Fatal(err)
	}
	waitScrape(t, b, "the session offline", func(fams map[string]*dto.MetricFamily) bool {
		return sessions(fams, "online") == 0 && sessions(fams, "offline") == 1
	})

	const n = 3
	pub := dialRaw(t, mqttAddr(b), packet.V5)
	pub.connect(&packet.Connect{ClientID: []byte("acme-pub"), CleanStart: true})
	for i := range n {
		pub.send(&packet.Publish{QoS: 1, PacketID: uint16(i + 1), Topic: []byte("k/" + strconv.Itoa(i)), Payload: []byte("queued")})
		nextAs[*packet.Ack](pub)
	}
	pub.send(&packet.Disconnect{})
	waitScrape(t, b, "the queued messages in the inbox", func(fams map[string]*dto.MetricFamily) bool {
		return value(t, fams, "shoal_session_inbox_depth") == n && sessions(fams, "online") == 0
	})

	again, ca := dialV5(t, mqttAddr(b), "acme-keep", persistent)
	if !ca.SessionPresent {
		t.Fatal("session not present")
	}
	for range n {
		if m := again.expect(t); !strings.HasPrefix(m.Topic, "k/") {
			t.Fatalf("received %s", m.Topic)
		}
	}
	fams := waitScrape(t, b, "the session resumed", func(fams map[string]*dto.MetricFamily) bool {
		return value(t, fams, "shoal_session_inbox_depth") == 0 && sessions(fams, "online") == 1 && sessions(fams, "offline") == 0
	})
	if n, _ := histogram(fams, "shoal_delivery_latency_seconds"); n != 0 {
		t.Errorf("%d delivery latencies of messages that waited for their client, want none", n)
	}
	pub = dialRaw(t, mqttAddr(b), packet.V5)
	pub.connect(&packet.Connect{ClientID: []byte("acme-pub"), CleanStart: true})
	pub.send(&packet.Publish{QoS: 1, PacketID: 1, Topic: []byte("k/live"), Payload: []byte("live")})
	nextAs[*packet.Ack](pub)
	if m := again.expect(t); m.Topic != "k/live" {
		t.Fatalf("received %s", m.Topic)
	}
	waitScrape(t, b, "the live message's latency", func(fams map[string]*dto.MetricFamily) bool {
		n, _ := histogram(fams, "shoal_delivery_latency_seconds")
		return n == 1
	})
}

// TestTenantLabelCap: with telemetry.max_tenant_labels 1, the first
// tenant keeps its label and the second is counted as "_other".
func TestTenantLabelCap(t *testing.T) {
	b := startBroker(t, func(c *config.Config) { c.Telemetry.MaxTenantLabels = 1 })
	publish := func(client string, count int) {
		r := dialRaw(t, mqttAddr(b), packet.V5)
		r.connect(&packet.Connect{ClientID: []byte(client), CleanStart: true})
		for i := range count {
			r.send(&packet.Publish{QoS: 1, PacketID: uint16(i + 1), Topic: []byte("cap"), Payload: []byte("x")})
			nextAs[*packet.Ack](r)
		}
	}
	publish("acme-1", 1)
	publish("globex-1", 2)
	fams := scrape(t, b)
	for _, name := range []string{"shoal_gateway_tenant_messages_received_total", "shoal_gateway_connects_total", "shoal_gateway_tenant_connections"} {
		if ms := series(fams, name, "tenant", "globex"); len(ms) != 0 {
			t.Errorf("%s has a series of its own for the tenant beyond the cap", name)
		}
	}
	if v := value(t, fams, "shoal_gateway_tenant_messages_received_total", "tenant", "acme"); v != 1 {
		t.Errorf("received from acme = %v, want 1", v)
	}
	if v := value(t, fams, "shoal_gateway_tenant_messages_received_total", "tenant", "_other"); v != 2 {
		t.Errorf("received from _other = %v, want 2", v)
	}
	if v := value(t, fams, "shoal_gateway_connects_total", "result", "accepted", "tenant", "_other"); v != 1 {
		t.Errorf("connects of _other = %v, want 1", v)
	}
}

// TestSysFromTheSameCounters: a tenant's $SYS/broker topics and its
// series on /metrics are read from the same counters, so they agree, and
// neither shows another tenant's activity.
func TestSysFromTheSameCounters(t *testing.T) {
	b := startBroker(t, func(c *config.Config) { c.Gateway.SysInterval = 50 * time.Millisecond })
	publish := func(client string, count int) {
		r := dialRaw(t, mqttAddr(b), packet.V5)
		r.connect(&packet.Connect{ClientID: []byte(client), CleanStart: true})
		for i := range count {
			r.send(&packet.Publish{QoS: 1, PacketID: uint16(i + 1), Topic: []byte("sys/x"), Payload: []byte("x")})
			nextAs[*packet.Ack](r)
		}
	}
	publish("acme-1", 3)
	publish("globex-1", 5)
	fams := scrape(t, b)
	for tenant, want := range map[string]float64{"acme": 3, "globex": 5} {
		if v := value(t, fams, "shoal_gateway_tenant_messages_received_total", "tenant", tenant); v != want {
			t.Fatalf("/metrics: received from %s = %v, want %v", tenant, v, want)
		}
		w, _ := dialV5(t, mqttAddr(b), tenant+"-watch")
		w.subscribe(t, pahoSub("$SYS/broker/messages/received", 0))
		// A round published before the last PUBLISH was counted may come
		// first (retained): wait for the count to reach the metric's.
		deadline := time.After(wait)
		for got := ""; got != strconv.Itoa(int(want)); {
			select {
			case m := <-w.msgs:
				got = string(m.Payload)
			case <-deadline:
				t.Fatalf("$SYS/broker/messages/received of %s: last %q, want %v as on /metrics", tenant, got, want)
			}
		}
	}
}
