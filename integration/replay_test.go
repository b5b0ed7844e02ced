//go:build integration

package integration

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestClusterReplay runs `shoal replay` and `shoal trace` against a
// distributed cluster (real Kafka, real Cassandra): the publishes of one
// client, read back from the cluster's topics, and one message followed to
// its subscriber's delivery.
func TestClusterReplay(t *testing.T) {
	c := newCluster(t)
	sess, r, gw := c.start("session", "session"), c.start("router", "router"), c.start("gateway", "gw-a")
	for _, p := range []*proc{sess, r, gw} {
		p.waitReady()
	}
	sub, _ := dialMQTT(t, gw.mqtt, "acme-rsub", true, 0)
	sub.subscribe("rp/#", 1)
	pub, _ := dialMQTT(t, gw.mqtt, "acme-rpub", true, 0)
	for _, p := range []string{"one", "two", "three"} {
		if err := pub.publish("rp/x", p, 1, false); err != nil {
			t.Fatal(err)
		}
		sub.expectPayload(p)
	}
	shoal := c.tool
	out, errOut, err := shoal("replay", "--quiet", "--type", "publish", "--client", "acme-rpub", "--topic", "rp/x")
	if err != nil {
		t.Fatalf("shoal replay: %v\n%s", err, errOut)
	}
	var ids, payloads []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var e struct {
			KafkaTopic string `json:"kafka_topic"`
			ClientID   string `json:"client_id"`
			MessageID  string `json:"message_id"`
			Payload    string `json:"payload"`
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		if e.KafkaTopic != "shoal.messages" || e.ClientID != "acme-rpub" {
			t.Errorf("line %s", l)
		}
		ids, payloads = append(ids, e.MessageID), append(payloads, e.Payload)
	}
	if strings.Join(payloads, ",") != "one,two,three" {
		t.Fatalf("replayed payloads %v, want one,two,three in order", payloads)
	}
	out, errOut, err = shoal("trace", ids[1])
	if err != nil {
		t.Fatalf("shoal trace: %v\n%s", err, errOut)
	}
	for _, want := range []string{"connect      acme-rpub from 127.0.0.1:", `publish      acme-rpub on "rp/x"`, "acme-rsub (QoS 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("trace lacks %q:\n%s", want, out)
		}
	}
	if _, errOut, err := shoal("trace", "0000000000000001-1"); err == nil || !strings.Contains(errOut, "no such message") {
		t.Errorf("trace of an unknown message: %v, %q", err, errOut)
	}
}
