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

// root is the repository, where the measured files and docs/ are.
const root = "../../.."

// TestModelDocCurrent fails when docs/capacity.md's model is not what the
// committed measurements give: a new bench/*.json, or a change of the
// model, must come with `make capacity`.
func TestModelDocCurrent(t *testing.T) {
	out, err := model(root, defaultParams)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "docs", "capacity.md"))
	if err != nil {
		t.Fatal(err)
	}
	i, j, err := between(string(b))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b)[i:j]; got != out {
		t.Errorf("docs/capacity.md's model is stale: run make capacity\n--- in the doc\n%s\n--- the model\n%s", got, out)
	}
}

// synthetic are unit costs with round figures.
func synthetic() *costs {
	per := map[string]float64{"gateway": 10, "router": 5, "session": 10, "kafka": 10, "cassandra": 10}
	return &costs{
		perMessage:  map[string]map[string]float64{phasePersistent: per},
		perDelivery: map[string]float64{"gateway": 10},
		bytes:       map[string]float64{phasePersistent: 1000},
		payload:     map[string]int{phasePersistent: 100},
		payloadRecs: payloadRecords,
		resume:      map[string]float64{"gateway": 100, "session": 30, "kafka": 100, "cassandra": 100},
		heartbeat:   map[string]float64{},
		connMem:     map[string]float64{"gateway": 4096, "session": 1024, "router": 1024},
		subMem:      map[string]float64{},
		idle:        map[string]float64{},
	}
}

func TestSizeCountsCoresAndMemory(t *testing.T) {
	p := defaultParams
	// 1M msg/s × 10 µs = 10 gateway cores; a node offers 16 × 0.6 = 9.6.
	s := size(workload{Name: "w", Rate: 1e6, Payload: 100, Phase: phasePersistent}, synthetic(), p)
	if s.Nodes["gateway"] != 2 || s.Bound["gateway"] != "cpu" {
		t.Errorf("gateways: %d (%s), want 2 (cpu)", s.Nodes["gateway"], s.Bound["gateway"])
	}
	// Kafka's 10 cores times the replication factor, 30, take 4 nodes;
	// its 1,000 B a message, three replicas, 3 GB/s at 500 MB/s a node, 6.
	if s.Nodes["kafka"] != 6 || s.Bound["kafka"] != "write" || math.Abs(s.Cores["kafka"]-30) > 1e-9 {
		t.Errorf("kafka: %d nodes (%s), %.2f cores; want 6 (write), 30", s.Nodes["kafka"], s.Bound["kafka"], s.Cores["kafka"])
	}
	// 100M devices × 4 KiB = 381 GiB of gateways; a node offers 44.8.
	m := size(workload{Name: "m", Devices: 1e8, Rate: 1, Payload: 100, Phase: phasePersistent}, synthetic(), p)
	if m.Nodes["gateway"] != 9 || m.Bound["gateway"] != "memory" {
		t.Errorf("gateways: %d (%s), want 9 (memory)", m.Nodes["gateway"], m.Bound["gateway"])
	}
	// Each gateway needs a slot of shoal.deliveries.
	if m.Partitions < m.Nodes["gateway"] {
		t.Errorf("partitions %d below the gateways %d", m.Partitions, m.Nodes["gateway"])
	}
	// The least counts: two of each role, RF of each JVM.
	z := size(workload{Name: "z", Rate: 1, Payload: 100, Phase: phasePersistent}, synthetic(), p)
	for _, k := range kinds {
		want := p.MinShoal
		if jvms[k] {
			want = p.RF
		}
		if z.Nodes[k] != want || z.Bound[k] != "min" {
			t.Errorf("%s: %d (%s), want %d (min)", k, z.Nodes[k], z.Bound[k], want)
		}
	}
}

func TestSizeNeverShrinksWithLoad(t *testing.T) {
	c := synthetic()
	prev := map[string]int{}
	for _, n := range []float64{1e5, 1e6, 1e7, 1e8, 1e9} {
		s := size(workload{Name: "w", Devices: n, Rate: n / 60, Payload: 100, Phase: phasePersistent}, c, defaultParams)
		for _, k := range kinds {
			if s.Nodes[k] < prev[k] {
				t.Errorf("%g devices: %s %d, fewer than %d for fewer devices", n, k, s.Nodes[k], prev[k])
			}
			prev[k] = s.Nodes[k]
		}
		if s.ResumeS <= 0 || s.FleetResumeS < s.ResumeS {
			t.Errorf("%g devices: resume %.1f s, fleet %.1f s", n, s.ResumeS, s.FleetResumeS)
		}
	}
}

func TestSizeWriteBound(t *testing.T) {
	c := synthetic()
	c.perMessage[phasePersistent] = map[string]float64{}
	c.bytes[phasePersistent] = 10000
	// 1M msg/s × 10,000 B × 3 replicas = 30 GB/s: 60 nodes at 500 MB/s.
	s := size(workload{Name: "w", Rate: 1e6, Payload: 100, Phase: phasePersistent}, c, defaultParams)
	if s.Nodes["kafka"] != 60 || s.Bound["kafka"] != "write" {
		t.Errorf("kafka: %d (%s), want 60 (write)", s.Nodes["kafka"], s.Bound["kafka"])
	}
}

func TestReadInputsRefusesLostPhase(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{unitsPath, stormPath, ticksPath} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if f == unitsPath {
			var m struct {
				Units []map[string]any `json:"units"`
			}
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			for _, u := range m.Units {
				if u["name"] == phasePersistent {
					u["lost_or_undelivered"] = 3
				}
			}
			if b, err = json.Marshal(m); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.MkdirAll(filepath.Join(dir, "bench"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := readInputs(dir)
	if err == nil || !strings.Contains(err.Error(), phasePersistent) || !strings.Contains(err.Error(), "lost 3") {
		t.Fatalf("readInputs: %v, want the lost phase named", err)
	}
}

func TestFlagsNameTheBadOne(t *testing.T) {
	for _, args := range [][]string{{"-cpu-target", "1.5"}, {"-rf", "0"}, {"-vcpu", "-1"}, {"-write-mbs", "0"}} {
		var out, errb bytes.Buffer
		if code := run(append([]string{"-root", root}, args...), &out, &errb); code != 2 || !strings.Contains(errb.String(), args[0]) {
			t.Errorf("%v: exit %d, %q; want 2 naming %s", args, code, errb.String(), args[0])
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"-root", root}, &out, &errb); code != 0 || !strings.Contains(out.String(), "100M devices") {
		t.Errorf("default run: exit %d, stderr %q", code, errb.String())
	}
}
