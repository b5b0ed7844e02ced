package load_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
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
	t.Run("connections with subscriptions", func(t *testing.T) {
		cfg := base
		cfg.Prefix = "e2es"
		cfg.Scenario, cfg.Clients, cfg.Subscriptions, cfg.WildcardFilters, cfg.QoS = load.ScenarioConnections, 10, 5, true, 1
		var stages []string
		cfg.OnStage = func(s string) { stages = append(stages, s) }
		res, err := load.Run(context.Background(), cfg, io.Discard)
		if err != nil {
			t.Fatalf("run: %v (errors %v)", err, res.Errors)
		}
		if c := res.Connect; c == nil || c.Connected != 10 || c.AliveAtEnd != 10 || c.Subscribed != 50 || c.SubscribeLatency == nil || c.SubscribeLatency.Count != 50 {
			t.Errorf("connect stats %+v", res.Connect)
		}
		if want := []string{"subscribe", "hold"}; !slices.Equal(stages, want) {
			t.Errorf("stages %v, want %v", stages, want)
		}
	})
	// Persistent sessions: kept by one run, taken up by the next, which
	// ends them, so a third finds none.
	t.Run("persistent sessions kept, resumed, ended", func(t *testing.T) {
		for _, step := range []struct {
			resume, keep bool
			present      int
		}{{false, true, 0}, {true, false, 20}, {true, false, 0}} {
			// A DISCONNECT has no answer: the broker applies it after the
			// client closed, so a CONNECT right behind it can still find
			// the session it ended. Give the broker a moment.
			time.Sleep(time.Second)
			cfg := base
			cfg.Prefix = "e2ek"
			cfg.Scenario, cfg.Clients = load.ScenarioConnections, 20
			cfg.SessionExpiry, cfg.Resume, cfg.KeepSessions = time.Minute, step.resume, step.keep
			res, err := load.Run(context.Background(), cfg, io.Discard)
			if err != nil {
				t.Fatalf("run (resume %v, keep %v): %v (errors %v)", step.resume, step.keep, err, res.Errors)
			}
			if c := res.Connect; c == nil || c.Connected != 20 || c.SessionPresent != step.present {
				t.Errorf("run (resume %v, keep %v): connect stats %+v, want %d sessions present", step.resume, step.keep, res.Connect, step.present)
			}
		}
	})
	t.Run("pairs QoS 1 between persistent sessions", func(t *testing.T) {
		cfg := base
		cfg.Prefix = "e2ep"
		cfg.Scenario, cfg.Clients, cfg.QoS, cfg.Rate = load.ScenarioPairs, 3, 1, 300
		cfg.SessionExpiry = time.Minute
		res, err := load.Run(context.Background(), cfg, io.Discard)
		if err != nil {
			t.Fatalf("run: %v (errors %v)", err, res.Errors)
		}
		if res.Sent == 0 || res.Unique != res.Expected || res.Lost != 0 || res.Tail != 0 {
			t.Errorf("sent %d, expected %d: unique %d, lost %d, tail %d (errors %v)", res.Sent, res.Expected, res.Unique, res.Lost, res.Tail, res.Errors)
		}
	})
	t.Run("offline", func(t *testing.T) {
		cfg := base
		cfg.Prefix = "e2eo"
		cfg.Scenario, cfg.Clients, cfg.QoS, cfg.Queued = load.ScenarioOffline, 3, 1, 40
		cfg.SessionExpiry = time.Minute
		cfg.BrokerPID = os.Getpid()
		var stages []string
		cfg.OnStage = func(s string) { stages = append(stages, s) }
		res, err := load.Run(context.Background(), cfg, io.Discard)
		if err != nil {
			t.Fatalf("run: %v (errors %v)", err, res.Errors)
		}
		if want := []string{"queue", "deliver", "end"}; !slices.Equal(stages, want) {
			t.Errorf("stages %v, want %v", stages, want)
		}
		o := res.Offline
		if o == nil || o.Sessions != 3 || o.Queued != 120 || o.Unacked != 0 || o.Resumed != 3 || o.Delivered != 120 ||
			o.FirstDelivery == nil || o.FirstDelivery.Count != 3 || o.DeliveredPerSec <= 0 || o.BrokerCPUQueueUs+o.BrokerCPUDeliverUs <= 0 || o.BrokerCPUQueueUs < 0 || o.BrokerCPUDeliverUs < 0 {
			t.Errorf("offline stats %+v", o)
		}
		if res.Sent != 120 || res.Unique != 120 || res.Lost != 0 || res.Tail != 0 || res.Foreign != 0 || len(res.Errors) != 0 {
			t.Errorf("sent %d: unique %d, lost %d, tail %d, foreign %d (errors %v)", res.Sent, res.Unique, res.Lost, res.Tail, res.Foreign, res.Errors)
		}
	})
}

