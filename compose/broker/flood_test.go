package broker_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/compose/config"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
)

// TestQoS0FloodLosesNoQoS1: clients publishing QoS 0 as fast as their
// sockets take bytes are held to the pace at which the router routes
// (gateway.conn.waitRoom), so the router's backlog never outgrows the
// embedded log's size bound: another client's QoS 1 messages, sent during
// the flood, all arrive, and the router passes over no record that
// retention deleted. Before, the flood was read at half a million messages
// a second on this machine, the router fell behind by more than the bound
// within seconds, and QoS 1 messages that had been acknowledged were lost
// (24 of 200 in one run). The bound here is small (1 MiB per partition)
// so that a short flood outgrows it many times over. A QoS 1 publish waits
// its turn with the flooders' (up to a second each under -race): the
// messages are few.
func TestQoS0FloodLosesNoQoS1(t *testing.T) {
	const (
		flooders = 4
		qos1     = 10
		flood    = 3 * time.Second // at least, and until the QoS 1 messages are through
	)
	b := startBroker(t, func(c *config.Config) {
		c.Kafka.LocalDelivery = true // the hold needs the in-process feed (docs/local-path.md)
		c.Kafka.RetentionBytes = 1 << 20
	})
	addr := mqttAddr(b)

	// Someone receives the flood: each message is routed to a subscriber.
	sink := dialRaw(t, addr, packet.V5)
	sink.connect(&packet.Connect{ClientID: []byte("flood-sink"), CleanStart: true})
	sink.subscribeOne("flood/#", 0)
	go func() { _, _ = io.Copy(io.Discard, sink.nc) }()

	sub, _ := dialV5(t, addr, "q1-sub")
	sub.subscribe(t, pahoSub("q1/x", 1))
	pub, _ := dialV5(t, addr, "q1-pub")

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range flooders {
		r := dialRaw(t, addr, packet.V5)
		r.connect(&packet.Connect{ClientID: fmt.Appendf(nil, "flooder-%d", i), CleanStart: true})
		one := (&packet.Publish{Topic: fmt.Appendf(nil, "flood/%d", i), Payload: bytes.Repeat([]byte{'x'}, 64)}).Append(nil, packet.V5)
		block := bytes.Repeat(one, 64<<10/len(one))
		wg.Add(1)
		go func() {
			defer wg.Done()
			off := 0 // a write cut by its deadline goes on where it stopped
			for {
				select {
				case <-stop:
					return
				default:
				}
				_ = r.nc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
				n, err := r.nc.Write(block[off:])
				off = (off + n) % len(block)
				if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
					return
				}
			}
		}()
	}
	// The QoS 1 messages go once the flood outran the router and readers
	// are held: a machine that routes as fast as it reads for a while
	// (a cold start under -race) would otherwise test nothing.
	eventually.True(t, 3*wait, "a reader held by the flood", func() bool {
		h := series(scrape(t, b), "shoal_gateway_publish_held_seconds_total")
		return len(h) == 1 && h[0].GetCounter().GetValue() > 0
	})
	began := time.Now()
	for i := range qos1 {
		pub.publish(t, &pahoPublish{Topic: "q1/x", QoS: 1, Payload: fmt.Appendf(nil, "m%d", i)})
		time.Sleep(10 * time.Millisecond) // real time: the messages spread over the flood, not in one burst
	}
	t.Logf("%d QoS 1 messages published during the flood in %v", qos1, time.Since(began).Round(time.Millisecond))
	time.Sleep(flood - time.Since(began)) // real time: the flood lasts its length (negative: at once)
	close(stop)
	wg.Wait()

	got := map[string]bool{}
	deadline := time.After(3 * wait)
	for len(got) < qos1 {
		select {
		case m := <-sub.msgs:
			got[string(m.Payload)] = true
		case <-deadline:
			var missing []string
			for i := range qos1 {
				if k := fmt.Sprintf("m%d", i); !got[k] {
					missing = append(missing, k)
				}
			}
			t.Fatalf("%d of %d QoS 1 messages published during the flood arrived; missing %v", len(got), qos1, missing)
		}
	}
	fams := scrape(t, b)
	skipped := series(fams, "shoal_kafka_consumer_skipped_total", "topic", "shoal.messages")
	if len(skipped) != 1 || skipped[0].GetCounter().GetValue() != 0 {
		t.Errorf("the router passed over records of shoal.messages that retention deleted: %v", skipped)
	}
}
