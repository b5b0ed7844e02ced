package gateway

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
	"github.com/shoal-mqtt/shoal/internal/testutil/testlog"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// These tests run gateways on the embedded backbone (kfake), where the
// order and the offsets of records are Kafka's own.

// testTimeout bounds the waits of the tests on the embedded backbone.
const testTimeout = 20 * time.Second

// startBackbone starts an embedded Kafka with the default catalogue and
// returns a client of it; both end with the test.
func startBackbone(t *testing.T) *kafka.Client {
	t.Helper()
	e, err := kafka.StartEmbedded(kafka.EmbeddedConfig{Dir: t.TempDir()}, testlog.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	return newBackboneClient(t, e)
}

// newBackboneClient connects another client to the backbone e.
func newBackboneClient(t *testing.T, e *kafka.Embedded) *kafka.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	kl, err := kafka.NewClient(ctx, e.ClientConfig(kafka.Config{}), testlog.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kl.Close)
	if err := kl.EnsureTopics(ctx); err != nil {
		t.Fatal(err)
	}
	return kl
}

// gatewayRun is a gateway running on the backbone.
type gatewayRun struct {
	g      *Gateway
	cancel context.CancelFunc
	done   chan error    // Run's result
	ended  chan struct{} // closed when Run returned
}

// runOnBackbone runs a gateway with cfg (a loopback MQTT listener, no
// WebSocket, no $SYS) on kl, and l as its leaser when not nil; it is
// stopped at the end of the test.
func runOnBackbone(t *testing.T, kl Log, cfg Config, l SlotLeaser) *gatewayRun {
	t.Helper()
	return runOnBackboneWith(t, kl, cfg, func(g *Gateway) {
		if l != nil {
			WithSlotLeaser(l)(g)
		}
	})
}

// runOnBackboneWith is runOnBackbone with setup called on the gateway
// before it runs.
func runOnBackboneWith(t *testing.T, kl Log, cfg Config, setup func(*Gateway)) *gatewayRun {
	t.Helper()
	cfg.MQTTListen, cfg.WSListen, cfg.SysInterval = "127.0.0.1:0", "", 0
	g, err := New(cfg, kl, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, "dev")
	if err != nil {
		t.Fatal(err)
	}
	setup(g)
	ctx, cancel := context.WithCancel(context.Background())
	r := &gatewayRun{g: g, cancel: cancel, done: make(chan error, 1), ended: make(chan struct{})}
	go func() { r.done <- g.Run(ctx); close(r.ended) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.ended:
		case <-time.After(testTimeout):
			t.Error("gateway did not stop")
		}
	})
	return r
}

// waitReady waits until the gateway is ready (or Run ended).
func (r *gatewayRun) waitReady(t *testing.T) {
	t.Helper()
	eventually.True(t, testTimeout, "the gateway to be ready", func() bool {
		select {
		case err := <-r.done:
			t.Fatalf("gateway stopped before it was ready: %v", err)
		default:
		}
		return r.g.Ready()
	})
}

// readPartition returns the envelopes of topic's partition p from offset 0
// until stop says it has what it waits for (or the test timeout).
func readPartition(t *testing.T, kl *kafka.Client, topic string, p int32, stop func([]*eventspb.Envelope) bool) []*eventspb.Envelope {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var envs []*eventspb.Envelope
	err := kl.Consume(ctx, kafka.ConsumeConfig{Topic: topic, Partitions: []int32{p}, Start: func(int32) int64 { return 0 }},
		func(_ context.Context, b kafka.Batch) error {
			for _, r := range b.Records {
				env := new(eventspb.Envelope)
				if err := kafka.DecodeEnvelope(r, env); err != nil {
					t.Errorf("%s/%d@%d: %v", topic, p, r.Offset, err)
					continue
				}
				envs = append(envs, env.CloneVT())
			}
			if stop(envs) {
				cancel()
			}
			return nil
		})
	if err != nil {
		t.Fatalf("consume %s/%d: %v", topic, p, err)
	}
	if !stop(envs) {
		t.Fatalf("%s/%d: only %d records within %v: %v", topic, p, len(envs), testTimeout, envs)
	}
	return envs
}
