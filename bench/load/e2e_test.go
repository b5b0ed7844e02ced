package load_test

import (
	"context"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/bench/load"
	"github.com/shoal-mqtt/shoal/compose/broker/brokertest"
	"github.com/shoal-mqtt/shoal/compose/config"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

// startShoal runs `shoal all` in this process on loopback ports (no
// WebSocket listener) and stops it when the test ends.
func startShoal(t *testing.T) string {
	t.Helper()
	b := brokertest.Start(t, func(c *config.Config) { c.Gateway.WSListen = "" })
	return b.Addr("mqtt").String()
}

// TestRunAgainstShoal drives each kind of scenario briefly against an
// in-process Shoal and checks that every message is accounted for.
func TestRunAgainstShoal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker: skipped with -short")
	}
	addr := startShoal(t)
	base := load.DefaultConfig()
	base.Addr = addr
	base.Warmup = 200 * time.Millisecond
	base.Duration = 800 * time.Millisecond
	base.Drain = 5 * time.Second
	base.SetupTimeout = 20 * time.Second
	base.BrokerPID = 0

	cases := []struct {
		name string
		mut  func(*load.Config)
	}{
		{"pairs QoS 1 at a fixed rate", func(c *load.Config) {
			c.Scenario, c.Clients, c.QoS, c.Rate = load.ScenarioPairs, 3, 1, 300
			c.Processes = []load.Process{{Name: "shoal", PID: os.Getpid()}} // the broker runs in this process
		}},
		{"pairs QoS 2, 3.1.1, windowed", func(c *load.Config) {
			c.Scenario, c.Clients, c.QoS, c.Window, c.Version = load.ScenarioPairs, 2, 2, 20, packet.V311
		}},
		{"fan-out QoS 0", func(c *load.Config) {
			c.Scenario, c.Clients, c.Rate = load.ScenarioFanout, 5, 100
		}},
		{"wildcards QoS 0", func(c *load.Config) {
			c.Scenario, c.Clients, c.Publishers, c.Rate = load.ScenarioWildcards, 10, 5, 200
		}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := base
			cfg.Prefix = "e2e" + string(rune('a'+i)) // fresh clients and topics per case
			c.mut(&cfg)
			var window time.Duration
			cfg.OnMeasure = func(d time.Duration) { window = d }
			res, err := load.Run(context.Background(), cfg, io.Discard)
			if window != cfg.Duration {
				t.Errorf("OnMeasure got %s, want the measured window %s", window, cfg.Duration)
			}
			if err != nil {
				t.Fatalf("run: %v (errors %v)", err, res.Errors)
			}
			if res.Sent == 0 || res.Expected == 0 {
				t.Fatalf("nothing sent: %+v", res)
			}
			if res.Unique != res.Expected || res.Lost != 0 || res.Tail != 0 || res.Foreign != 0 || res.Malformed != 0 {
				t.Errorf("sent %d, expected %d deliveries: unique %d, lost %d, tail %d, foreign %d, malformed %d (errors %v)",
					res.Sent, res.Expected, res.Unique, res.Lost, res.Tail, res.Foreign, res.Malformed, res.Errors)
			}
			if res.Latency == nil || res.Latency.Count == 0 || res.Measured.Deliveries == 0 {
				t.Errorf("no measured deliveries: %+v", res.Measured)
			}
			if len(res.Series) == 0 {
				t.Error("no throughput series")
			}
			if res.LoadAvg == nil {
				t.Error("no load average")
			}
			if len(res.Processes) != len(cfg.Processes) {
				t.Fatalf("%d processes measured, want %d", len(res.Processes), len(cfg.Processes))
			}
			for i, p := range res.Processes {
				if p.Name != cfg.Processes[i].Name || p.PID != cfg.Processes[i].PID || p.CPUSeconds <= 0 || p.RSSEnd == 0 {
					t.Errorf("process %d: %+v, want %s with CPU time and RSS", i, p, cfg.Processes[i].Name)
				}
			}
		})
	}
	t.Run("subscribers at another address", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := ln.Addr().String()
		_ = ln.Close() // nothing listens there now
		cfg := base
		cfg.Prefix = "e2ed"
		cfg.Scenario, cfg.Clients, cfg.Rate = load.ScenarioPairs, 2, 100
		cfg.SubscriberAddr = closed
		cfg.SetupTimeout = 2 * time.Second
		_, err = load.Run(context.Background(), cfg, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "subscribers failed") {
			t.Errorf("run with subscribers at %s (closed): %v, want the subscribers' set-up to fail", closed, err)
		}
		cfg.SubscriberAddr = addr
		res, err := load.Run(context.Background(), cfg, io.Discard)
		if err != nil || res.Unique != res.Expected || res.SubscriberAddr != addr {
			t.Errorf("run with subscribers at %s: %v, %d of %d delivered, recorded %q", addr, err, res.Unique, res.Expected, res.SubscriberAddr)
		}
	})
	t.Run("connections", func(t *testing.T) {
		cfg := base
		cfg.Prefix = "e2ec"
		cfg.Scenario, cfg.Clients = load.ScenarioConnections, 30
		res, err := load.Run(context.Background(), cfg, io.Discard)
		if err != nil {
			t.Fatalf("run: %v (errors %v)", err, res.Errors)
		}
		if c := res.Connect; c == nil || c.Connected != 30 || c.AliveAtEnd != 30 || c.Latency == nil || c.PerSec <= 0 {
			t.Errorf("connect stats %+v", res.Connect)
		}
	})
}
