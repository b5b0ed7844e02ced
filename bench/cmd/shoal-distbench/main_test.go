package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/bench/load"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

var day = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func TestParseDefaults(t *testing.T) {
	var stderr bytes.Buffer
	opt, err := parse(nil, &stderr, day)
	if err != nil {
		t.Fatal(err)
	}
	if opt.out != filepath.Join("bench", "results", "2026-11-23-distributed") {
		t.Errorf("out %q", opt.out)
	}
	if len(opt.topologies) != 2 || len(opt.qos) != 2 || opt.rounds != 3 || opt.clients != 50 || opt.rate != 10000 ||
		opt.warmup != 3*time.Second || opt.duration != 10*time.Second || opt.prime != 10*time.Second || opt.c1Only {
		t.Errorf("defaults %+v", opt)
	}
	// 12 runs of at most a minute and a half each, plus the start.
	if opt.timeout < startBound+12*opt.duration || opt.timeout > time.Hour {
		t.Errorf("timeout %s", opt.timeout)
	}
}

func TestParseSmoke(t *testing.T) {
	var stderr bytes.Buffer
	opt, err := parse([]string{"-smoke", "-duration", "3s", "-qos", "1", "-topologies", "two-gateways"}, &stderr, day)
	if err != nil {
		t.Fatal(err)
	}
	if opt.rounds != 1 || opt.warmup != time.Second || opt.duration != 3*time.Second || opt.prime != 0 ||
		len(opt.qos) != 1 || opt.qos[0] != packet.QoS(1) || len(opt.topologies) != 1 || opt.topologies[0] != topoTwo {
		t.Errorf("smoke %+v", opt)
	}
	for _, bad := range [][]string{{"-qos", "3"}, {"-qos", ""}, {"-topologies", "three"}, {"-rounds", "0"},
		{"-payload", "8"}, {"-prime", "-1s"}, {"stray"}} {
		if _, err := parse(bad, &stderr, day); err == nil {
			t.Errorf("parse(%v): no error", bad)
		}
	}
}

func TestLoadConfig(t *testing.T) {
	var stderr bytes.Buffer
	opt, err := parse([]string{"-rate", "2000", "-clients", "5"}, &stderr, day)
	if err != nil {
		t.Fatal(err)
	}
	cfg := opt.loadConfig(topoTwo, 1, 2)
	if cfg.Scenario != load.ScenarioLatency || cfg.QoS != 1 || cfg.Rate != 2000 || cfg.Clients != 5 ||
		cfg.Name != "latency-qos1" || cfg.Label != topoTwo || cfg.Round != 2 {
		t.Errorf("config %+v", cfg)
	}
	// One tenant for every run, fresh clients per run.
	if !strings.HasPrefix(cfg.Prefix, "bench-") || cfg.Prefix == opt.loadConfig(topoTwo, 1, 3).Prefix ||
		cfg.Prefix == opt.loadConfig(topoOne, 1, 2).Prefix {
		t.Errorf("prefix %q", cfg.Prefix)
	}
}

func result(topo string, qos, round int, p50us, p99us float64, lost uint64) *load.Result {
	r := &load.Result{Name: "latency-qos" + string(rune('0'+qos)), Label: topo, Round: round,
		Latency:  &load.LatencySummary{Count: 100, P50: p50us, P99: p99us, P999: 2 * p99us, Max: 3 * p99us},
		Measured: load.Window{DeliveriesPerSec: 10000},
		Processes: []load.ProcUsage{{Name: "router", CPUPercent: 20}, {Name: "gateway-1", CPUPercent: 30},
			{Name: "kafka", CPUPercent: 50}},
		Generator: &load.ProcUsage{CPUPercent: 15},
		LoadAvg:   &load.LoadAvg{End: [3]float64{2.5, 2, 1}},
	}
	if topo == topoTwo {
		r.Processes = append(r.Processes, load.ProcUsage{Name: "gateway-2", CPUPercent: 25})
	}
	r.Lost = lost
	return r
}

func TestTables(t *testing.T) {
	results := []*load.Result{
		result(topoOne, 0, 1, 3000, 20000, 0),
		result(topoOne, 0, 2, 4000, 24000, 0),
		result(topoOne, 0, 3, 9000, 90000, 0),
		result(topoTwo, 1, 1, 6000, 20000, 0),
		result(topoTwo, 0, 1, 1000, 2000, 3),
	}
	var b bytes.Buffer
	writeTables(&b, results)
	out := b.String()
	for _, want := range []string{
		"| one-gateway | latency-qos0 | 4.00 (3.00–9.00) | 24.0 (20.0–90.0) |",
		"| met |",
		"| two-gateways | latency-qos1 | 6.00 | 20.0 |",
		"missed (p50)",
		"missed (loss)",
		"| topology | scenario | gateway-1 | gateway-2 | router | kafka | generator |",
		"| one-gateway | latency-qos0 | 30 | – | 20 | 50 | 15 | 2.50–2.50 |",
		"| two-gateways | latency-qos1 | 1 | 6.00 | 20.0 | 40.0 | 60.0 | 10000 | 0 | 0 | 30 / 25 / 20 / 50 / 15 | 2.50 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("tables lack %q:\n%s", want, out)
		}
	}
}

func TestReadme(t *testing.T) {
	path := filepath.Join(t.TempDir(), "README.md")
	var stderr bytes.Buffer
	opt, err := parse([]string{"-rounds", "1"}, &stderr, day)
	if err != nil {
		t.Fatal(err)
	}
	m := machineInfo(opt)
	m.shoalConfig = defaultShoalConfig
	if err := writeReadme(path, m, []*load.Result{result(topoOne, 0, 1, 3000, 20000, 0)}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"go run ./bench/cmd/shoal-distbench -rounds 1", "replication_factor: 1", "Kafka 4.3.1", "| met |"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("README lacks %q:\n%s", want, b)
		}
	}
}
