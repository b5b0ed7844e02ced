package main

import (
	"bytes"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/shoal-mqtt/shoal/compose/broker/brokertest"
	"github.com/shoal-mqtt/shoal/compose/config"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

// TestMaxPacketSizeEndToEnd: a PUBLISH of exactly the Maximum Packet Size
// the CONNACK advertises (1 MiB by default) works end to end in both
// protocol versions and at every QoS: acknowledged, delivered whole, and in
// the log, where `shoal replay` reads it back. Before, a payload above
// about 999,800 bytes failed in the log: QoS 1 and 2 closed the
// connection without an acknowledgement, QoS 0 was delivered but never
// written.
func TestMaxPacketSizeEndToEnd(t *testing.T) {
	dir := t.TempDir()
	b, stop := brokertest.Run(t, func(c *config.Config) { c.DataDir = dir })
	addr := b.Addr("mqtt").String()

	got := make(chan *paho.Publish, 16)
	snc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	sub := paho.NewClient(paho.ClientConfig{Conn: snc,
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			got <- pr.Packet
			return true, nil
		}}})
	if _, err := sub.Connect(t.Context(), &paho.Connect{ClientID: "big-sub", CleanStart: true, KeepAlive: 30}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Disconnect(&paho.Disconnect{}) }()
	if _, err := sub.Subscribe(t.Context(), &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "big/#", QoS: 2}}}); err != nil {
		t.Fatal(err)
	}

	sent := 0
	for _, v := range []packet.Version{packet.V5, packet.V311} {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		rd := packet.NewReader(nc, 1024)
		send := func(p packet.Packet) []byte {
			t.Helper()
			b := p.Append(nil, v)
			_ = nc.SetWriteDeadline(time.Now().Add(wait))
			if _, err := nc.Write(b); err != nil {
				t.Fatalf("write: %v", err)
			}
			return b
		}
		next := func() packet.Packet {
			t.Helper()
			_ = nc.SetReadDeadline(time.Now().Add(wait))
			h, body, err := rd.ReadPacket()
			if err != nil {
				t.Fatalf("v%d: read: %v", v, err)
			}
			p, err := packet.Decode(h, body, v)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		send(&packet.Connect{Version: v, ClientID: []byte(fmt.Sprintf("big-pub-%d", v)), CleanStart: true, KeepAlive: 30})
		ca, ok := next().(*packet.Connack)
		if !ok || ca.Code != 0 {
			t.Fatalf("v%d: CONNACK %v", v, ca)
		}
		limit := 1 << 20
		if v == packet.V5 && ca.Props.MaxPacketSize != uint32(limit) {
			t.Fatalf("CONNACK advertises Maximum Packet Size %d, want %d", ca.Props.MaxPacketSize, limit)
		}
		for qos := range packet.QoS(3) {
			topic := fmt.Sprintf("big/%d/%d", v, qos)
			p := &packet.Publish{QoS: qos, Topic: []byte(topic)}
			if qos > 0 {
				p.PacketID = 1
			}
			// The payload that makes the whole packet the advertised size.
			full := bytes.Repeat([]byte{qos}, limit)
			p.Payload = full[:limit-len(p.Append(nil, v))-2] // the remaining length takes 2 bytes more
			for n := len(p.Append(nil, v)); n != limit; n = len(p.Append(nil, v)) {
				p.Payload = p.Payload[:len(p.Payload)+limit-n]
			}
			send(p)
			sent++
			switch qos {
			case 1:
				if a, ok := next().(*packet.Ack); !ok || a.Kind != packet.PUBACK || a.Code != 0 {
					t.Fatalf("v%d QoS 1 at the limit: got %v, want PUBACK 0", v, a)
				}
			case 2:
				if a, ok := next().(*packet.Ack); !ok || a.Kind != packet.PUBREC || a.Code != 0 {
					t.Fatalf("v%d QoS 2 at the limit: got %v, want PUBREC 0", v, a)
				}
				send(&packet.Ack{Kind: packet.PUBREL, PacketID: 1})
				if a, ok := next().(*packet.Ack); !ok || a.Kind != packet.PUBCOMP || a.Code != 0 {
					t.Fatalf("v%d QoS 2 at the limit: got %v, want PUBCOMP 0", v, a)
				}
			}
			select {
			case m := <-got:
				if m.Topic != topic || !bytes.Equal(m.Payload, p.Payload) {
					t.Fatalf("delivered %q with %d bytes, want %q with %d", m.Topic, len(m.Payload), topic, len(p.Payload))
				}
			case <-time.After(wait):
				t.Fatalf("v%d QoS %d at the limit: not delivered", v, qos)
			}
		}
		send(&packet.Disconnect{})
		_ = nc.Close()
	}
	stop()

	var out, errOut bytes.Buffer
	if code := run(t.Context(), []string{"replay", "--quiet", "--data-dir", dir, "--kafka-partitions", "4", "--type", "publish", "--topic", "big/#"}, &out, &errOut); code != 0 {
		t.Fatalf("replay: exit %d: %s", code, errOut.String())
	}
	if n := strings.Count(out.String(), "\n"); n != sent {
		t.Fatalf("the log holds %d of the %d publishes at the limit", n, sent)
	}
}
