package load

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

// TestRunBoundedWhenBrokerSilent: a "broker" that accepts connections and
// never answers must not hang the run: set-up fails within its timeout.
func TestRunBoundedWhenBrokerSilent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c) }() // read everything, answer nothing
		}
	}()
	cfg := DefaultConfig()
	cfg.Addr = ln.Addr().String()
	cfg.Clients = 3
	cfg.SetupTimeout = 300 * time.Millisecond
	cfg.Duration = time.Second
	start := time.Now()
	_, err = Run(context.Background(), cfg, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "subscribers failed") {
		t.Errorf("Run against a silent broker: err = %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Run took %s against a silent broker, want about the set-up timeout", d)
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		mut  func(*Config)
		want string
	}{
		{func(c *Config) { c.Payload = 15 }, "payload: 15 bytes"},
		{func(c *Config) { c.QoS = 3 }, "qos: 3"},
		{func(c *Config) { c.Version = packet.V31 }, "protocol"},
		{func(c *Config) { c.Duration = 0 }, "duration"},
		{func(c *Config) { c.Inflight = 0 }, "inflight"},
		{func(c *Config) { c.Window = -1 }, "window"},
		{func(c *Config) { c.Scenario = "x" }, "unknown scenario"},
		{func(c *Config) { c.Rate = -1 }, "rate"},
		{func(c *Config) { c.Processes = []Process{{Name: "kafka"}} }, "processes[0]"},
		{func(c *Config) { c.Addr = "" }, "addr: empty"},
		{func(c *Config) { c.Addr = "127.0.0.1:1883,,127.0.0.1:1884" }, "addr: \"127.0.0.1:1883,,127.0.0.1:1884\": address 2"},
		{func(c *Config) { c.SubscriberAddr = "127.0.0.1:1883, " }, "sub-addr:"},
		{func(c *Config) { c.SessionExpiry = 1500 * time.Millisecond }, "session-expiry: 1.5s"},
		{func(c *Config) { c.SessionExpiry, c.Version = time.Minute, packet.V311 }, "needs MQTT 5"},
		{func(c *Config) { c.Resume = true }, "resume, keep-sessions"},
		{func(c *Config) { c.Scenario, c.QoS = ScenarioOffline, 1 }, "scenario offline: needs persistent sessions"},
		{func(c *Config) { c.Scenario, c.SessionExpiry = ScenarioOffline, time.Minute }, "needs QoS 1 or 2"},
		{func(c *Config) { c.Scenario, c.SessionExpiry, c.QoS, c.Queued = ScenarioOffline, time.Minute, 1, 0 }, "queued: 0"},
		{func(c *Config) { c.Scenario, c.SessionExpiry, c.QoS, c.Window = ScenarioOffline, time.Minute, 1, 10 }, "no end-to-end window"},
	}
	for _, c := range cases {
		cfg := DefaultConfig()
		c.mut(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate: err = %v, want it to mention %q", err, c.want)
		}
	}
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}
