package main

import (
	"context"
	"fmt"
	"time"

	"github.com/shoal-mqtt/shoal/bench/load"
)

// unitResult is one phase's costs, per message or per connect.
type unitResult struct {
	Name string `json:"name"`
	Per  string `json:"per"`
	// Count is what the costs are divided by: messages published, or
	// connects made.
	Count      uint64  `json:"count"`
	Deliveries uint64  `json:"deliveries,omitempty"`
	Seconds    float64 `json:"seconds"`
	Payload    int     `json:"payload_bytes,omitempty"`
	QoS        int     `json:"qos"`
	// CPUMicros is CPU-µs per Count by kind of process (gateway, router,
	// session, kafka, cassandra: the processes of a kind summed), and
	// "shoal", the three roles together.
	CPUMicros map[string]float64 `json:"cpu_us"`
	// CPUMicrosPerDelivery is the same per delivery (fan-out).
	CPUMicrosPerDelivery map[string]float64 `json:"cpu_us_per_delivery,omitempty"`
	// GatewayRSSBytes is the growth of the gateway's RSS per idle
	// connection (connects), measured while the connections are held.
	GatewayRSSBytes float64 `json:"gateway_rss_bytes,omitempty"`
	// KafkaRecords is records per Count by topic, and "total".
	KafkaRecords map[string]float64 `json:"kafka_records"`
	// KafkaBytes is the growth of the topics' logs per Count, once (the
	// topics here have one replica; a replication factor of 3 writes it
	// three times).
	KafkaBytes float64 `json:"kafka_bytes"`
	// CQL is the requests per Count Cassandra coordinated.
	CQLReads  float64 `json:"cql_reads"`
	CQLWrites float64 `json:"cql_writes"`
	CQLScans  float64 `json:"cql_scans"`
	Lost      uint64  `json:"lost_or_undelivered"`
	// RSSBytes is, for subscriptions, the growth of each kind's RSS per
	// subscription (the processes of a kind summed), from before the
	// first SUBSCRIBE to the settle after the last SUBACK.
	RSSBytes map[string]float64 `json:"rss_bytes,omitempty"`
	// HeapBytes is, for subscriptions, the growth of each Shoal role's live
	// heap per subscription (the processes of a kind summed), between
	// collections before the first SUBSCRIBE and after the settle: what
	// its state holds for one.
	HeapBytes map[string]float64 `json:"heap_live_bytes,omitempty"`
	// SessionPresent is the connects that resumed a kept session.
	SessionPresent int `json:"session_present,omitempty"`
	// Offline is the offline phase's account (on its deliver result).
	Offline *load.OfflineStats `json:"offline,omitempty"`
}

// idleWindow samples every process, waits d without load and samples
// again: the two samples, and each process's idle rate between them.
func (m *unitMeter) idleWindow(ctx context.Context, d time.Duration) (s0, s1 unitSample, idle map[string]float64, err error) {
	if s0, err = m.sample(ctx); err != nil {
		return s0, s1, nil, err
	}
	if !load.Sleep(ctx, d) {
		return s0, s1, nil, ctx.Err()
	}
	if s1, err = m.sample(ctx); err != nil {
		return s0, s1, nil, err
	}
	return s0, s1, idleRates(s0, s1), nil
}

// idleRates is each process's CPU-seconds per second without load, from
// two samples.
func idleRates(a, b unitSample) map[string]float64 {
	secs := b.at.Sub(a.at).Seconds()
	r := map[string]float64{}
	if secs <= 0 {
		return r
	}
	for name, cpu := range b.cpu {
		r[name] = (cpu - a.cpu[name]).Seconds() / secs
	}
	return r
}

