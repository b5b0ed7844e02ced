package main

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/bench/load"
)

var day = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func TestParseDefaultsAndSmoke(t *testing.T) {
	var stderr bytes.Buffer
	opt, err := parse(nil, &stderr, day)
	if err != nil {
		t.Fatal(err)
	}
	if opt.out != filepath.Join("bench", "results", "2026-12-02-bridge") || len(opt.parts) != 4 || opt.rounds != 2 ||
		opt.outRate != 10000 || opt.catchStop != time.Minute || len(opt.inRates) != 2 || opt.fetchWait != 10*time.Millisecond {
		t.Errorf("defaults %+v", opt)
	}
	// Every part's windows and starts fit in the bound.
	if opt.timeout < opt.catchStop+opt.catchLimit+opt.outDuration || opt.timeout > 2*time.Hour {
		t.Errorf("timeout %s", opt.timeout)
	}
	opt, err = parse([]string{"-smoke", "-parts", "catchup,out-latency,catchup", "-catchup-stop", "7s", "-in-rates", "500"}, &stderr, day)
	if err != nil {
		t.Fatal(err)
	}
	if opt.rounds != 1 || opt.warmup != time.Second || opt.catchStop != 7*time.Second || opt.catchBefore != 3*time.Second ||
		strings.Join(opt.parts, ",") != "catchup,out-latency" || len(opt.inRates) != 1 || opt.inRates[0] != 500 {
		t.Errorf("smoke %+v", opt)
	}
	if opt.has(partThroughput) || !opt.has(partCatchUp) {
		t.Errorf("parts %v", opt.parts)
	}
	for _, bad := range [][]string{{"-parts", "everything"}, {"-parts", ","}, {"-rounds", "0"}, {"-in-rates", "fast"},
		{"-in-rates", "0"}, {"-out-publishers", "0"}, {"-fetch-wait", "0s"}, {"-catchup-stop", "0s"}, {"stray"}} {
		if _, err := parse(bad, &stderr, day); err == nil {
			t.Errorf("parse(%v): no error", bad)
		}
	}
}

// A page of Shoal's /metrics as its Prometheus exporter writes it.
const metricsPage = `# HELP shoal_bridge_records_total Records the bridge wrote or read.
# TYPE shoal_bridge_records_total counter
shoal_bridge_records_total{direction="in",mapping="cmd"} 7
shoal_bridge_records_total{direction="out",mapping="all"} 1.5e+06
shoal_bridge_records_total{direction="out",mapping="other"} 25
shoal_bridge_records_total_extra{direction="out"} 1000
shoal_bridge_lag{direction="out",mapping="all"} 12
shoal_gateway_messages_received_total 1.500042e+06
`

func TestParseSample(t *testing.T) {
	s := parseSample([]byte(metricsPage))
	if s.records != 1_500_025 || s.received != 1_500_042 || !s.hasLag || s.lag != 12 {
		t.Errorf("sample %+v, want 1500025 out records, 1500042 received, lag 12", s)
	}
	if v, ok := metricSum([]byte(metricsPage), metricBridgeRecords, `direction="in"`, `mapping="cmd"`); !ok || v != 7 {
		t.Errorf("in records %v %v, want 7", v, ok)
	}
	if _, ok := metricSum([]byte(metricsPage), metricBridgeLag, `direction="in"`); ok {
		t.Error("an in lag found in a page without one")
	}
	if s := parseSample([]byte("# nothing yet\n")); s.hasLag || s.records != 0 {
		t.Errorf("empty page: %+v", s)
	}
}

func TestStampRoundTrip(t *testing.T) {
	b := appendStamp(nil, 1796204006450123456, 3, 41)
	if string(b) != "1796204006450123456 3 41" {
		t.Fatalf("stamp %q", b)
	}
	// kcat -P's lines are padded: the padding is no field.
	sent, pub, seq, err := parseStamp(append(b, "      "...))
	if err != nil || sent != 1796204006450123456 || pub != 3 || seq != 41 {
		t.Errorf("parse: %d %d %d %v", sent, pub, seq, err)
	}
	for _, bad := range []string{"", "1 2", "1 2 3 4", "x 2 3", "1 -2 3", "1 2 three"} {
		if _, _, _, err := parseStamp([]byte(bad)); err == nil {
			t.Errorf("parseStamp(%q): no error", bad)
		}
	}
	if _, _, _, err := parseStamp([]byte("probe 4")); !errors.Is(err, errProbe) {
		t.Errorf("probe: %v", err)
	}
}

func TestAppendLine(t *testing.T) {
	line, err := appendLine(nil, []byte("k1:1 1 0"))
	if err != nil || len(line) != lineSize || line[lineSize-1] != '\n' || !bytes.HasPrefix(line, []byte("k1:1 1 0 ")) {
		t.Fatalf("line of %d bytes %q…, %v", len(line), line[:12], err)
	}
	if _, err := appendLine(nil, bytes.Repeat([]byte("x"), lineSize)); err == nil {
		t.Error("a line longer than a kcat block: no error")
	}
	if _, err := appendLine(nil, []byte("a\nb")); err == nil {
		t.Error("a line with a newline: no error")
	}
}

