package broker_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/shoal-mqtt/shoal/compose/broker"
	"github.com/shoal-mqtt/shoal/compose/config"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// dialPersistent connects id as a 5.0 raw client with a session that
// outlives the connection (expiry 300 s).
func dialPersistent(t *testing.T, b *broker.Broker, id string, clean bool) *rawClient {
	t.Helper()
	r := dialRaw(t, mqttAddr(b), packet.V5)
	cp := &packet.Connect{ClientID: []byte(id), CleanStart: clean, KeepAlive: 30}
	cp.Props.SessionExpiry = 300
	cp.Props.Set(packet.PropSessionExpiry)
	r.connect(cp)
	return r
}

// A session that ends with its connection leaves the routers' shards by a
// REMOVE_ALL to the partitions of shoal.messages its connection wrote to
// alone (Disconnect.router_partitions): none for a client that never
// subscribed, its topic's partition for a filter without wildcards, every
// partition for one with wildcards. And a new session of the same client
// gets none of the old one's messages. The routers forget the presence of
// each (a tombstone).
func TestSessionEndLeavesItsPartitionsOnly(t *testing.T) {
	var dataDir string
	b := startBroker(t, func(c *config.Config) { dataDir = c.DataDir })
	none, _ := dialV5(t, mqttAddr(b), "end-none")
	one, _ := dialV5(t, mqttAddr(b), "end-one")
	one.subscribe(t, paho.SubscribeOptions{Topic: "end/one", QoS: 1})
	all, _ := dialV5(t, mqttAddr(b), "end-all")
	all.subscribe(t, paho.SubscribeOptions{Topic: "end/+/w", QoS: 1})
	for _, c := range []*v5Client{none, one, all} {
		if err := c.Disconnect(&paho.Disconnect{}); err != nil {
			t.Fatal(err)
		}
	}

	tool, _ := attachLog(t, filepath.Join(dataDir, "kafka"))
	ends, err := tool.EndOffsets(t.Context(), kafka.TopicMessages)
	if err != nil {
		t.Fatal(err)
	}
	parts := int32(len(ends)) // the broker's, not the catalogue's default
	// The session service has answered every Disconnect once each client's
	// presence tombstone is in the log (written after the removals: the
	// routers forget a client whose session ended with its connection).
	var removals map[string][]int32
	eventually.OK(t, wait, func() string {
		var gone map[string]bool
		removals, gone = logRemovals(t, tool, nil)
		if !gone["end-none"] || !gone["end-one"] || !gone["end-all"] {
			return "the session service has not answered every Disconnect"
		}
		return ""
	})
	every := make([]int32, parts)
	for p := range every {
		every[p] = int32(p)
	}
	oneKey := kafka.Key("end", "end/one")
	for client, want := range map[string][]int32{
		"end-none": nil,
		"end-one":  {kafka.PartitionForKey(oneKey, parts)},
		"end-all":  every,
	} {
		if got := removals[client]; !slices.Equal(got, want) {
			t.Errorf("%s: REMOVE_ALL to partitions %v, want %v", client, got, want)
		}
	}

	// Its subscriptions gone, a new session of end-one gets nothing of
	// end/one, and a subscriber that stayed does.
	watch, _ := dialV5(t, mqttAddr(b), "end-watch")
	watch.subscribe(t, paho.SubscribeOptions{Topic: "end/#", QoS: 1})
	again, _ := dialV5(t, mqttAddr(b), "end-one")
	pub, _ := dialV5(t, mqttAddr(b), "end-pub")
	pub.publish(t, &paho.Publish{Topic: "end/one", QoS: 1, Payload: []byte("x")})
	pub.publish(t, &paho.Publish{Topic: "end/a/w", QoS: 1, Payload: []byte("y")})
	watch.expect(t)
	watch.expect(t)
	again.expectNone(t, 300*time.Millisecond)
}

