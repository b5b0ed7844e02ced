package broker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

// TestSubscribeBeforePublishAcrossConnections is issue 12 §6, as Paho's
// 5.0 interoperability test request/response does it: client B sends
// SUBSCRIBE and, a moment later and before B's SUBACK, client A on the
// same gateway publishes on that topic. What the gateway read first takes
// effect first: B gets the message every time. (The gateway test
// TestSubscribeReadFirstIsWrittenFirst holds the SUBSCRIBE after it was
// read, for the deterministic case.)
func TestSubscribeBeforePublishAcrossConnections(t *testing.T) {
	b := startBroker(t)
	pub := dialRaw(t, mqttAddr(b), packet.V5)
	pub.connect(&packet.Connect{ClientID: []byte("ord-pub"), CleanStart: true, KeepAlive: 30})
	rounds := 200
	if testing.Short() {
		rounds = 20
	}
	deadline := time.Now().Add(60 * time.Second)
	var missed []int
	for i := range rounds {
		if time.Now().After(deadline) {
			t.Logf("stopped after %d rounds (time bound)", i)
			break
		}
		sub := dialRaw(t, mqttAddr(b), packet.V5)
		sub.connect(&packet.Connect{ClientID: []byte(fmt.Sprintf("ord-sub-%d", i)), CleanStart: true, KeepAlive: 30})
		topic := fmt.Sprintf("ord/%d", i)
		sub.send(&packet.Subscribe{PacketID: 1, Filters: []packet.Subscription{{Filter: []byte(topic), QoS: 1}}})
		time.Sleep(2 * time.Millisecond) // a moment later: read by the gateway, not yet acknowledged
		pub.send(&packet.Publish{QoS: 1, PacketID: uint16(i%60000 + 1), Topic: []byte(topic), Payload: []byte("m")})
		if a := nextAs[*packet.Ack](pub); a.Kind != packet.PUBACK || a.Code.IsError() {
			t.Fatalf("round %d: publish answered %v %v", i, a.Kind, a.Code)
		}
		// The SUBACK and the message, in either order.
		got := false
		for seen := 0; seen < 2 && !got; seen++ {
			p, err := sub.read(2 * time.Second)
			if err != nil {
				break
			}
			if m, ok := p.(*packet.Publish); ok {
				got = string(m.Payload) == "m"
			}
		}
		if !got {
			missed = append(missed, i)
		}
		_ = sub.nc.Close()
	}
	if len(missed) > 0 {
		t.Fatalf("rounds %v: the subscriber missed a message published after its SUBSCRIBE was read", missed)
	}
}
