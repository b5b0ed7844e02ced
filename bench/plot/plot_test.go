package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeResult(t *testing.T, dir, file string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, file), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func fake(label string, round int, dps float64) map[string]any {
	return map[string]any{
		"name": "pairs-qos0", "label": label, "round": round, "scenario": "pairs",
		"measured":   map[string]any{"deliveries_per_s": dps},
		"latency_us": map[string]any{"cdf": []map[string]float64{{"p": 0, "us": 50}, {"p": 90, "us": 80}, {"p": 99, "us": 300}, {"p": 100, "us": 900}}},
		"series":     []map[string]any{{"t": 1, "phase": "warmup", "received": dps}, {"t": 2, "phase": "measure", "received": dps * 1.1}},
	}
}

func TestRunWritesPNGs(t *testing.T) {
	dir := t.TempDir()
	writeResult(t, dir, "a1.json", fake("shoal", 1, 100))
	writeResult(t, dir, "a2.json", fake("shoal", 2, 300))
	writeResult(t, dir, "a3.json", fake("shoal", 3, 200))
	writeResult(t, dir, "b1.json", fake("mosquitto", 1, 400))
	writeResult(t, dir, "c.json", map[string]any{"name": "connections", "label": "shoal", "scenario": "connections"})
	writeResult(t, dir, "other.json", map[string]any{"x": 1})
	var out, errb bytes.Buffer
	if code := run([]string{"-dir", dir}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, f := range []string{"pairs-qos0-latency.png", "pairs-qos0-throughput.png"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) || len(b) < 1000 {
			t.Errorf("%s is not a PNG image (%d bytes)", f, len(b))
		}
	}
	if strings.Contains(out.String(), "connections") {
		t.Errorf("a chart was drawn for the connections scenario: %s", out.String())
	}
}

func TestRepresentativeIsMedianRound(t *testing.T) {
	runs := []*result{{Round: 1}, {Round: 2}, {Round: 3}}
	for i, dps := range []float64{100, 300, 200} {
		runs[i].Measured.DeliveriesPerSec = dps
	}
	if got := representative(runs); got.Round != 3 {
		t.Errorf("representative round %d, want 3 (the median, 200/s)", got.Round)
	}
	if representative(nil) != nil {
		t.Error("representative of no runs")
	}
}

func TestNines(t *testing.T) {
	for p, want := range map[float64]float64{0: 0, 90: 1, 99: 2, 99.9: 3} {
		if got := nines(p); math.Abs(got-want) > 1e-9 {
			t.Errorf("nines(%g) = %g, want %g", p, got, want)
		}
	}
	ticks := ninesTicks{}.Ticks(0, 5.2)
	var labels []string
	for _, tk := range ticks {
		labels = append(labels, tk.Label)
	}
	if strings.Join(labels, " ") != "0% 90% 99% 99.9% 99.99% 99.999%" {
		t.Errorf("tick labels %v", labels)
	}
}

func TestRunNeedsDir(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(nil, &out, &errb); code != 2 {
		t.Errorf("exit %d without -dir, want 2", code)
	}
}
