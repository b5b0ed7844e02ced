package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shoal-mqtt/shoal/bench/load"
	"github.com/shoal-mqtt/shoal/internal/localserver/realcql"
	"github.com/shoal-mqtt/shoal/internal/localserver/realkafka"
)

// scenUnits measures what one message and one connect cost each kind of
// process (CPU from /proc), the log (records and bytes per topic, from
// Kafka) and the database (requests, from Cassandra's own tables), one
// phase after another on one topology.
const scenUnits = "units"

// unitPhase is one phase of the units scenario: a generator run, and what
// its costs are divided by.
type unitPhase struct {
	name string
	// per is what a cost is per: "message" (a publish) or "connect".
	per string
	cfg load.Config
}

// unitPhases are the units scenario's phases on topo, in order.
func (o *options) unitPhases(topo string) []unitPhase {
	pairs := func(name string, qos, payload int) unitPhase {
		cfg := o.loadConfig(topo, 0, 1)
		cfg.Scenario = load.ScenarioPairs
		cfg.QoS = 0
		cfg.Rate = 0
		if qos == 0 {
			cfg.Window = o.window
		} else {
			cfg.QoS, cfg.Window = 1, 0
		}
		cfg.Payload = payload
		cfg.Prefix = "bench-u" + name
		cfg.Name = name
		return unitPhase{name: name, per: "message", cfg: cfg}
	}
	fan := o.loadConfig(topo, 0, 1)
	fan.Scenario = load.ScenarioFanout
	fan.Clients = o.fanout
	fan.Rate = o.fanoutRate
	fan.Window = 0
	fan.Prefix = "bench-ufan"
	fan.Name = fmt.Sprintf("fanout-%d-qos0", o.fanout)
	conns := func(name string) unitPhase {
		cfg := load.DefaultConfig()
		cfg.Scenario = load.ScenarioConnections
		cfg.Clients = o.unitConnects
		cfg.Warmup, cfg.Duration = time.Second, time.Second
		cfg.SetupTimeout = setupTimeout
		cfg.Prefix = "bench-uconn" // the same ids twice: new, then returning
		cfg.Name = name
		cfg.Label, cfg.Round = topo, 1
		return unitPhase{name: name, per: "connect", cfg: cfg}
	}
	return []unitPhase{
		pairs("pairs-qos0", 0, 64),
		// TBMQ's point-to-point payload.
		pairs("pairs-qos1", 1, 62),
		{name: fan.Name, per: "message", cfg: fan},
		conns("connect-new"),
		conns("connect-returning"),
	}
}

// unitSample is what the units scenario reads before and after a phase.
type unitSample struct {
	at      time.Time
	cpu     map[string]time.Duration // by process name
	records map[string]int64         // by topic: the sum of its partitions' end offsets
	bytes   map[string]int64         // by topic: the size of its logs
	cql     cqlCounts
}

// cqlCounts are the requests Cassandra coordinated on Shoal's keyspace.
type cqlCounts struct{ reads, writes, scans int64 }

// unitMeter reads the samples.
type unitMeter struct {
	procs   []load.Process
	readers map[string]*load.Proc
	brokers []string
	cqlHost string
}

func newUnitMeter(bb *backbone, procs []load.Process) (*unitMeter, error) {
	m := &unitMeter{procs: procs, readers: make(map[string]*load.Proc), brokers: bb.brokers, cqlHost: bb.cqlHosts[0]}
	for _, p := range procs {
		r, err := load.NewProc(p.PID)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.Name, err)
		}
		m.readers[p.Name] = r
	}
	return m, nil
}

func (m *unitMeter) sample(ctx context.Context) (unitSample, error) {
	s := unitSample{at: time.Now(), cpu: map[string]time.Duration{}}
	for _, p := range m.procs {
		ps, err := m.readers[p.Name].Sample()
		if err != nil {
			return s, fmt.Errorf("%s: %w", p.Name, err)
		}
		s.cpu[p.Name] = ps.CPU
	}
	var err error
	if s.records, s.bytes, err = realkafka.TopicTotals(ctx, m.brokers, "shoal."); err != nil {
		return s, err
	}
	if s.cql, err = m.cqlCounts(ctx); err != nil {
		return s, err
	}
	return s, nil
}

