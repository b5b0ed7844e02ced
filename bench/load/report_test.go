package load

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func fakeResult(name, label string, round int, started string, dps, cpu float64, p99 float64) *Result {
	return &Result{
		Name: name, Label: label, Round: round, Scenario: ScenarioPairs, Started: started,
		Measured: Window{DeliveriesPerSec: dps},
		Latency:  &LatencySummary{P50: p99 / 2, P99: p99, P999: p99 * 2},
		Broker:   &ProcUsage{CPUSeconds: cpu, CPUPercent: 50, DeliveriesPerCPUSecond: dps / cpu, RSSMax: 10 << 20},
	}
}

func TestCompare(t *testing.T) {
	results := []*Result{
		fakeResult("pairs-qos0", "shoal", 1, "2026-01-01T00:00:01Z", 100, 1, 500),
		fakeResult("pairs-qos0", "mosquitto", 1, "2026-01-01T00:00:02Z", 200, 1, 100),
		fakeResult("pairs-qos0", "shoal", 2, "2026-01-01T00:00:03Z", 300, 1, 700),
		fakeResult("pairs-qos0", "mosquitto", 2, "2026-01-01T00:00:04Z", 100, 1, 300),
		fakeResult("pairs-qos0", "shoal", 3, "2026-01-01T00:00:05Z", 200, 1, 600),
		fakeResult("pairs-qos0", "mosquitto", 3, "2026-01-01T00:00:06Z", 400, 1, 200),
		{Name: "conn", Label: "shoal", Scenario: ScenarioConnections, Started: "2026-01-01T00:00:00Z",
			Connect: &ConnectStats{PerSec: 1000}, Broker: &ProcUsage{RSSPerConnection: 2048, RSSEnd: 50 << 20}},
		{Name: "conn", Label: "mosquitto", Scenario: ScenarioConnections, Started: "2026-01-01T00:00:07Z",
			Connect: &ConnectStats{PerSec: 4000}, Broker: &ProcUsage{RSSPerConnection: 1024, RSSEnd: 20 << 20}},
	}
	rows := Compare(results, "shoal", "mosquitto")
	get := func(scenario, metric string) Row {
		t.Helper()
		for _, r := range rows {
			if r.Scenario == scenario && r.Metric == metric {
				return r
			}
		}
		t.Fatalf("no row %s / %s in %+v", scenario, metric, rows)
		return Row{}
	}
	if rows[0].Scenario != "conn" {
		t.Errorf("first row %q: groups must come in the order they were first run", rows[0].Scenario)
	}
	r := get("pairs-qos0", "deliveries/s")
	if r.A != (Spread{Median: 200, Min: 100, Max: 300, N: 3}) || r.B != (Spread{Median: 200, Min: 100, Max: 400, N: 3}) || r.Ratio != 1 {
		t.Errorf("deliveries/s row: %+v", r)
	}
	r = get("pairs-qos0", "p99 latency µs")
	if r.A.Median != 600 || r.B.Median != 200 || r.Ratio != 3 {
		t.Errorf("p99 row: %+v", r)
	}
	r = get("conn", "broker RSS per connection KiB")
	if r.A.Median != 2 || r.B.Median != 1 || r.Ratio != 2 {
		t.Errorf("RSS per connection row: %+v", r)
	}
	r = get("conn", "connects/s")
	if r.Ratio != 0.25 {
		t.Errorf("connects/s ratio %g, want 0.25", r.Ratio)
	}
	for _, row := range rows {
		if row.Scenario == "conn" && row.Metric == "deliveries/s" {
			t.Error("traffic metrics reported for the connections scenario")
		}
	}

	var md bytes.Buffer
	WriteMarkdown(&md, rows, "shoal", "mosquitto")
	if !strings.Contains(md.String(), "| pairs-qos0 | deliveries/s | 200 (100–300) | 200 (100–400) | 1.00 |") {
		t.Errorf("markdown table:\n%s", md.String())
	}
	var txt bytes.Buffer
	if err := WriteText(&txt, rows, "shoal", "mosquitto"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(txt.String(), "ratio shoal/mosquitto") || !strings.Contains(txt.String(), "3.00") {
		t.Errorf("text table:\n%s", txt.String())
	}
}

func TestCompareOneSideMissing(t *testing.T) {
	rows := Compare([]*Result{fakeResult("x", "shoal", 1, "t", 100, 1, 10)}, "shoal", "mosquitto")
	if len(rows) == 0 || rows[0].B.N != 0 || !math.IsNaN(rows[0].Ratio) {
		t.Fatalf("rows %+v: want the missing side empty and no ratio", rows)
	}
	var md bytes.Buffer
	WriteMarkdown(&md, rows, "shoal", "mosquitto")
	if !strings.Contains(md.String(), "| x | deliveries/s | 100 | – | – |") {
		t.Errorf("markdown:\n%s", md.String())
	}
}

func TestFmtNum(t *testing.T) {
	cases := map[float64]string{0: "0", 1234567: "1,234,567", 512.4: "512", 42.25: "42.2", 1.234: "1.23", -2500: "-2,500", math.NaN(): "–"}
	for in, want := range cases {
		if got := fmtNum(in); got != want {
			t.Errorf("fmtNum(%g) = %q, want %q", in, got, want)
		}
	}
}

func TestLoadResultsAndRuns(t *testing.T) {
	dir := t.TempDir()
	r := fakeResult("pairs-qos0", "shoal", 1, "t1", 100, 1, 10)
	r.Sent, r.Expected, r.Received = 10, 10, 8
	r.TrackCounts = TrackCounts{Unique: 8, Lost: 1, Tail: 1}
	r.Errors, r.ErrorsN = []string{"connection lost | reset"}, 1
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "other.json"), []byte(`{"x": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := LoadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].LostConns != 0 || got[0].Lost != 1 || got[0].Tail != 1 {
		t.Fatalf("LoadResults = %+v", got)
	}
	var md bytes.Buffer
	WriteRuns(&md, got)
	if !strings.Contains(md.String(), "| pairs-qos0 | shoal | 1 | 10 | 10 | 8 | 1 | 1 | 0 | 0 | 1: connection lost \\| reset |") {
		t.Errorf("runs table:\n%s", md.String())
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.json"), []byte(`{`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadResults(dir); err == nil {
		t.Error("a malformed result file was accepted")
	}
}

func TestSummarizeHistogram(t *testing.T) {
	s := newHistShards(3)
	for i := range 1000 {
		s.record(i, int64(i+1)*1000) // 1 … 1000 µs
	}
	s.record(0, 10) // below 1 µs: counted as 1 µs
	sum := summarize(s.merged())
	if sum.Count != 1001 || sum.Min != 1 || sum.Max < 999 || sum.Max > 1001 {
		t.Errorf("summary %+v", sum)
	}
	if sum.P50 < 495 || sum.P50 > 505 || sum.P99 < 985 || sum.P99 > 995 {
		t.Errorf("p50 %g, p99 %g; want about 500 and 990", sum.P50, sum.P99)
	}
	last := sum.CDF[len(sum.CDF)-1]
	if sum.CDF[0].Percentile != 0 || last.Percentile != 100 || last.Us != sum.Max {
		t.Errorf("CDF from %+v to %+v", sum.CDF[0], last)
	}
	for i := 1; i < len(sum.CDF); i++ {
		if sum.CDF[i].Percentile < sum.CDF[i-1].Percentile || sum.CDF[i].Us < sum.CDF[i-1].Us {
			t.Fatalf("CDF not monotonic at %d: %+v", i, sum.CDF[i-1:i+1])
		}
	}
	if summarize(newHist()) != nil {
		t.Error("an empty histogram has a summary")
	}
}

func TestCompareOfflineAndSubscriptions(t *testing.T) {
	results := []*Result{
		{Name: "offline-qos1", Label: "shoal", Scenario: ScenarioOffline, Started: "2026-01-01T00:00:01Z",
			Offline: &OfflineStats{QueuedPerSec: 5000, DeliveredPerSec: 8000, BrokerCPUQueueUs: 20, FirstDelivery: &LatencySummary{P99: 300}}},
		{Name: "offline-qos1", Label: "mosquitto", Scenario: ScenarioOffline, Started: "2026-01-01T00:00:02Z",
			Offline: &OfflineStats{QueuedPerSec: 10000, DeliveredPerSec: 4000, BrokerCPUQueueUs: 10, FirstDelivery: &LatencySummary{P99: 100}}},
		{Name: "subscriptions", Label: "shoal", Scenario: ScenarioConnections, Started: "2026-01-01T00:00:03Z",
			Connect: &ConnectStats{Subscribed: 100, SubscribePerSec: 300, SubscribeCPUPerSubUs: 40}},
		{Name: "subscriptions", Label: "mosquitto", Scenario: ScenarioConnections, Started: "2026-01-01T00:00:04Z",
			Connect: &ConnectStats{Subscribed: 100, SubscribePerSec: 600, SubscribeCPUPerSubUs: 10}},
	}
	want := map[[2]string]float64{
		{"offline-qos1", "queued/s"}:                         0.5,
		{"offline-qos1", "backlog delivered/s"}:              2,
		{"offline-qos1", "first queued message p99 µs"}:      3,
		{"offline-qos1", "broker CPU µs per queued message"}: 2,
		{"subscriptions", "subscribes/s"}:                    0.5,
		{"subscriptions", "broker CPU µs per subscription"}:  4,
	}
	for _, r := range Compare(results, "shoal", "mosquitto") {
		if w, ok := want[[2]string{r.Scenario, r.Metric}]; ok {
			if r.Ratio != w {
				t.Errorf("%s / %s: ratio %v, want %v", r.Scenario, r.Metric, r.Ratio, w)
			}
			delete(want, [2]string{r.Scenario, r.Metric})
		}
	}
	if len(want) > 0 {
		t.Errorf("rows missing: %v", want)
	}
}
