package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
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
		opt.warmup != 3*time.Second || opt.duration != 10*time.Second || opt.prime != 10*time.Second || opt.c1Only ||
		opt.scenario != scenLatency || opt.window != 100 {
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
		{"-payload", "8"}, {"-prime", "-1s"}, {"stray"},
		{"-topologies", "one-gateway,one-gateway"}, {"-scenario", "fanout"}, {"-window", "0"},
		{"-scenario", "pairs", "-rate", "5000"}} {
		if _, err := parse(bad, &stderr, day); err == nil {
			t.Errorf("parse(%v): no error", bad)
		}
	}
}

// TestParseCluster: the cluster topology runs last or not at all, on a
// backbone of its own whose start the timeout allows for.
func TestParseCluster(t *testing.T) {
	var stderr bytes.Buffer
	for _, bad := range []string{"cluster,one-gateway", "two-gateways,cluster,one-gateway", "cluster,cluster"} {
		_, err := parse([]string{"-topologies", bad}, &stderr, day)
		if err == nil || !strings.Contains(err.Error(), "cluster") {
			t.Errorf("parse(-topologies %s): %v, want an error about the cluster", bad, err)
		}
	}
	two, err := parse([]string{"-topologies", "two-gateways", "-scenario", "pairs"}, &stderr, day)
	if err != nil {
		t.Fatal(err)
	}
	opt, err := parse([]string{"-topologies", " two-gateways, cluster", "-scenario", "pairs"}, &stderr, day)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(opt.topologies, []string{topoTwo, topoCluster}) || opt.scenario != scenPairs {
		t.Errorf("topologies %v, scenario %q", opt.topologies, opt.scenario)
	}
	// Two topologies' runs and primes, plus the cluster's backbone.
	cfg := opt.loadConfig(topoCluster, 0, 1)
	if want := two.timeout + time.Duration(len(two.qos)*two.rounds)*(cfg.Deadline()+opt.pause) +
		cfg.Deadline() - opt.duration + opt.prime + clusterStartBound; opt.timeout != want {
		t.Errorf("timeout %s, want %s", opt.timeout, want)
	}
	if backboneNodes(topoTwo) != 1 || backboneNodes(topoOne) != 1 || backboneNodes(topoCluster) != 3 {
		t.Error("backbone sizes")
	}
	if l := topoLayout(topoCluster); l != (layout{sessions: 2, routers: 2, gateways: 3}) {
		t.Errorf("cluster layout %+v", l)
	}
	if got := (&backbone{nodes: 1}).replicationArgs(); got != nil {
		t.Errorf("one node: replication flags %v", got)
	}
	want := []string{"--kafka-replication-factor", "3", "--cql-replication-factor", "3"}
	if got := (&backbone{nodes: 3}).replicationArgs(); !slices.Equal(got, want) {
		t.Errorf("three nodes: replication flags %v, want %v", got, want)
	}
}

func TestPairsConfig(t *testing.T) {
	var stderr bytes.Buffer
	opt, err := parse([]string{"-scenario", "pairs", "-window", "40", "-inflight", "32", "-topologies", "cluster"}, &stderr, day)
	if err != nil {
		t.Fatal(err)
	}
	q0, q1 := opt.loadConfig(topoCluster, 0, 1), opt.loadConfig(topoCluster, 1, 2)
	if q0.Scenario != load.ScenarioPairs || q0.Rate != 0 || q0.Window != 40 || q0.Name != "pairs-qos0" || q0.Label != topoCluster {
		t.Errorf("QoS 0 config %+v", q0)
	}
	if q1.Rate != 0 || q1.Window != 0 || q1.Inflight != 32 || q1.Name != "pairs-qos1" {
		t.Errorf("QoS 1 config %+v", q1)
	}
	if !strings.HasPrefix(q1.Prefix, "bench-cl-") {
		t.Errorf("prefix %q", q1.Prefix)
	}
	if got := resultFile(topoCluster, q1.Name, 2); got != "cluster-pairs-qos1-r2.json" {
		t.Errorf("result file %q", got)
	}
}