// cqlCounts sums the requests Cassandra's coordinators served on the
// bench's keyspace since they started (its system_views tables).
func (m *unitMeter) cqlCounts(ctx context.Context) (cqlCounts, error) {
	var c cqlCounts
	for _, t := range []struct {
		table string
		into  *int64
	}{{"coordinator_read_latency", &c.reads}, {"coordinator_write_latency", &c.writes}, {"coordinator_scan_latency", &c.scans}} {
		rows, err := realcql.Query(ctx, m.cqlHost, "SELECT CAST(count AS text) FROM system_views."+t.table+" WHERE keyspace_name = '"+keyspace+"'")
		if err != nil {
			return c, fmt.Errorf("cassandra %s: %w", t.table, err)
		}
		for _, r := range rows {
			n, err := strconv.ParseInt(r[0], 10, 64)
			if err != nil {
				return c, fmt.Errorf("cassandra %s: count %q: %w", t.table, r[0], err)
			}
			*t.into += n
		}
	}
	return c, nil
}

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

// unitsFile is bench/units.json.
type unitsFile struct {
	Date       string  `json:"date"`
	Command    string  `json:"command"`
	Commit     string  `json:"commit"`
	CPU        string  `json:"cpu"`
	Cores      int     `json:"cores"`
	MemGiB     float64 `json:"mem_gib"`
	Kernel     string  `json:"kernel"`
	Go         string  `json:"go"`
	Kafka      string  `json:"kafka"`
	Cassandra  string  `json:"cassandra"`
	Topology   string  `json:"topology"`
	Partitions int     `json:"partitions"`
	// IdleCPUPercent is each kind's CPU without load (subtracted from
	// every phase), over IdleSeconds before the first phase.
	IdleCPUPercent map[string]float64 `json:"idle_cpu_percent"`
	IdleSeconds    float64            `json:"idle_s"`
	Units          []unitResult       `json:"units"`
}

// units runs the units scenario's phases on the started topology and
// writes their costs to opt.unitsOut and stdout.
func (c *cluster) units(ctx context.Context, opt options, topo string, bb *backbone, stdout, stderr io.Writer) ([]*load.Result, error) {
	m, err := newUnitMeter(bb, c.named)
	if err != nil {
		return nil, err
	}
	meta := machineInfo(opt)
	f := unitsFile{Date: meta.date, Command: meta.command, Commit: meta.commit, CPU: meta.cpu, Cores: meta.cores,
		MemGiB: meta.memGiB, Kernel: meta.kernel, Go: meta.goVersion, Kafka: realkafka.Version, Cassandra: bb.cqlVersion,
		Topology: topo, Partitions: opt.partitions}
	fmt.Fprintf(stderr, "%s: units, idle for %s\n", topo, opt.unitIdle)
	s0, err := m.sample(ctx)
	if err != nil {
		return nil, err
	}
	if !load.Sleep(ctx, opt.unitIdle) {
		return nil, ctx.Err()
	}
	s1, err := m.sample(ctx)
	if err != nil {
		return nil, err
	}
	idle := idleRates(s0, s1)
	f.IdleSeconds = s1.at.Sub(s0.at).Seconds()
	f.IdleCPUPercent = map[string]float64{}
	for name, r := range idle {
		f.IdleCPUPercent[kindOf(name)] += 100 * r
	}
	var results []*load.Result
	for _, ph := range opt.unitPhases(topo) {
		for _, p := range c.procs {
			if err := p.alive(); err != nil {
				return results, err
			}
		}
		cfg := ph.cfg
		c.addrs(&cfg)
		if ph.per == "connect" {
			cfg.Addr, cfg.SubscriberAddr = c.gws[0].mqtt, ""
		}
		cfg.BrokerPID = c.gws[0].pid()
		cfg.Processes = c.named
		before, err := m.sample(ctx)
		if err != nil {
			return results, err
		}
		// A message phase's log and database counts are those of its
		// measured window, as its CPU is: not its clients' connects and
		// subscriptions.
		window := make(chan [2]unitSample, 1)
		werr := make(chan error, 1)
		if ph.per == "message" {
			cfg.OnMeasure = func(d time.Duration) {
				go func() {
					a, err := m.sample(ctx)
					if err == nil && load.Sleep(ctx, d) {
						var b unitSample
						if b, err = m.sample(ctx); err == nil {
							window <- [2]unitSample{a, b}
							return
						}
					}
					werr <- errors.Join(err, ctx.Err())
				}()
			}
		}
		fmt.Fprintf(stderr, "%s: units, %s\n", topo, ph.name)
		res, err := load.Run(ctx, cfg, stderr)
		if err != nil {
			return results, fmt.Errorf("%s: %w", ph.name, err)
		}
		after, err := m.sample(ctx)
		if err != nil {
			return results, err
		}
		if ph.per == "message" {
			select {
			case w := <-window:
				before, after = w[0], w[1]
			case err := <-werr:
				return results, fmt.Errorf("%s: measured window: %w", ph.name, err)
			case <-ctx.Done():
				return results, ctx.Err()
			}
		}
		results = append(results, res)
		if err := writeJSON(filepath.Join(opt.out, topo+"-units-"+ph.name+".json"), res); err != nil {
			return results, err
		}
		u := unitCosts(ph, res, before, after, idle)
		f.Units = append(f.Units, u)
		writeUnitLine(stdout, u)
		if !load.Sleep(ctx, opt.pause+3*time.Second) { // disconnects applied, queues drained
			return results, ctx.Err()
		}
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return results, fmt.Errorf("encode units: %w", err)
	}
	if err := os.WriteFile(opt.unitsOut, append(b, '\n'), 0o644); err != nil {
		return results, fmt.Errorf("write units: %w", err)
	}
	fmt.Fprintln(stderr, "units written to", opt.unitsOut)
	fmt.Fprintln(stdout)
	writeUnitsTable(stdout, f.Units)
	var rd strings.Builder
	fmt.Fprintf(&rd, "# What a message and a connect cost (%s)\n\n```\n%s\n```\n\n", f.Date[:10], f.Command)
	fmt.Fprintf(&rd, "- Machine: %s, %d cores, %.0f GiB, kernel %s, %s; Kafka %s, Cassandra %s, one node each, on loopback.\n- Shoal: `%s`, topology `%s` (%s), %d partitions per event topic.\n- The costs: %s\n\n",
		f.CPU, f.Cores, f.MemGiB, f.Kernel, f.Go, f.Kafka, f.Cassandra, f.Commit, topo, topoText(topo), f.Partitions, unitsMethod)
	writeUnitsTable(&rd, f.Units)
	if err := os.WriteFile(filepath.Join(opt.out, "README.md"), []byte(rd.String()), 0o644); err != nil {
		return results, fmt.Errorf("write README: %w", err)
	}
	return results, nil
}

