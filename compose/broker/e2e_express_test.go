package broker_test

import (
	"fmt"
	"testing"

	"github.com/eclipse/paho.golang/paho"

	"github.com/shoal-mqtt/shoal/compose/config"
	"github.com/shoal-mqtt/shoal/kafka"
)

// TestExpressKeepsOrderAndLog: with the local delivery path the router
// routes a QoS 0 publish before it is produced (the express path,
// router-svc/express.go), without it every publish is routed from the log.
// So does kafka.express: false. Either way the subscriber gets every message in the publisher's order,
// QoS 0 and QoS 1 interleaved; the log holds every publish once, marked
// (kafka.HeaderExpress) only when it was routed early and never when it
// is QoS 1, and one delivery record per message in order; and a
// subscription made before a publish applies to it.
func TestExpressKeepsOrderAndLog(t *testing.T) {
	for _, tc := range []struct {
		name           string // short: the data directory's socket path is bounded
		local, express bool
	}{{"express", true, true}, {"local", true, false}, {"fetch", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			var dataDir string
			b := startBroker(t, func(c *config.Config) {
				c.Kafka.LocalDelivery, c.Kafka.Express = tc.local, tc.express
				dataDir = c.DataDir
			})
			expressOn := tc.local && tc.express
			sub, _ := dialV5(t, mqttAddr(b), "ex-sub")
			sub.subscribe(t, paho.SubscribeOptions{Topic: "ex/#", QoS: 1})
			pub, _ := dialV5(t, mqttAddr(b), "ex-pub")
			const n = 300
			qos := func(i int) byte {
				if i%50 == 49 {
					return 1
				}
				return 0
			}
			for i := range n {
				pub.publish(t, &paho.Publish{Topic: "ex/t", QoS: qos(i), Payload: fmt.Appendf(nil, "%d", i)})
			}
			for i := range n {
				m := sub.expect(t)
				if want := fmt.Sprint(i); string(m.Payload) != want || m.QoS != qos(i) {
					t.Fatalf("message %d: got %q at QoS %d, want %q at QoS %d", i, m.Payload, m.QoS, want, qos(i))
				}
			}

			expressed := 0
			for i, r := range loggedRecords(t, dataDir, kafka.TopicMessages, kafka.HeaderExpress, "ex/t", n) {
				switch {
				case r.payload != fmt.Sprint(i):
					t.Fatalf("publish record %d carries %q: not the publisher's order", i, r.payload)
				case r.mark == nil:
				case !expressOn:
					t.Fatalf("publish %d is marked express (%x) without the express path", i, r.mark)
				case qos(i) != 0:
					t.Fatalf("QoS %d publish %d is marked express", qos(i), i)
				default:
					expressed++
				}
			}
			if expressOn && expressed == 0 {
				t.Fatal("no publish went the express path")
			}
			t.Logf("%d of %d publishes went the express path", expressed, n)
			for i, r := range loggedRecords(t, dataDir, kafka.TopicDeliveries, kafka.HeaderHandoff, "ex/t", n) {
				if want := fmt.Sprint(i); r.payload != want {
					t.Fatalf("delivery record %d carries %q, want %q", i, r.payload, want)
				}
			}

			// A subscription acknowledged before a publish applies to it,
			// though the router may not have read it when the publish
			// comes: the publish then goes the log's way, behind it.
			for i := range 20 {
				s, _ := dialV5(t, mqttAddr(b), fmt.Sprintf("ex-new%d", i))
				s.subscribe(t, paho.SubscribeOptions{Topic: fmt.Sprintf("ex/new/%d", i)})
				pub.publish(t, &paho.Publish{Topic: fmt.Sprintf("ex/new/%d", i), Payload: []byte("first")})
				if m := s.expect(t); string(m.Payload) != "first" {
					t.Fatalf("subscriber %d got %q, want the message published after its SUBACK", i, m.Payload)
				}
			}
		})
	}
}
