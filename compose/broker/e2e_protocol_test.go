package broker_test

import (
	"fmt"
	"net"
	"testing"
	"time"

	mqtt3 "github.com/eclipse/paho.mqtt.golang"

	"github.com/shoal-mqtt/shoal/compose/config"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

func TestConnectTimeout(t *testing.T) {
	b := startBroker(t, func(c *config.Config) { c.Gateway.ConnectTimeout = 300 * time.Millisecond })
	r := dialRaw(t, mqttAddr(b), packet.V5)
	start := time.Now()
	r.expectClosed(wait)
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("closed after %v, before the connect timeout", d)
	}
}

func TestKeepAliveEnforced(t *testing.T) {
	b := startBroker(t)
	for _, v := range []packet.Version{packet.V5, packet.V311} {
		t.Run(v.String(), func(t *testing.T) {
			r := dialRaw(t, mqttAddr(b), v)
			r.connect(&packet.Connect{ClientID: []byte("ka-" + v.String()), CleanStart: true, KeepAlive: 1})
			// A PINGREQ inside the window keeps the connection (real time:
			// the whole broker, over TCP, on the real clock).
			time.Sleep(800 * time.Millisecond)
			r.send(&packet.Pingreq{})
			if _, ok := r.next(wait).(*packet.Pingresp); !ok {
				t.Fatal("want PINGRESP")
			}
			start := time.Now()
			d := r.expectClosed(5 * time.Second)
			if el := time.Since(start); el < 1400*time.Millisecond {
				t.Fatalf("closed after %v: keep alive 1 s allows 1.5 s", el)
			}
			if v == packet.V5 && (d == nil || d.Code != packet.CodeKeepAliveTimeout) {
				t.Fatalf("disconnect %+v, want 0x8D keep alive timeout", d)
			}
		})
	}
}

func TestMalformedAndProtocolErrors(t *testing.T) {
	b := startBroker(t, func(c *config.Config) { c.Gateway.MaxPacketSize = 1024 })
	cases := []struct {
		name string
		send func(r *rawClient)
		want packet.ReasonCode
	}{
		{"publish QoS 3", func(r *rawClient) { r.sendBytes([]byte{0x36, 0x05, 0x00, 0x01, 'a', 0x00, 0x01}) }, packet.CodeMalformedPacket},
		{"reserved type 0", func(r *rawClient) { r.sendBytes([]byte{0x00, 0x00}) }, packet.CodeMalformedPacket},
		{"remaining length of 5 bytes", func(r *rawClient) { r.sendBytes([]byte{0x30, 0xff, 0xff, 0xff, 0xff, 0x01}) }, packet.CodeMalformedPacket},
		{"second CONNECT", func(r *rawClient) {
			r.send(&packet.Connect{Version: packet.V5, ClientID: []byte("again"), CleanStart: true})
		}, packet.CodeProtocolError},
		{"packet too large", func(r *rawClient) {
			r.send(&packet.Publish{Topic: []byte("big"), Payload: make([]byte, 2000)})
		}, packet.CodePacketTooLarge},
		{"wildcard in topic name", func(r *rawClient) {
			r.sendBytes([]byte{0x30, 0x04, 0x00, 0x01, '#', 0x00})
		}, packet.CodeTopicNameInvalid},
		{"invalid UTF-8 in topic", func(r *rawClient) {
			r.sendBytes([]byte{0x30, 0x06, 0x00, 0x03, 0xed, 0xa0, 0x80, 0x00})
		}, packet.CodeMalformedPacket},
		{"subscription identifier from a client", func(r *rawClient) {
			p := &packet.Publish{Topic: []byte("x")}
			p.Props.SubscriptionIDs = []uint32{1}
			r.send(p)
		}, packet.CodeProtocolError},
		{"PUBLISH packet identifier 0", func(r *rawClient) {
			r.sendBytes([]byte{0x32, 0x06, 0x00, 0x01, 'a', 0x00, 0x00, 0x00})
		}, packet.CodeProtocolError},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := dialRaw(t, mqttAddr(b), packet.V5)
			r.connect(&packet.Connect{ClientID: []byte(fmt.Sprintf("bad-%d", i)), CleanStart: true, KeepAlive: 30})
			tc.send(r)
			d := r.expectClosed(wait)
			if d == nil || d.Code != tc.want {
				t.Fatalf("disconnect %+v, want reason %#x", d, byte(tc.want))
			}
		})
	}
	t.Run("3.1.1 malformed closes", func(t *testing.T) {
		r := dialRaw(t, mqttAddr(b), packet.V311)
		r.connect(&packet.Connect{ClientID: []byte("bad-311"), CleanStart: true, KeepAlive: 30})
		r.sendBytes([]byte{0x36, 0x05, 0x00, 0x01, 'a', 0x00, 0x01})
		if d := r.expectClosed(wait); d != nil {
			t.Fatalf("3.1.1 got a DISCONNECT packet: %+v", d)
		}
	})
	t.Run("garbage instead of CONNECT", func(t *testing.T) {
		r := dialRaw(t, mqttAddr(b), packet.V5)
		r.sendBytes([]byte("GET / HTTP/1.1\r\n\r\n"))
		r.expectClosed(wait)
	})
	t.Run("unsupported protocol level", func(t *testing.T) {
		r := dialRaw(t, mqttAddr(b), packet.V311)
		r.sendBytes([]byte{0x10, 0x0c, 0x00, 0x04, 'M', 'Q', 'T', 'T', 0x07, 0x02, 0x00, 0x1e, 0x00, 0x00})
		p := r.next(wait)
		ca, ok := p.(*packet.Connack)
		if !ok || ca.Code != packet.CodeUnsupportedProtocolVersion {
			t.Fatalf("want CONNACK return code 1 in the 3.1.1 format, got %+v", p)
		}
		r.expectClosed(wait)
	})
	t.Run("3.1.1 empty client id without clean session", func(t *testing.T) {
		r := dialRaw(t, mqttAddr(b), packet.V311)
		ca := r.connect(&packet.Connect{CleanStart: false, KeepAlive: 30})
		if ca.Code != packet.CodeClientIdentifierNotValid {
			t.Fatalf("CONNACK %v, want identifier rejected", ca.Code)
		}
	})
	t.Run("the broker still serves", func(t *testing.T) {
		r := dialRaw(t, mqttAddr(b), packet.V5)
		if ca := r.connect(&packet.Connect{ClientID: []byte("after"), CleanStart: true}); ca.Code != 0 {
			t.Fatalf("CONNACK %v after the malformed clients", ca.Code)
		}
	})
}