// TestOldResults: every result file a run writes is removed by the next
// one, and nothing else is.
func TestOldResults(t *testing.T) {
	dir := t.TempDir()
	results := []string{resultFile(topoOne, "latency-qos0", 1), resultFile(topoCluster, "pairs-qos1", 3),
		resultFile(topoTwo, "connections-new", 2)}
	for _, f := range append([]string{"README.md", "notes.json"}, results...) {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old, err := oldResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range old {
		old[i] = filepath.Base(f)
	}
	slices.Sort(old)
	slices.Sort(results)
	if !slices.Equal(old, results) {
		t.Errorf("old results %v, want %v", old, results)
	}
}

// TestGatewayAddrs: with three gateways, pair i's publisher and subscriber
// are on different gateways (the generator takes address i mod n).
func TestGatewayAddrs(t *testing.T) {
	gws := []*proc{{mqtt: "a:1"}, {mqtt: "b:2"}, {mqtt: "c:3"}}
	for _, c := range []struct {
		n        int
		pub, sub string
	}{{1, "a:1", ""}, {2, "a:1", "b:2"}, {3, "a:1,b:2,c:3", "b:2,c:3,a:1"}} {
		pub, sub := gatewayAddrs(gws[:c.n])
		if pub != c.pub || sub != c.sub {
			t.Errorf("%d gateways: publishers at %q, subscribers at %q; want %q, %q", c.n, pub, sub, c.pub, c.sub)
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

// pairsResult is a pairs run of topo: gateways, routers and session
// services at 20, 30 and 10 % each (CPU-seconds over a 10 s window), the
// JVMs at 50 % each.
func pairsResult(topo string, round int, perSec float64) *load.Result {
	l, nodes := topoLayout(topo), backboneNodes(topo)
	r := &load.Result{Name: "pairs-qos1", Label: topo, Round: round, Scenario: load.ScenarioPairs,
		Latency:   &load.LatencySummary{Count: 100, P50: 2000, P99: 9000},
		Measured:  load.Window{Seconds: 10, Deliveries: uint64(10 * perSec), DeliveriesPerSec: perSec, SentPerSec: perSec},
		Generator: &load.ProcUsage{CPUPercent: 40},
	}
	add := func(kind string, n int, pct float64) {
		for i := range n {
			r.Processes = append(r.Processes, load.ProcUsage{Name: roleName(kind, i, n), CPUPercent: pct, CPUSeconds: pct / 10, RSSEnd: 100 << 20})
		}
	}
	add("gateway", l.gateways, 20)
	add("router", l.routers, 30)
	add("session", l.sessions, 10)
	if nodes == 1 {
		add("kafka", 1, 50)
		add("cassandra", 1, 50)
	} else {
		add("kafka", nodes, 50)
		add("cassandra", nodes, 50)
	}
	return r
}

func TestPairsTables(t *testing.T) {
	results := []*load.Result{
		pairsResult(topoTwo, 1, 30000), pairsResult(topoTwo, 2, 32000), pairsResult(topoTwo, 3, 10000),
		pairsResult(topoCluster, 1, 3000), pairsResult(topoCluster, 2, 2000), pairsResult(topoCluster, 3, 8000),
	}
	var b bytes.Buffer
	writeSummary(&b, scenPairs, results)
	out := b.String()
	for _, want := range []string{
		"| topology | scenario | delivered msg/s | vs two-gateways | per Shoal CPU-second |",
		// Two gateways: 2×20 + 30 + 10 = 80 % of Shoal, 4 CPU-seconds per 10 s.
		"| two-gateways | pairs-qos1 | 30000 (10000–32000) | 1.00 | 37500 | 16667 | 2.00 | 9.00 | 0 | 0 |",
		// The cluster: 3×20 + 2×30 + 2×10 = 140 %; the six JVMs add 300.
		"| cluster | pairs-qos1 | 3000 (2000–8000) | 0.10 | 2143 | 682 |",
		"| topology | scenario | gateway | router | session | kafka | cassandra | Shoal | all | generator |",
		"| two-gateways | pairs-qos1 | 40 | 30 | 10 | 50 | 50 | 80 | 180 | 40 |",
		"| cluster | pairs-qos1 | 60 | 60 | 20 | 150 | 150 | 140 | 440 | 40 |",
		"| cluster | pairs-qos1 | 300 | 200 | 200 | 300 | 300 | 700 | 1300 |",
		"| cluster | pairs-qos1 | 2 | 2000 | 2000 | 1429 | 0 | 0 | 60 / 60 / 20 / 150 / 150 / 40 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("tables lack %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Target") {
		t.Errorf("the pairs tables judge a latency target:\n%s", out)
	}
	var line bytes.Buffer
	writeRunLine(&line, results[3])
	if want := "cluster pairs-qos1 round 1: 3000 deliveries/s (3000 sent/s), 2143 per Shoal CPU-second,"; !strings.HasPrefix(line.String(), want) {
		t.Errorf("run line %q, want it to start %q", line.String(), want)
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

	opt, err = parse([]string{"-scenario", "pairs", "-topologies", "two-gateways,cluster"}, &stderr, day)
	if err != nil {
		t.Fatal(err)
	}
	m = machineInfo(opt)
	m.backbones = []backboneStart{{nodes: 1, took: 41 * time.Second}, {nodes: 3, took: 97 * time.Second}}
	if err := writeReadme(path, m, []*load.Result{pairsResult(topoTwo, 1, 30000), pairsResult(topoCluster, 1, 3000)}); err != nil {
		t.Fatal(err)
	}
	if b, err = os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"the pairs scenario", "an end-to-end window of 100 messages", "one Kafka broker and one Cassandra node (the configuration's replication factors, 1): up after 41s",
		"3 Kafka brokers", "ring of 3 (512 MiB heaps", "up after 1m37s", "`cluster`: 2 session services, 2 routers and 3 gateways", "| cluster | pairs-qos1 | 3000 | 0.10 |"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("README lacks %q:\n%s", want, b)
		}
	}
	if strings.Contains(string(b), "Target") {
		t.Errorf("the pairs README judges a latency target:\n%s", b)
	}
}

func TestOutsideTables(t *testing.T) {
	dir := t.TempDir()
	rounds := []outsideRound{
		{Round: 1, Sent: 100000, Received: 100000, P50: 9.73, P90: 18.1, P99: 30.4, P999: 41.6, Max: 45.8, GeneratorCPU: 19,
			CPUPercent: map[string]float64{"gateway": 20, "router": 14, "session": 10, "kafka": 93, "cassandra": 16}, Since: 17},
		{Round: 2, Sent: 100000, Received: 99990, P50: 3.26, P99: 12.4, Since: 31},
	}
	b, err := json.Marshal(rounds)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, topoTwo+outsideSuffix), b, 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	writeOutsideTables(&out, dir)
	for _, want := range []string{"### `two-gateways`, measured by the outside generator", "| 1 | 17 s | 9.73 | 18.10 | 30.4 | 41.6 | 45.8 | 100000 of 100000 | 44, 93, 16, 19 |", "| 2 | 31 s | 3.26 |", "99990 of 100000"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("outside table without %q:\n%s", want, out.String())
		}
	}
	var none bytes.Buffer
	writeOutsideTables(&none, t.TempDir())
	if none.Len() != 0 {
		t.Errorf("no outside rounds, yet: %q", none.String())
	}
}
