//go:build integration

package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGatewaysBeyondPartitions grows a running deployment past its gateway
// slots, as docs/deployment.md ("More gateways than partitions") says: two
// gateways on a shoal.deliveries of 2 partitions; kafka.deliveries_partitions
// raised to 4 and the session service and router restarted with it (the
// first to start grows the topic); then two more gateways on slots 2 and
// 3. Messages must cross between every old and new gateway, QoS 1 to a
// persistent session on a new slot (through the session service's inbox)
// too, and the gateways that were not restarted keep working.
func TestGatewaysBeyondPartitions(t *testing.T) {
	c := newClusterOn(t, ownKafka(t), "  deliveries_partitions: 2\n", nil)
	sess, router := c.start("session", "session"), c.start("router", "router")
	g0, g1 := c.startSlot("gateway", "gw-0", 0), c.startSlot("gateway", "gw-1", 1)
	for _, p := range []*proc{sess, router, g0, g1} {
		p.waitReady()
	}
	if n := deliveriesPartitions(t, c); n != 2 {
		t.Fatalf("shoal.deliveries has %d partitions, want 2 (kafka.deliveries_partitions)", n)
	}

	c.editConfig("deliveries_partitions: 2", "deliveries_partitions: 4")
	for _, p := range []*proc{sess, router} {
		p.stop(t)
		p.restart()
	}
	if n := deliveriesPartitions(t, c); n != 4 {
		t.Fatalf("shoal.deliveries has %d partitions after the restart with 4, want 4", n)
	}
	if !strings.Contains(readFile(t, sess.log)+readFile(t, router.log), `msg="kafka topic grown" topic=shoal.deliveries partitions=4 was=2`) {
		t.Error(`neither the session service nor the router logged "kafka topic grown" for shoal.deliveries`)
	}
	g2, g3 := c.startSlot("gateway", "gw-2", 2), c.startSlot("gateway", "gw-3", 3)
	g2.waitReady()
	g3.waitReady()

	gws := []*proc{g0, g1, g2, g3}
	for i, from := range gws {
		to := gws[(i+2)%len(gws)] // an old gateway to a new one and back
		topic := fmt.Sprintf("slots/%d", i)
		sub, _ := dialMQTT(t, to.mqtt, fmt.Sprintf("it-slots-sub-%d", i), true, 0)
		sub.subscribe(topic, 1)
		pub, _ := dialMQTT(t, from.mqtt, fmt.Sprintf("it-slots-pub-%d", i), true, 0)
		for j := range 20 {
			if err := pub.publish(topic, fmt.Sprintf("m%04d", j), 1, false); err != nil {
				t.Fatal(err)
			}
		}
		sub.collect(topic, 20).check(t, fmt.Sprintf("%s → %s", from.name, to.name), 20)
	}

	// A persistent session on a new slot: its QoS 1 messages go through
	// the session service's inbox, which forwards them to slot 3.
	sub, _ := dialMQTT(t, g3.mqtt, "it-slots-persistent", false, 300)
	sub.subscribe("slots/persistent", 1)
	pub, _ := dialMQTT(t, g0.mqtt, "it-slots-persistent-pub", true, 0)
	for j := range 20 {
		if err := pub.publish("slots/persistent", fmt.Sprintf("m%04d", j), 1, false); err != nil {
			t.Fatal(err)
		}
	}
	sub.collect("slots/persistent", 20).check(t, "gw-0 → a persistent session on gw-3", 20)
	for _, p := range []*proc{sess, router, g0, g1, g2, g3} {
		if log := readFile(t, p.log); strings.Contains(log, "slot outside shoal.deliveries") {
			t.Errorf("%s dropped a delivery to a slot it did not know", p.name)
		}
	}
}

// deliveriesPartitions asks the cluster's Kafka how many partitions
// shoal.deliveries has.
func deliveriesPartitions(t *testing.T, c *cluster) int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.kafka.Brokers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	td, err := kadm.NewClient(cl).ListTopics(ctx, "shoal.deliveries")
	if err != nil {
		t.Fatal(err)
	}
	d, ok := td["shoal.deliveries"]
	if !ok || d.Err != nil {
		t.Fatalf("shoal.deliveries: %v", d.Err)
	}
	return len(d.Partitions)
}

// readFile returns a file's content.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
