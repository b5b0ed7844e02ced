package main

import (
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/bench/load"
)

func TestUnitCostsPerMessage(t *testing.T) {
	a := unitSample{
		cpu:     map[string]time.Duration{"gateway-1": time.Second, "gateway-2": time.Second, "router": 0, "session": 0, "kafka": 5 * time.Second, "cassandra": 0},
		records: map[string]int64{"shoal.messages": 100, "shoal.deliveries": 10},
		bytes:   map[string]int64{"shoal.messages": 1000},
		cql:     cqlCounts{reads: 5, writes: 7},
	}
	b := unitSample{
		cpu:     map[string]time.Duration{"gateway-1": 3 * time.Second, "gateway-2": 2 * time.Second, "router": time.Second, "session": 0, "kafka": 7 * time.Second, "cassandra": time.Second / 2},
		records: map[string]int64{"shoal.messages": 100100, "shoal.deliveries": 100010, "shoal.sessions": 0},
		bytes:   map[string]int64{"shoal.messages": 1001000, "shoal.deliveries": 500000},
		cql:     cqlCounts{reads: 5, writes: 1007},
	}
	ph := unitPhase{name: "fanout-2-qos0", per: "message"}
	res := &load.Result{Sent: 100000, Expected: 200000, Received: 199990, PayloadBytes: 64, ElapsedSec: 12}
	u := unitCosts(ph, res, a, b, nil)
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
	}
	if u.Count != 100000 || u.Deliveries != 199990 || u.Lost != 10 {
		t.Fatalf("count %d, deliveries %d, lost %d", u.Count, u.Deliveries, u.Lost)
	}
	near("gateway CPU-µs", u.CPUMicros["gateway"], 30) // 3 s over two gateways / 100k
	near("router CPU-µs", u.CPUMicros["router"], 10)
	near("shoal CPU-µs", u.CPUMicros["shoal"], 40)
	near("kafka CPU-µs", u.CPUMicros["kafka"], 20)
	near("cassandra CPU-µs", u.CPUMicros["cassandra"], 5)
	near("shoal CPU-µs per delivery", u.CPUMicrosPerDelivery["shoal"], 4e6/199990)
	near("messages records", u.KafkaRecords["shoal.messages"], 1)
	near("deliveries records", u.KafkaRecords["shoal.deliveries"], 1)
	near("total records", u.KafkaRecords["total"], 2)
	if _, ok := u.KafkaRecords["shoal.sessions"]; ok {
		t.Error("a topic that did not grow is listed")
	}
	near("kafka bytes", u.KafkaBytes, 15)
	near("cql writes", u.CQLWrites, 0.01)
	near("cql reads", u.CQLReads, 0)
}

func TestUnitCostsPerConnect(t *testing.T) {
	a := unitSample{cpu: map[string]time.Duration{"gateway-1": 0, "session": 0}, records: map[string]int64{}, bytes: map[string]int64{}}
	b := unitSample{cpu: map[string]time.Duration{"gateway-1": time.Second, "session": 2 * time.Second}, records: map[string]int64{"shoal.sessions": 4000}, bytes: map[string]int64{}}
	res := &load.Result{Connect: &load.ConnectStats{Connected: 2000}, Broker: &load.ProcUsage{RSSPerConnection: 9000}}
	u := unitCosts(unitPhase{name: "connect-new", per: "connect"}, res, a, b, nil)
	if u.Count != 2000 || u.GatewayRSSBytes != 9000 || u.CPUMicrosPerDelivery != nil {
		t.Fatalf("%+v", u)
	}
	if u.CPUMicros["gateway"] != 500 || u.CPUMicros["session"] != 1000 || u.CPUMicros["shoal"] != 1500 || u.KafkaRecords["total"] != 2 {
		t.Fatalf("cpu %v, records %v", u.CPUMicros, u.KafkaRecords)
	}
}