// TestV311Paho runs Eclipse Paho's MQTT 3.1.1 client through QoS 0, 1 and
// 2, wildcards and retained messages.
func TestV311Paho(t *testing.T) {
	b := startBroker(t)
	newClient := func(id string, onMsg mqtt3.MessageHandler) mqtt3.Client {
		opts := mqtt3.NewClientOptions().AddBroker("tcp://" + mqttAddr(b)).SetClientID(id).
			SetProtocolVersion(4).SetCleanSession(true).SetAutoReconnect(false).SetConnectTimeout(wait)
		if onMsg != nil {
			opts.SetDefaultPublishHandler(onMsg)
		}
		c := mqtt3.NewClient(opts)
		if tok := c.Connect(); !tok.WaitTimeout(wait) || tok.Error() != nil {
			t.Fatalf("connect %s: %v", id, tok.Error())
		}
		t.Cleanup(func() { c.Disconnect(100) })
		return c
	}
	got := make(chan mqtt3.Message, 100)
	sub := newClient("v3-sub", func(_ mqtt3.Client, m mqtt3.Message) { got <- m })
	if tok := sub.SubscribeMultiple(map[string]byte{"v3/+/q": 2, "v3/ret": 1}, nil); !tok.WaitTimeout(wait) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	pub := newClient("v3-pub", nil)
	for qos := byte(0); qos <= 2; qos++ {
		tok := pub.Publish(fmt.Sprintf("v3/%d/q", qos), qos, false, fmt.Sprint("m", qos))
		if !tok.WaitTimeout(wait) || tok.Error() != nil {
			t.Fatalf("publish QoS %d: %v", qos, tok.Error())
		}
	}
	// Three topics, so no order between them.
	byTopic := map[string]mqtt3.Message{}
	for range 3 {
		select {
		case m := <-got:
			byTopic[m.Topic()] = m
		case <-time.After(wait):
			t.Fatalf("got %d of 3 messages", len(byTopic))
		}
	}
	for qos := byte(0); qos <= 2; qos++ {
		m := byTopic[fmt.Sprintf("v3/%d/q", qos)]
		if m == nil || m.Qos() != qos || string(m.Payload()) != fmt.Sprint("m", qos) {
			t.Fatalf("QoS %d: got %v", qos, m)
		}
	}
	if tok := pub.Publish("v3/ret", 1, true, "kept"); !tok.WaitTimeout(wait) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	<-got
	late := make(chan mqtt3.Message, 10)
	l := newClient("v3-late", func(_ mqtt3.Client, m mqtt3.Message) { late <- m })
	if tok := l.Subscribe("v3/#", 1, nil); !tok.WaitTimeout(wait) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	select {
	case m := <-late:
		if m.Topic() != "v3/ret" || !m.Retained() || string(m.Payload()) != "kept" {
			t.Fatalf("retained: %s %q retained=%v", m.Topic(), m.Payload(), m.Retained())
		}
	case <-time.After(wait):
		t.Fatal("retained message not delivered to a 3.1.1 subscriber")
	}
}

