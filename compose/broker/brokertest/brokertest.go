package brokertest

import (
	"context"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/compose/broker"
	"github.com/shoal-mqtt/shoal/compose/config"
	"github.com/shoal-mqtt/shoal/compose/telemetry"
	"github.com/shoal-mqtt/shoal/internal/testutil/testlog"
)

// Start runs every role of `shoal all` on the embedded backbone with the
// test defaults (loopback listeners on free ports, 4 partitions, no $SYS
// publishing), changed by mut, and returns once the broker is ready. The
// broker is stopped when the test ends; an error from its Run, or a stop
// that takes over 20 s, fails the test.
func Start(t testing.TB, mut ...func(*config.Config)) *broker.Broker {
	t.Helper()
	b, _ := Run(t, mut...)
	return b
}

// Run is Start that also returns stop, which stops the broker and waits
// for it (failing the test on an error from its Run or a stop that takes
// over 20 s); the test's end calls it too, and a second call does nothing.
func Run(t testing.TB, mut ...func(*config.Config)) (b *broker.Broker, stop func()) {
	t.Helper()
	return RunTelemetry(t, nil, mut...)
}

// RunTelemetry is Run with the broker reporting through tel (nil: the
// configuration's), for tests that read spans and metrics from the SDK's
// in-memory exporters. The test shuts tel down.
func RunTelemetry(t testing.TB, tel *telemetry.Telemetry, mut ...func(*config.Config)) (b *broker.Broker, stop func()) {
	t.Helper()
	var opts []broker.Option
	if tel != nil {
		opts = append(opts, broker.WithTelemetry(tel))
	}
	return RunWith(t, opts, mut...)
}

// RunWith is Run with the broker made with opts (broker.WithAdminUI: the
// console's tests).
func RunWith(t testing.TB, opts []broker.Option, mut ...func(*config.Config)) (b *broker.Broker, stop func()) {
	t.Helper()
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.HTTPListen = "127.0.0.1:0"
	cfg.Admin.Listen = "127.0.0.1:0"
	cfg.Gateway.MQTTListen = "127.0.0.1:0"
	cfg.Gateway.WSListen = "127.0.0.1:0"
	cfg.Kafka.Partitions = 4
	cfg.Gateway.SysInterval = 0
	// SHOAL_KAFKA_LOCAL_DELIVERY=false runs a suite with every record
	// going through a fetch (`make unit` runs the broker's suite both
	// ways); a test's own mut still decides.
	if v, ok := os.LookupEnv("SHOAL_KAFKA_LOCAL_DELIVERY"); ok {
		local, err := strconv.ParseBool(v)
		if err != nil {
			t.Fatalf("SHOAL_KAFKA_LOCAL_DELIVERY: %v", err)
		}
		cfg.Kafka.LocalDelivery = local
	}
	for _, m := range mut {
		m(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	b = broker.New(cfg, testlog.New(t), "test", opts...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for !b.Ready() {
		select {
		case err := <-done:
			cancel()
			t.Fatalf("broker stopped before ready: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatal("broker not ready after 30s")
		}
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("broker run: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Error("broker did not stop within 20s")
			}
		})
	}
	t.Cleanup(stop)
	return b, stop
}
