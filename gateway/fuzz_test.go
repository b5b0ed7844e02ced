package gateway

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/gateway/listener"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// instantLog accepts every write at once and answers every Connect by
// handing the gateway its ConnectResult directly.
type instantLog struct{ g *Gateway }

func (l *instantLog) Partitions(string) int32 { return 4 }

func (l *instantLog) Catalogue() kafka.Catalogue { return kafka.DefaultCatalogue() }

func (l *instantLog) Produce(_ context.Context, r *kafka.Record, done func(*kafka.Record, error)) {
	go done(r, nil)
}

func (l *instantLog) ProduceSync(_ context.Context, rs ...*kafka.Record) error {
	for _, r := range rs {
		var env eventspb.Envelope
		if err := kafka.DecodeEnvelope(r, &env); err != nil {
			return err
		}
		if c := env.GetConnect(); c != nil {
			res := &eventspb.Envelope{Event: &eventspb.Envelope_ConnectResult{ConnectResult: &eventspb.ConnectResult{
				RequestId: c.RequestId, Connection: c.Route.Connection, Generation: 1,
			}}}
			if err := l.g.handleDeliveries(context.Background(), kafka.Batch{Records: []*kafka.Record{kafka.NewRecord(kafka.TopicDeliveries, nil, 0, res)}}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (l *instantLog) Consume(context.Context, kafka.ConsumeConfig, func(context.Context, kafka.Batch) error) error {
	return nil
}

// FuzzConnection feeds arbitrary bytes to an established connection, 3.1.1
// and 5.0: the gateway must neither panic nor stall, and must end the
// connection or keep serving it, never hang.
func FuzzConnection(f *testing.F) {
	seeds := [][]byte{
		(&packet.Publish{QoS: 1, PacketID: 1, Topic: []byte("a/b"), Payload: []byte("x")}).Append(nil, packet.V5),
		(&packet.Subscribe{PacketID: 2, Filters: []packet.Subscription{{Filter: []byte("a/#"), QoS: 2}}}).Append(nil, packet.V5),
		(&packet.Unsubscribe{PacketID: 3, Filters: [][]byte{[]byte("a/#")}}).Append(nil, packet.V5),
		(&packet.Ack{Kind: packet.PUBREL, PacketID: 1}).Append(nil, packet.V5),
		(&packet.Pingreq{}).Append(nil, packet.V5),
		(&packet.Disconnect{Code: 0x04}).Append(nil, packet.V5),
		{0x36, 0x05, 0x00, 0x01, 'a', 0x00, 0x01},
		{0x30, 0xff, 0xff, 0xff, 0xff, 0x01},
		{0xf0, 0x00},
	}
	for _, s := range seeds {
		f.Add(byte(5), s)
		f.Add(byte(4), s)
	}
	cfg := DefaultConfig()
	cfg.MQTTListen, cfg.WSListen, cfg.SysInterval = "127.0.0.1:0", "", 0
	cfg.MaxPacketSize = 4096
	cfg.WriteTimeout = time.Second
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f.Fuzz(func(t *testing.T, version byte, data []byte) {
		v := packet.V5
		if version%2 == 0 {
			v = packet.V311
		}
		il := &instantLog{}
		g, err := New(cfg, il, log, nil, "dev")
		if err != nil {
			t.Fatal(err)
		}
		il.g = g
		server, client := net.Pipe()
		served := make(chan struct{})
		go func() {
			g.serve(context.Background(), &listener.Conn{NetConn: server, ClientAddr: server.RemoteAddr()})
			close(served)
		}()
		go func() { _, _ = io.Copy(io.Discard, client) }() // drain everything the gateway writes
		_ = client.SetWriteDeadline(time.Now().Add(2 * time.Second))
		_, _ = client.Write((&packet.Connect{Version: v, ClientID: []byte("fz-1"), CleanStart: true, KeepAlive: 60}).Append(nil, v))
		_, _ = client.Write(data)
		// Whatever the bytes did, closing the socket must end the
		// connection promptly.
		_ = client.Close()
		select {
		case <-served:
		case <-time.After(5 * time.Second):
			t.Fatalf("connection not ended 5 s after the client closed; input % x", data)
		}
	})
}