// unitsMethod says how the units are measured, for the README.
const unitsMethod = "CPU from /proc (user + system) of every process, less what the process spends idle over as long (measured for -unit-idle before the first phase): for messages over the generator's measured window, divided by the messages published in it (the fan-out's also by its deliveries); for connects over the whole phase (the connects, an idle hold, the disconnects), divided by the connects. Kafka records (over the same window for messages, the whole phase for connects) are the growth of the topics' end offsets, bytes the growth of their logs (one replica here: a replication factor of 3 writes them three times; compaction can shrink a log during a phase). CQL requests are those Cassandra's coordinators counted on Shoal's keyspace (`system_views.coordinator_*_latency`; lightweight transactions are not among the writes). A gateway's memory per connection is its RSS growth while the connections are held."

// writeUnitsTable writes the costs as a Markdown table.
func writeUnitsTable(w io.Writer, us []unitResult) {
	fmt.Fprintln(w, "| phase | per | count | CPU-µs: gateway | router | session | Shoal | Kafka | Cassandra | Kafka records | Kafka bytes | CQL reads | CQL writes | gateway bytes per connection | lost |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, u := range us {
		c := func(k string) string { return fmt.Sprintf("%.1f", u.CPUMicros[k]) }
		mem := "—"
		if u.GatewayRSSBytes > 0 {
			mem = fmt.Sprintf("%.0f", u.GatewayRSSBytes)
		}
		fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %.2f | %.0f | %.2f | %.2f | %s | %d |\n",
			u.Name, u.Per, u.Count, c("gateway"), c("router"), c("session"), c("shoal"), c("kafka"), c("cassandra"),
			u.KafkaRecords["total"], u.KafkaBytes, u.CQLReads, u.CQLWrites, mem, u.Lost)
		if u.CPUMicrosPerDelivery != nil {
			d := func(k string) string { return fmt.Sprintf("%.2f", u.CPUMicrosPerDelivery[k]) }
			fmt.Fprintf(w, "| %s | delivery | %d | %s | %s | %s | %s | %s | %s | | | | | | |\n",
				u.Name, u.Deliveries, d("gateway"), d("router"), d("session"), d("shoal"), d("kafka"), d("cassandra"))
		}
	}
}

// writeUnitLine prints one phase's costs.
func writeUnitLine(w io.Writer, u unitResult) {
	kinds := make([]string, 0, len(u.CPUMicros))
	for k := range u.CPUMicros {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	var cpu []string
	for _, k := range kinds {
		cpu = append(cpu, fmt.Sprintf("%s %.1f", k, u.CPUMicros[k]))
	}
	fmt.Fprintf(w, "%s: %d %ss; CPU-µs per %s: %s; kafka %.2f records, %.0f bytes; cql %.2f reads, %.2f writes; %d lost\n",
		u.Name, u.Count, u.Per, u.Per, strings.Join(cpu, ", "), u.KafkaRecords["total"], u.KafkaBytes, u.CQLReads, u.CQLWrites, u.Lost)
}