func TestParseUnits(t *testing.T) {
	opt, err := parse([]string{"-scenario", "units", "-topologies", "two-gateways"}, io.Discard, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	phases := opt.unitPhases(topoTwo)
	var names []string
	for _, p := range phases {
		names = append(names, p.name)
		if err := p.cfg.Validate(); err != nil {
			t.Errorf("%s: %v", p.name, err)
		}
	}
	if len(phases) != 12 || phases[10].per != "subscription" || phases[10].cfg.Subscriptions != 100 || !phases[11].cfg.WildcardFilters || !phases[9].takeover ||
		phases[2].cfg.Window == 0 || phases[1].cfg.Payload != 62 || phases[1].cfg.QoS != 1 || phases[4].cfg.Clients != 1000 ||
		phases[2].cfg.SessionExpiry == 0 || phases[3].cfg.Scenario != load.ScenarioOffline || phases[3].cfg.Queued != 200 ||
		!phases[7].cfg.KeepSessions || !phases[8].cfg.Resume || phases[7].cfg.Prefix != phases[8].cfg.Prefix {
		t.Fatalf("phases %v", names)
	}
	for _, bad := range [][]string{
		{"-scenario", "units", "-topologies", "one-gateway,two-gateways"},
		{"-scenario", "units", "-rate", "5"},
		{"-scenario", "units", "-fanout", "0"},
	} {
		if _, err := parse(bad, io.Discard, time.Unix(0, 0)); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
}

func TestUnitCostsLessIdle(t *testing.T) {
	t0 := time.Unix(1000, 0)
	idle := idleRates(
		unitSample{at: t0, cpu: map[string]time.Duration{"kafka": 0, "router": 0}},
		unitSample{at: t0.Add(10 * time.Second), cpu: map[string]time.Duration{"kafka": time.Second, "router": 0}},
	)
	if idle["kafka"] != 0.1 || idle["router"] != 0 {
		t.Fatalf("idle %v", idle)
	}
	a := unitSample{at: t0, cpu: map[string]time.Duration{"kafka": 0, "router": 0}, records: map[string]int64{}, bytes: map[string]int64{}}
	b := unitSample{at: t0.Add(20 * time.Second), cpu: map[string]time.Duration{"kafka": 3 * time.Second, "router": time.Second}, records: map[string]int64{}, bytes: map[string]int64{}}
	u := unitCosts(unitPhase{name: "pairs-qos0", per: "message"}, &load.Result{Sent: 1000, Received: 1000}, a, b, idle)
	// kafka: 3 s less 20 s at 10 % = 1 s over 1,000 messages.
	if u.CPUMicros["kafka"] != 1000 || u.CPUMicros["router"] != 1000 {
		t.Fatalf("cpu %v", u.CPUMicros)
	}
}

func TestUnitCostsOfTheMeasuredWindow(t *testing.T) {
	res := &load.Result{Sent: 5000, Expected: 10000, Received: 10000,
		Measured:  load.Window{Seconds: 10, Sent: 2000, Deliveries: 4000},
		Processes: []load.ProcUsage{{Name: "gateway-1", CPUSeconds: 1}, {Name: "kafka", CPUSeconds: 2}}}
	a := unitSample{cpu: map[string]time.Duration{"gateway-1": 0, "kafka": 0}, records: map[string]int64{}, bytes: map[string]int64{}}
	b := unitSample{cpu: map[string]time.Duration{"gateway-1": 9 * time.Second, "kafka": 9 * time.Second}, records: map[string]int64{}, bytes: map[string]int64{}}
	u := unitCosts(unitPhase{name: "fanout-2-qos0", per: "message"}, res, a, b, map[string]float64{"kafka": 0.1})
	// gateway: 1 s over the window's 2,000 messages; kafka: 2 s less 10 s at 10 %.
	if u.CPUMicros["gateway"] != 500 || u.CPUMicros["kafka"] != 500 || u.CPUMicrosPerDelivery["shoal"] != 250 {
		t.Fatalf("cpu %v, per delivery %v", u.CPUMicros, u.CPUMicrosPerDelivery)
	}
}

func TestOfflineCostsPerStage(t *testing.T) {
	at := func(sec int, gw, sess time.Duration, sessions int64, writes int64) unitSample {
		return unitSample{at: time.Unix(int64(1000+sec), 0), cpu: map[string]time.Duration{"gateway-1": gw, "session": sess},
			records: map[string]int64{"shoal.sessions": sessions}, bytes: map[string]int64{}, cql: cqlCounts{writes: writes}}
	}
	stages := map[string]unitSample{
		"queue":   at(0, 0, 0, 0, 0),
		"deliver": at(5, time.Second, 2*time.Second, 1000, 2000),
		"end":     at(10, 3*time.Second, 3*time.Second, 1500, 2500),
	}
	res := &load.Result{Sent: 1000, Received: 990, Expected: 1000, TrackCounts: load.TrackCounts{Lost: 10},
		Offline: &load.OfflineStats{Queued: 1000, Delivered: 990, Resumed: 50, QueueSec: 1, DeliverSec: 2}}
	us, err := offlineCosts(unitPhase{name: "offline-qos1"}, res, stages, map[string]float64{"session": 0.1})
	if err != nil {
		t.Fatal(err)
	}
	q, d := us[0], us[1]
	// queue: gateway 1 s, session 2 s less 5 s at 10 %, over 1,000 queued.
	if q.Name != "offline-qos1-queue" || q.Count != 1000 || q.CPUMicros["gateway"] != 1000 || q.CPUMicros["session"] != 1500 ||
		q.KafkaRecords["total"] != 1 || q.CQLWrites != 2 || q.Lost != 0 || q.Offline != nil {
		t.Errorf("queue %+v", q)
	}
	// deliver: gateway 2 s, session 1 s less 0.5 s, over 990 delivered.
	if d.Name != "offline-qos1-deliver" || d.Count != 990 || math.Abs(d.CPUMicros["gateway"]-2e6/990) > 1e-9 ||
		math.Abs(d.CPUMicros["session"]-0.5e6/990) > 1e-9 || d.Lost != 10 || d.SessionPresent != 50 || d.Offline == nil || d.Seconds != 2 {
		t.Errorf("deliver %+v", d)
	}
	delete(stages, "end")
	if _, err := offlineCosts(unitPhase{name: "offline-qos1"}, res, stages, nil); err == nil {
		t.Error("a missing stage sample accepted")
	}
}

func TestUnitCostsPerSubscription(t *testing.T) {
	a := unitSample{cpu: map[string]time.Duration{"router": 0, "gateway-1": 0}, rss: map[string]uint64{"router": 100 << 20, "gateway-1": 50 << 20},
		records: map[string]int64{"shoal.messages": 0}, bytes: map[string]int64{}}
	b := unitSample{cpu: map[string]time.Duration{"router": time.Second, "gateway-1": 2 * time.Second}, rss: map[string]uint64{"router": 100<<20 + 40_000_000, "gateway-1": 50<<20 - 1_000_000},
		records: map[string]int64{"shoal.messages": 80_000}, bytes: map[string]int64{}}
	res := &load.Result{Connect: &load.ConnectStats{Connected: 1000, Subscribed: 10_000}}
	u := unitCosts(unitPhase{name: "subscribe-wildcard", per: "subscription"}, res, a, b, nil)
	if u.Count != 10_000 || u.CPUMicros["router"] != 100 || u.CPUMicros["shoal"] != 300 || u.KafkaRecords["total"] != 8 {
		t.Fatalf("count %d, cpu %v, records %v", u.Count, u.CPUMicros, u.KafkaRecords)
	}
	if u.RSSBytes["router"] != 4000 || u.RSSBytes["gateway"] != -100 {
		t.Fatalf("rss %v, want 4000 B per subscription for the router and the gateway's shrink as is", u.RSSBytes)
	}
	if u.HeapBytes != nil {
		t.Fatalf("heap %v without heap samples", u.HeapBytes)
	}
	a.heap = map[string]uint64{"router": 10 << 20, "gateway-1": 5 << 20}
	b.heap = map[string]uint64{"router": 10<<20 + 7_000_000, "gateway-1": 5<<20 + 500_000}
	u = unitCosts(unitPhase{name: "subscribe-wildcard", per: "subscription"}, res, a, b, nil)
	if u.HeapBytes["router"] != 700 || u.HeapBytes["gateway"] != 50 {
		t.Fatalf("heap %v, want 700 and 50 B per subscription", u.HeapBytes)
	}
}

func TestMemoryClass(t *testing.T) {
	b := []byte("/gc/heap/goal:bytes 8388608\n/gc/heap/live:bytes 4194304\n/memory/classes/total:bytes 12\n")
	if v, ok := memoryClass(b, "/gc/heap/live:bytes"); !ok || v != 4194304 {
		t.Fatalf("live heap %d, %v", v, ok)
	}
	if _, ok := memoryClass(b, "/gc/heap/live"); ok {
		t.Fatal("a prefix of a name matched")
	}
}

func TestUnitsReadme(t *testing.T) {
	f := unitsFile{runHeader: runHeader{Date: "2026-12-06T00:00:00Z", Command: "make bench-units"}, Topology: topoTwo, Units: []unitResult{
		{Name: "subscribe-wildcard", Per: "subscription", Count: 10, CPUMicros: map[string]float64{}, KafkaRecords: map[string]float64{},
			HeapBytes: map[string]float64{"router": 10553}, RSSBytes: map[string]float64{"router": 18930}},
		{Name: "offline-qos1-deliver", Per: "message", Count: 100, CPUMicros: map[string]float64{}, KafkaRecords: map[string]float64{},
			Offline: &load.OfflineStats{Sessions: 5, Queued: 100, Resumed: 5, DeliveredPerSec: 1000, FirstDelivery: &load.LatencySummary{P50: 67, P99: 1972}}},
	}}
	rd := unitsReadme(f)
	for _, want := range []string{"| subscribe-wildcard | 0 | 10553 | 0 | 0 | 18930 | 0 | 0 |", "offline-qos1: 5 sessions, 100 messages", "p50 67 µs, p99 1972 µs", "make bench-units"} {
		if !strings.Contains(rd, want) {
			t.Errorf("README lacks %q:\n%s", want, rd)
		}
	}
}

func TestParseUnitIndex(t *testing.T) {
	opt, err := parse([]string{"-scenario", "units", "-unit-index", "1000000, 100000"}, io.Discard, time.Unix(0, 0))
	if err != nil || opt.indexConcrete != 1000000 || opt.indexWildcard != 100000 || opt.indexOut == "" {
		t.Fatalf("%+v, %v", opt, err)
	}
	for _, bad := range []string{"1000000", "0,5", "a,b"} {
		if _, err := parse([]string{"-scenario", "units", "-unit-index", bad}, io.Discard, time.Unix(0, 0)); err == nil {
			t.Errorf("-unit-index %q accepted", bad)
		}
	}
	rd := indexReadme(indexFile{runHeader: runHeader{Date: "2026-12-06T00:00:00Z"}, Concrete: 10, Wildcard: 2, RebuildSeconds: 12.5,
		RouterHeapBytes: map[string]uint64{"rebuilt": 3 << 20},
		Phases:          []index{{Name: "subscribe-concrete", Subscribed: 10, RouterHeapPer: 450}, {Name: "match-full", Messages: 100, RouterCPUMicros: 4.5}}})
	for _, want := range []string{"| subscribe-concrete | 10 |", "| 450 |", "| match-full | | | | | 100 | 4.50 |", "ready after 12.5 s with 3 MiB"} {
		if !strings.Contains(rd, want) {
			t.Errorf("README lacks %q:\n%s", want, rd)
		}
	}
}

func TestParseUnitStorm(t *testing.T) {
	opt, err := parse([]string{"-scenario", "units", "-unit-storm", "10000", "-storm-sessions", "1, 2"}, io.Discard, time.Unix(0, 0))
	if err != nil || opt.stormClients != 10000 || !slices.Equal(opt.stormSessions, []int{1, 2}) || opt.stormOut == "" || opt.topologies[0] != topoTwo {
		t.Fatalf("%+v, %v", opt, err)
	}
	for _, bad := range [][]string{
		{"-unit-storm", "100"},                      // not the units scenario
		{"-scenario", "units", "-unit-storm", "-1"}, // negative
		{"-scenario", "units", "-unit-storm", "100", "-storm-sessions", "0"},
		{"-scenario", "units", "-unit-storm", "100", "-topologies", "one-gateway"},
		{"-scenario", "units", "-unit-storm", "100", "-unit-index", "10,1"},
	} {
		if _, err := parse(bad, io.Discard, time.Unix(0, 0)); err == nil {
			t.Errorf("parse(%v) accepted", bad)
		}
	}
	if k := roleKind("gateway-2"); k != "gateway" || roleKind("kafka") != "kafka" || roleKind("router-restarted") != "router-restarted" {
		t.Errorf("roleKind: %q", k)
	}
	rd := stormReadme(stormFile{runHeader: runHeader{Date: "2026-12-07T00:00:00Z"}, Clients: 10,
		Storms: []storm{{Sessions: 2, Wave: "resume", Connected: 10, SessionPresent: 10, Seconds: 0.5, PerSec: 20, P50Ms: 1, P99Ms: 2.5, MaxMs: 3,
			CPUMicros: map[string]float64{"session": 150, "gateway": 300, "kafka": 90}}}})
	for _, want := range []string{"# Connect storms of 10 clients", "| 2 | resume | 10 | 0 | 10 | 0.50 | 20 | 1.0 / 2.5 / 3.0 | gateway 300, session 150, kafka 90 |"} {
		if !strings.Contains(rd, want) {
			t.Errorf("README lacks %q:\n%s", want, rd)
		}
	}
}

func TestParseUnitTicks(t *testing.T) {
	opt, err := parse([]string{"-scenario", "units", "-unit-ticks"}, io.Discard, time.Unix(0, 0))
	if err != nil || !opt.unitTicks || opt.ticksOut == "" {
		t.Fatalf("%+v, %v", opt, err)
	}
	for _, bad := range [][]string{
		{"-unit-ticks"},
		{"-scenario", "units", "-unit-ticks", "-unit-storm", "10"},
		{"-scenario", "units", "-unit-ticks", "-unit-index", "10,1"},
	} {
		if _, err := parse(bad, io.Discard, time.Unix(0, 0)); err == nil {
			t.Errorf("parse(%v) accepted", bad)
		}
	}
	rd := ticksReadme(ticksFile{runHeader: runHeader{Date: "2026-12-07T00:00:00Z", Partitions: 16}, Gateways: 2,
		Phases:          []tickPhase{{Name: "default", Heartbeat: "1s", ExpiryCheck: "5s", RecordsPerSec: 35, CPUPercent: map[string]float64{"gateway": 1.5}}},
		PerRecordMicros: map[string]float64{"gateway": 12.34, "session": 20}})
	for _, want := range []string{"| default | 1s | 5s | 35 | gateway 1.5 |", "gateway 12.3, session 20.0."} {
		if !strings.Contains(rd, want) {
			t.Errorf("README lacks %q:\n%s", want, rd)
		}
	}
}