func TestRecvLogAccount(t *testing.T) {
	l := &recvLog{}
	arrive := func(pub, seq int, sent, recv int64) { l.observe(appendStamp(nil, sent, pub, seq), recv) }
	arrive(0, 0, 100, 150)
	arrive(0, 2, 120, 170)
	arrive(0, 1, 110, 180) // after 2: reordered
	arrive(0, 2, 120, 190) // again: a repeat
	arrive(1, 0, 100, 300)
	arrive(1, 5, 150, 400) // publisher 1 sent 3: not one of ours
	l.observe([]byte("probe 0"), 1)
	l.observe([]byte("garbage"), 1)
	c := l.account([]uint64{3, 3})
	want := counts{Sent: 6, Received: 4, Lost: 2, Repeats: 1, Reordered: 1, Unknown: 1, Malformed: 1}
	c.FirstBad = ""
	if c != want {
		t.Errorf("counts %+v, want %+v", c, want)
	}
	if l.probed() != 1 || l.total() != 6 {
		t.Errorf("probes %d, arrivals %d; want 1 and 6", l.probed(), l.total())
	}
	// Latency of the messages sent in [100, 120): 50, 70 and 200.
	lat := latencyOf(l, 100, 120)
	if lat == nil || lat.Count != 3 {
		t.Fatalf("latency %+v, want 3 samples", lat)
	}
	if countBefore(l, 200) != 3 || lastArrival(l) != 400 {
		t.Errorf("before 200: %d arrivals, last at %d; want 3 and 400", countBefore(l, 200), lastArrival(l))
	}
}

func TestCaughtUp(t *testing.T) {
	ms := int64(time.Millisecond)
	l := &recvLog{}
	for seq := range 3 {
		l.observe(appendStamp(nil, int64(seq)*ms, 0, seq), 1)
	}
	before := []uint64{2}
	if !caughtUp(l, before, 2*ms+400*ms, 500*time.Millisecond) {
		t.Error("every message before the restart arrived and the newest is recent: not caught up")
	}
	if caughtUp(l, before, 2*ms+600*ms, 500*time.Millisecond) {
		t.Error("the newest arrival is 600 ms old: caught up")
	}
	if caughtUp(l, []uint64{4}, 2*ms, 500*time.Millisecond) {
		t.Error("a message sent before the restart is missing: caught up")
	}
	if caughtUp(l, []uint64{2, 1}, 2*ms, 500*time.Millisecond) {
		t.Error("a publisher without arrivals: caught up")
	}
}

func TestReadmeTables(t *testing.T) {
	opt, err := parse([]string{"-rounds", "2"}, &bytes.Buffer{}, day)
	if err != nil {
		t.Fatal(err)
	}
	lag := 40.0
	caught := 0.4
	res := &results{Meta: meta{Date: day.Format(time.RFC3339), opt: opt}}
	for round := 1; round <= 2; round++ {
		res.Throughput = append(res.Throughput,
			throughputRun{Scenario: "pairs-qos0", Broker: brokerMosquitto, Round: round, DeliveriesPerSec: 150_000},
			throughputRun{Scenario: "pairs-qos0", Broker: brokerShoal, Round: round, DeliveriesPerSec: 200_000, BrokerCPUPercent: 160},
			throughputRun{Scenario: "pairs-qos0", Broker: brokerShoalBridge, Round: round, DeliveriesPerSec: 100_000 + float64(round)*20_000,
				Bridge: &bridgeWindow{RecordsPerSec: 110_000, ReceivedPerSec: 110_500, LagAtEnd: 900, LagMetricAtEnd: &lag,
					CaughtUpSec: &caught, TopicRecords: 1_000, TotalReceived: 1_000}})
	}
	res.OutLatency = []latencyRun{{Part: partOutLatency, QoS: 1, Rate: 10000, Counts: counts{Sent: 10, Received: 10},
		Latency: &load.LatencySummary{Count: 10, P50: 4000, P99: 60_000, P999: 70_000, Max: 80_000}}}
	res.CatchUp = &catchUpRun{Rate: 10000, Backlog: 600_000, ReadySec: 0.5, CatchUpRate: 50_000,
		Final: counts{Sent: 9, Received: 8, Lost: 1}}
	var b strings.Builder
	writeReadme(&b, res)
	out := b.String()
	for _, want := range []string{
		// Ratios are per round: 120k/200k and 140k/200k.
		"| pairs-qos0 | shoal-bridge | 130000 (120000–140000) | 0 | 0 | 0 | 0.65 (0.60–0.70) |",
		"| pairs-qos0 | mosquitto | 150000 | 0 | 0 | 0 | 0.75 |",
		"| pairs-qos0 | 1 | 110000 | 110500 | 900 (40) | 0.4 s | 1000 / 1000 |",
		// p99 above the 50 ms target: missed.
		"| 1 | 10000 | 10 | 10 | 0 | 0 | 0 | 4.00 | 60.0 | 70.0 | 80.0 | –, – | missed |",
		"| 600000 | 0.5 s | – | – | –; 0; 0 (0.0 s) | 50000 records/s |",
		"8 of the 9 messages sent",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("README lacks %q:\n%s", want, out)
		}
	}
}
