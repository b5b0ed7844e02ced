package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoal-mqtt/shoal/bench/load"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

func TestParse(t *testing.T) {
	var stderr bytes.Buffer
	cfg, opt, err := parse([]string{"-scenario", "fanout", "-clients", "7", "-qos", "2", "-protocol", "3.1.1",
		"-rate", "50", "-window", "10", "-out", "x.json", "-proc", "kafka=12", "-proc", "router=34"}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Scenario != load.ScenarioFanout || cfg.Clients != 7 || cfg.QoS != 2 || cfg.Version != packet.V311 ||
		cfg.Rate != 50 || cfg.Window != 10 || opt.out != "x.json" ||
		len(cfg.Processes) != 2 || cfg.Processes[1] != (load.Process{Name: "router", PID: 34}) {
		t.Errorf("parsed %+v, %+v", cfg, opt)
	}
	for _, bad := range [][]string{{"-qos", "3"}, {"-protocol", "3"}, {"-payload", "8"}, {"-scenario", "nope"}, {"stray"}, {"-proc", "kafka"}, {"-proc", "=3"}, {"-proc", "x=0"}} {
		if _, _, err := parse(bad, &stderr); err == nil {
			t.Errorf("parse(%v): no error", bad)
		}
	}
}

func TestRunRefusesBadFlags(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"-qos", "5"}, &stdout, &stderr); code != 2 {
		t.Errorf("exit %d, want 2; stderr %q", code, stderr.String())
	}
}

func TestReport(t *testing.T) {
	dir := t.TempDir()
	for i, label := range []string{"shoal", "mosquitto"} {
		r := load.Result{Name: "pairs-qos0", Label: label, Round: 1, Scenario: load.ScenarioPairs, Started: "t",
			Measured: load.Window{DeliveriesPerSec: float64(100 * (i + 1))}}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, label+".json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	md := filepath.Join(dir, "tables.md")
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"report", "-dir", dir, "-md", md}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "deliveries/s") || !strings.Contains(stdout.String(), "0.50") {
		t.Errorf("report:\n%s", stdout.String())
	}
	b, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "| pairs-qos0 | deliveries/s | 100 | 200 | 0.50 |") {
		t.Errorf("markdown:\n%s", b)
	}
}