// TestClientsSpreadOverAddrs runs pairs through three proxies in front of
// one Shoal, publishers given the list p0,p1,p2 and subscribers p1,p2,p0:
// client i must come through the list's address i mod 3 (every pair split
// over two proxies), and every message must arrive.
func TestClientsSpreadOverAddrs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker: skipped with -short")
	}
	upstream := startShoal(t)
	proxies := make([]*idProxy, 3)
	for i := range proxies {
		proxies[i] = startIDProxy(t, upstream)
	}
	cfg := load.DefaultConfig()
	cfg.Addr = strings.Join([]string{proxies[0].addr, proxies[1].addr, proxies[2].addr}, ",")
	cfg.SubscriberAddr = strings.Join([]string{proxies[1].addr, proxies[2].addr, proxies[0].addr}, ", ")
	cfg.Scenario, cfg.Clients, cfg.QoS, cfg.Rate = load.ScenarioPairs, 6, 1, 300
	cfg.Prefix = "spread"
	cfg.Warmup, cfg.Duration, cfg.Drain = 200*time.Millisecond, 500*time.Millisecond, 5*time.Second
	cfg.SetupTimeout = 20 * time.Second
	res, err := load.Run(context.Background(), cfg, io.Discard)
	if err != nil {
		t.Fatalf("run: %v (errors %v)", err, res.Errors)
	}
	if res.Sent == 0 || res.Unique != res.Expected || res.Lost != 0 || res.Tail != 0 {
		t.Errorf("sent %d, expected %d deliveries: unique %d, lost %d, tail %d (errors %v)",
			res.Sent, res.Expected, res.Unique, res.Lost, res.Tail, res.Errors)
	}
	for k, p := range proxies {
		var want []string
		for i := range cfg.Clients {
			if i%3 == k {
				want = append(want, fmt.Sprintf("spread-p-%d", i))
			}
			if (i+1)%3 == k {
				want = append(want, fmt.Sprintf("spread-s-%d", i))
			}
		}
		slices.Sort(want)
		if got := p.clientIDs(); !slices.Equal(got, want) {
			t.Errorf("proxy %d (%s) carried %v, want %v", k, p.addr, got, want)
		}
	}
}

// idProxy forwards every connection to a broker and records the client
// identifier of each CONNECT it carried.
type idProxy struct {
	addr string
	mu   sync.Mutex
	ids  []string
}

// startIDProxy listens on loopback in front of upstream until t ends.
func startIDProxy(t *testing.T, upstream string) *idProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &idProxy{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { p.forward(nc, upstream) })
		}
	})
	return p
}

// forward reads the client's CONNECT, records its identifier, passes it on
// and then copies both ways until either side closes. The client sends
// nothing else before its CONNACK, so the reader holds nothing more.
func (p *idProxy) forward(nc net.Conn, upstream string) {
	defer func() { _ = nc.Close() }()
	h, body, err := packet.NewReader(nc, 4<<10).ReadPacket()
	if err != nil || h.Type != packet.CONNECT {
		return
	}
	var c packet.Connect
	if c.Decode(h, body, packet.V5) != nil {
		return
	}
	up, err := net.Dial("tcp", upstream)
	if err != nil {
		return
	}
	defer func() { _ = up.Close() }()
	p.mu.Lock()
	p.ids = append(p.ids, string(c.ClientID))
	p.mu.Unlock()
	if _, err := up.Write(c.Append(nil, c.Version)); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, nc); done <- struct{}{} }()
	go func() { _, _ = io.Copy(nc, up); done <- struct{}{} }()
	<-done // one side closed: closing both ends the other copy
}

// clientIDs returns the identifiers recorded, sorted.
func (p *idProxy) clientIDs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Sorted(slices.Values(p.ids))
}