// unitCosts divides what changed from a to b by count (and deliveries),
// less what each process spends idle (idle: CPU-seconds per second, by
// process) over the time between the samples.
func unitCosts(ph unitPhase, res *load.Result, a, b unitSample, idle map[string]float64) unitResult {
	u := unitResult{Name: ph.name, Per: ph.per, Payload: res.PayloadBytes, QoS: res.QoS,
		CPUMicros: map[string]float64{}, KafkaRecords: map[string]float64{}}
	switch ph.per {
	case "connect":
		if res.Connect != nil {
			u.Count = uint64(res.Connect.Connected)
		}
		u.Payload = 0
	case "subscription":
		if res.Connect != nil {
			u.Count = uint64(res.Connect.Subscribed)
		}
		u.Payload = 0
	default:
		u.Count, u.Deliveries = res.Sent, res.Received
		if res.Expected > res.Received {
			u.Lost = res.Expected - res.Received
		}
	}
	u.Seconds = res.ElapsedSec
	if u.Count == 0 {
		return u
	}
	n := float64(u.Count)
	// A connect phase's CPU is the whole phase's (the connects, the idle
	// hold, the disconnects), from the samples; a message phase's is its
	// measured window's (the generator's samples), without the connecting
	// and subscribing of its clients, per message and delivery of that
	// window.
	cpu, secs := map[string]float64{}, b.at.Sub(a.at).Seconds()
	count, deliveries := n, float64(u.Deliveries)
	if ph.per == "message" && len(res.Processes) > 0 {
		for _, p := range res.Processes {
			cpu[p.Name] = p.CPUSeconds
		}
		secs = res.Measured.Seconds
		count, deliveries = float64(res.Measured.Sent), float64(res.Measured.Deliveries)
	} else {
		for name, c := range b.cpu {
			cpu[name] = (c - a.cpu[name]).Seconds()
		}
	}
	per := map[string]float64{}
	for name, c := range cpu {
		k := kindOf(name)
		d := max(c-idle[name]*secs, 0) // noise: what a phase did is never negative
		per[k] += d
		if isShoal(k) {
			per["shoal"] += d
		}
	}
	if count > 0 {
		for k, d := range per {
			u.CPUMicros[k] = d * 1e6 / count
		}
	}
	if ph.per == "message" && res.Expected > res.Sent { // a fan-out
		u.CPUMicrosPerDelivery = map[string]float64{}
		for k, d := range per {
			u.CPUMicrosPerDelivery[k] = d * 1e6 / deliveries
		}
	}
	if ph.per == "connect" && res.Broker != nil {
		u.GatewayRSSBytes = res.Broker.RSSPerConnection
	}
	if ph.per == "connect" && res.Connect != nil {
		u.SessionPresent = res.Connect.SessionPresent
	}
	if ph.per == "subscription" {
		u.RSSBytes = growthPer(a.rss, b.rss, n)
		if a.heap != nil && b.heap != nil {
			u.HeapBytes = growthPer(a.heap, b.heap, n)
		}
	}
	if ph.per == "message" && len(res.Processes) > 0 && res.Measured.Sent > 0 {
		n = float64(res.Measured.Sent) // the samples are of the measured window
	}
	var records, bytes int64
	for t, r := range b.records {
		if d := r - a.records[t]; d != 0 {
			u.KafkaRecords[t] = float64(d) / n
			records += d
		}
	}
	u.KafkaRecords["total"] = float64(records) / n
	for t, s := range b.bytes {
		bytes += s - a.bytes[t]
	}
	u.KafkaBytes = float64(bytes) / n
	u.CQLReads = float64(b.cql.reads-a.cql.reads) / n
	u.CQLWrites = float64(b.cql.writes-a.cql.writes) / n
	u.CQLScans = float64(b.cql.scans-a.cql.scans) / n
	return u
}

// growthPer is the growth from a to b (bytes by process name) per n, by
// kind of process (the processes of a kind summed); a shrink is negative.
func growthPer(a, b map[string]uint64, n float64) map[string]float64 {
	per := map[string]float64{}
	for name, v := range b {
		per[kindOf(name)] += float64(int64(v)-int64(a[name])) / n
	}
	return per
}

// offlineCosts splits the offline phase into its two stages' costs: per
// message queued for an offline session (from the first publish to a
// settle after the last acknowledgement), and per message of the backlog
// delivered when the sessions came back (their reconnects included, from
// the first to a settle after the last delivery).
func offlineCosts(ph unitPhase, res *load.Result, stages map[string]unitSample, idle map[string]float64) ([]unitResult, error) {
	o := res.Offline
	if o == nil {
		return nil, fmt.Errorf("%s: no offline account in the result", ph.name)
	}
	for _, s := range []string{"queue", "deliver", "end"} {
		if _, ok := stages[s]; !ok {
			return nil, fmt.Errorf("%s: no sample at the %q stage (errors: %v)", ph.name, s, res.Errors)
		}
	}
	stage := func(name string, count uint64, a, b unitSample) unitResult {
		r := *res
		r.Processes, r.Sent, r.Received, r.Expected = nil, count, 0, 0
		return unitCosts(unitPhase{name: ph.name + "-" + name, per: "message"}, &r, a, b, idle)
	}
	q := stage("queue", o.Queued, stages["queue"], stages["deliver"])
	q.Seconds = o.QueueSec
	d := stage("deliver", o.Delivered, stages["deliver"], stages["end"])
	d.Seconds, d.Offline, d.SessionPresent = o.DeliverSec, o, o.Resumed
	d.Lost = res.Lost + res.Tail
	return []unitResult{q, d}, nil
}
