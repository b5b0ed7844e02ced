package main

import (
	"io"
	"math"
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
	if len(phases) != 5 || phases[1].cfg.Payload != 62 || phases[1].cfg.QoS != 1 || phases[2].cfg.Clients != 1000 {
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