// logRemovals reads the embedded log of a broker: the partitions of
// shoal.messages of the REMOVE_ALLs of each client written so far (of
// those whose generation keep accepts; nil: all), and the clients whose
// presence has a tombstone. An offline presence fails the test: every
// session of these tests ends with the connection it began with.
func logRemovals(t *testing.T, tool *kafka.Client, keep func(gen uint64) bool) (map[string][]int32, map[string]bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	removals := map[string][]int32{}
	gone := map[string]bool{}
	for _, topic := range []string{kafka.TopicMessages, kafka.TopicPresence} {
		ends, err := tool.EndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		var ps []int32
		left := 0
		for p, end := range ends {
			if end > 0 {
				ps = append(ps, p)
				left++
			}
		}
		if left == 0 {
			continue
		}
		cctx, stop := context.WithCancel(ctx)
		err = tool.Consume(cctx, kafka.ConsumeConfig{Topic: topic, Partitions: ps}, func(_ context.Context, b kafka.Batch) error {
			for _, r := range b.Records {
				var env eventspb.Envelope
				if err := kafka.DecodeEnvelope(r, &env); err != nil {
					return err
				}
				if ch := env.GetSubscriptionChange(); ch.GetOp() == eventspb.SubscriptionChange_OP_REMOVE_ALL &&
					(keep == nil || keep(ch.GetRoute().GetGeneration())) {
					removals[env.ClientId] = append(removals[env.ClientId], r.Partition)
				}
				if pr := env.GetPresence(); pr != nil && !pr.GetOnline() {
					t.Errorf("%s: an offline presence, want its tombstone", env.ClientId)
				}
				if topic == kafka.TopicPresence && r.Value == nil {
					_, client, err := kafka.SplitKey(r.Key)
					if err != nil {
						return err
					}
					gone[string(client)] = true
				}
				if r.Offset == ends[r.Partition]-1 {
					if left--; left == 0 {
						stop()
					}
				}
			}
			return nil
		})
		stop()
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	}
	for _, ps := range removals {
		slices.Sort(ps)
	}
	return removals, gone
}

// A takeover leaves the removal of the session it ended to the end of its
// connection, which names where that connection subscribed: the old
// session's REMOVE_ALL goes to those partitions alone, and meanwhile the
// new session gets nothing of the old one's subscriptions, while its own
// subscription to a filter the old session had is a new one (retain
// handling 1 sends the retained message).
func TestTakeoverRemovesTheOldSessionWhereItSubscribed(t *testing.T) {
	var dataDir string
	b := startBroker(t, func(c *config.Config) { dataDir = c.DataDir })
	pub, _ := dialV5(t, mqttAddr(b), "tk-pub")
	pub.publish(t, &paho.Publish{Topic: "tk/r", QoS: 1, Retain: true, Payload: []byte("kept")})
	old, _ := dialV5(t, mqttAddr(b), "tk-dev")
	old.subscribe(t, paho.SubscribeOptions{Topic: "tk/r", QoS: 1, RetainHandling: 1})
	old.expect(t)
	old.subscribe(t, paho.SubscribeOptions{Topic: "tk/a", QoS: 1})

	taker, _ := dialV5(t, mqttAddr(b), "tk-dev")
	taker.subscribe(t, paho.SubscribeOptions{Topic: "tk/r", QoS: 1, RetainHandling: 1})
	if m := taker.expect(t); string(m.Payload) != "kept" || !m.Retain {
		t.Errorf("the new session's subscription got %q (retain %v), want the retained message", m.Payload, m.Retain)
	}
	pub.publish(t, &paho.Publish{Topic: "tk/a", QoS: 1, Payload: []byte("old session's")})
	taker.expectNone(t, 300*time.Millisecond)

	tool, _ := attachLog(t, filepath.Join(dataDir, "kafka"))
	ends, err := tool.EndOffsets(t.Context(), kafka.TopicMessages)
	if err != nil {
		t.Fatal(err)
	}
	parts := int32(len(ends))
	want := []int32{kafka.PartitionForKey(kafka.Key("tk", "tk/r"), parts), kafka.PartitionForKey(kafka.Key("tk", "tk/a"), parts)}
	slices.Sort(want)
	want = slices.Compact(want)
	eventually.OK(t, wait, func() string {
		removals, _ := logRemovals(t, tool, func(gen uint64) bool { return gen == 1 })
		if got := removals["tk-dev"]; !slices.Equal(got, want) {
			return fmt.Sprintf("REMOVE_ALL of the session taken over in partitions %v, want %v", got, want)
		}
		return ""
	})
	pub.publish(t, &paho.Publish{Topic: "tk/r", QoS: 1, Payload: []byte("live")})
	if m := taker.expect(t); string(m.Payload) != "live" {
		t.Errorf("after the old session's removal the new one got %q, want live", m.Payload)
	}
}
