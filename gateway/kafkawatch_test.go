package gateway

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
)

// TestKafkaCutMovesClients cuts the gateway off from its log: once no
// broker answered for kafka_timeout it ends its connections with 0x9C (use
// another server), reports not ready and refuses new clients with 0x88
// (3.1.1: 0x03); once a broker answers again it is ready and accepts them.
func TestKafkaCutMovesClients(t *testing.T) {
	fl := newFakeLog()
	g := startGateway(t, fl, func(c *Config) { c.KafkaTimeout = time.Second })
	nc, rd := connectAs(t, g, "t-cut", 0)

	cutAt := time.Now()
	fl.cut.Store(true)
	expectDisconnect(t, nc, rd, packet.CodeUseAnotherServer)
	// The last answer came up to a probe period (250 ms) before the cut.
	if took := time.Since(cutAt); took < 750*time.Millisecond {
		t.Errorf("connection moved %s after the cut, before kafka_timeout (1s) less a probe period", took)
	}
	if g.Ready() {
		t.Error("ready while cut off from Kafka")
	}
	if _, _, ca := connectAck(t, g, "t-new", 0); ca.Code != packet.CodeServerUnavailable {
		t.Errorf("a 5.0 CONNECT while cut off: CONNACK %#x, want 0x88", ca.Code)
	}
	old, err := net.Dial("tcp", g.Addr("mqtt").String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = old.Close() }()
	if _, err := old.Write((&packet.Connect{Version: packet.V311, ClientID: []byte("t-old"), CleanStart: true}).Append(nil, packet.V311)); err != nil {
		t.Fatal(err)
	}
	_ = old.SetReadDeadline(time.Now().Add(gatewayWait))
	connack := make([]byte, 4)
	if _, err := io.ReadFull(old, connack); err != nil || !bytes.Equal(connack, []byte{0x20, 2, 0, 3}) {
		t.Errorf("a 3.1.1 CONNECT while cut off: % x (%v), want CONNACK 0x03 (server unavailable)", connack, err)
	}

	fl.cut.Store(false)
	eventually.True(t, gatewayWait, "the gateway to be ready once Kafka answers", g.Ready)
	if _, _, ca := connectAck(t, g, "t-back", 0); ca.Code != 0 {
		t.Errorf("a CONNECT once Kafka answers again: CONNACK %#x, want 0", ca.Code)
	}
}

// TestKafkaTimeoutValidated names the key of a timeout too short.
func TestKafkaTimeoutValidated(t *testing.T) {
	cfg := DefaultConfig()
	cfg.KafkaTimeout = 100 * time.Millisecond
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "gateway.kafka_timeout") {
		t.Fatalf("Validate: %v, want an error naming gateway.kafka_timeout", err)
	}
	cfg.KafkaTimeout = 0
	if err := cfg.Validate(); err != nil {
		t.Fatalf("kafka_timeout 0 (off): %v", err)
	}
}