// TestWebSocket connects a 3.1.1 Paho client over ws:// to /mqtt.
func TestWebSocket(t *testing.T) {
	b := startBroker(t)
	got := make(chan mqtt3.Message, 10)
	opts := mqtt3.NewClientOptions().AddBroker("ws://" + b.Addr("ws").String() + "/mqtt").SetClientID("ws-client").
		SetProtocolVersion(4).SetAutoReconnect(false).SetConnectTimeout(wait).
		SetDefaultPublishHandler(func(_ mqtt3.Client, m mqtt3.Message) { got <- m })
	c := mqtt3.NewClient(opts)
	if tok := c.Connect(); !tok.WaitTimeout(wait) || tok.Error() != nil {
		t.Fatalf("connect over websocket: %v", tok.Error())
	}
	defer c.Disconnect(100)
	if tok := c.Subscribe("ws/t", 1, nil); !tok.WaitTimeout(wait) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	tcp, _ := dialV5(t, mqttAddr(b), "ws-tcp-pub")
	tcp.publish(t, &pahoPublish{Topic: "ws/t", QoS: 1, Payload: []byte("across")})
	select {
	case m := <-got:
		if string(m.Payload()) != "across" {
			t.Fatalf("got %q", m.Payload())
		}
	case <-time.After(wait):
		t.Fatal("websocket subscriber got nothing from a TCP publisher")
	}
}

// TestWebSocketBusyKeepAlive: a WebSocket client that keeps publishing
// for longer than its keep alive stays connected. (A WebSocket connection
// closes when a read deadline passes under a read, so the gateway moves its
// deadline with every packet there, not only when it passes as for TCP.)
func TestWebSocketBusyKeepAlive(t *testing.T) {
	b := startBroker(t)
	lost := make(chan error, 1)
	opts := mqtt3.NewClientOptions().AddBroker("ws://" + b.Addr("ws").String() + "/mqtt").SetClientID("ws-busy").
		SetProtocolVersion(4).SetAutoReconnect(false).SetConnectTimeout(wait).SetKeepAlive(time.Second).
		SetConnectionLostHandler(func(_ mqtt3.Client, err error) { lost <- err })
	c := mqtt3.NewClient(opts)
	if tok := c.Connect(); !tok.WaitTimeout(wait) || tok.Error() != nil {
		t.Fatalf("connect over websocket: %v", tok.Error())
	}
	defer c.Disconnect(100)
	start := time.Now()
	for i := 0; time.Since(start) < 2500*time.Millisecond; i++ {
		if tok := c.Publish("ws/busy", 1, false, "x"); !tok.WaitTimeout(wait) || tok.Error() != nil {
			t.Fatalf("publish %d after %v: %v", i, time.Since(start), tok.Error())
		}
		select {
		case err := <-lost:
			t.Fatalf("connection lost after %v while publishing every 100 ms with a 1 s keep alive: %v", time.Since(start), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestSys subscribes to $SYS/broker/#.
func TestSys(t *testing.T) {
	b := startBroker(t, func(c *config.Config) { c.Gateway.SysInterval = 100 * time.Millisecond })
	c, _ := dialV5(t, mqttAddr(b), "sys-watch")
	c.subscribe(t, pahoSub("$SYS/broker/#", 0))
	seen := map[string]string{}
	deadline := time.After(wait)
	// The first round may predate this client's connection: wait for one
	// that counts it.
	for len(seen) < 9 || seen["$SYS/broker/clients/connected"] == "0" {
		select {
		case m := <-c.msgs:
			seen[m.Topic] = string(m.Payload)
		case <-deadline:
			t.Fatalf("$SYS topics seen: %v", seen)
		}
	}
	for _, topic := range []string{"$SYS/broker/version", "$SYS/broker/uptime", "$SYS/broker/clients/connected",
		"$SYS/broker/messages/received", "$SYS/broker/messages/sent", "$SYS/broker/bytes/received", "$SYS/broker/bytes/sent"} {
		if _, ok := seen[topic]; !ok {
			t.Errorf("no %s", topic)
		}
	}
	// A client may not publish into $SYS.
	r := dialRaw(t, mqttAddr(b), packet.V5)
	r.connect(&packet.Connect{ClientID: []byte("sys-forger"), CleanStart: true})
	r.send(&packet.Publish{QoS: 1, PacketID: 1, Topic: []byte("$SYS/broker/version"), Payload: []byte("forged")})
	if a, ok := r.next(wait).(*packet.Ack); !ok || a.Code != packet.CodeNotAuthorized {
		t.Fatalf("publish into $SYS: %+v, want PUBACK 0x87", a)
	}
}

var _ = net.Dial
