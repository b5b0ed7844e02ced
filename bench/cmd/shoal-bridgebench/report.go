package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/shoal-mqtt/shoal/bench/load"
)

// The targets the parts are measured against.
const (
	// targetThroughputRatio: with the mapping, at most 25 % fewer
	// deliveries/s than without.
	targetThroughputRatio = 0.75
	// targetOutP99us: MQTT to Kafka at 10,000 msg/s in shoal all.
	targetOutP99us = 50_000
	// targetDistP99us: the same on a real Kafka, Shoal's roles as
	// processes and a shoal bridge.
	targetDistP99us = 100_000
)

// meta describes the machine and the command.
type meta struct {
	Date      string  `json:"date"`
	Command   string  `json:"command"`
	CPU       string  `json:"cpu"`
	Cores     int     `json:"cores"`
	MemGiB    float64 `json:"mem_gib"`
	Kernel    string  `json:"kernel"`
	GoVersion string  `json:"go"`
	Commit    string  `json:"commit,omitempty"`
	Shoal     string  `json:"shoal"`
	// ShoalVersion is what the binary says (`shoal version`): its commit
	// when built with -ldflags "-X main.version=…".
	ShoalVersion string `json:"shoal_version,omitempty"`
	LoadStart    string `json:"loadavg_start"`
	LoadEnd      string `json:"loadavg_end,omitempty"`
	Kcat         string `json:"kcat,omitempty"`
	Mosquitto    string `json:"mosquitto,omitempty"`
	FetchWait    string `json:"kcat_fetch_wait"`
	opt          options
}

// machineInfo reads what describes the machine now; what cannot be read
// is left empty.
func machineInfo(opt options) meta {
	m := meta{
		Date:      time.Now().UTC().Format(time.RFC3339),
		Command:   strings.TrimSpace("go run ./bench/cmd/shoal-bridgebench " + strings.Join(opt.args, " ")),
		Cores:     runtime.NumCPU(),
		GoVersion: runtime.Version(),
		FetchWait: opt.fetchWait.String(),
		opt:       opt,
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb float64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %g kB", &kb); err == nil {
			m.MemGiB = kb / (1 << 20)
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.LoadStart = loadNow()
	if out, err := exec.Command("git", "describe", "--always", "--dirty").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
	}
	if out, err := exec.Command("kcat", "-V").Output(); err == nil {
		for line := range strings.Lines(string(out)) {
			if strings.Contains(line, "librdkafka") {
				m.Kcat = strings.TrimSpace(line)
				break
			}
		}
	}
	if path, err := lookTool("mosquitto"); err == nil {
		// mosquitto -h prints its version first and exits 3.
		out, _ := exec.Command(path, "-h").CombinedOutput()
		if line, _, _ := strings.Cut(string(out), "\n"); strings.Contains(line, "version") {
			m.Mosquitto = strings.TrimSpace(line)
		}
	}
	return m
}

func loadNow() string {
	l, err := load.ReadLoadAvg()
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%.2f %.2f %.2f", l[0], l[1], l[2])
}

// writeReadme writes the results directory's README: how it was run and
// the tables.
func writeReadme(w io.Writer, res *results) {
	m := res.Meta
	o := m.opt
	fmt.Fprintf(w, "# Kafka data bridge (%s)\n\n", m.Date[:10])
	fmt.Fprintf(w, "```\n%s\n```\n\n", m.Command)
	fmt.Fprintf(w, "- Machine: %s, %d cores, %.0f GiB, kernel %s, %s; everything on loopback, sharing the machine with the generator, the clients and other work.\n",
		m.CPU, m.Cores, m.MemGiB, m.Kernel, m.GoVersion)
	if m.Commit != "" {
		fmt.Fprintf(w, "- Tree: `%s`; shoal binary `%s` (`%s`).\n", m.Commit, m.Shoal, m.ShoalVersion)
	}
	fmt.Fprintf(w, "- Load average (1, 5, 15 min) at the start: %s; at the end: %s.\n", m.LoadStart, m.LoadEnd)
	fmt.Fprintf(w, "- Clients: kcat (%s), %s; kcat consumers read with `isolation.level=read_committed` and `fetch.wait.max.ms=%d`, kcat -P writes with `linger.ms=0`.\n",
		m.Kcat, m.Mosquitto, o.fetchWait.Milliseconds())
	fmt.Fprintf(w, "- The mapping: `mqtt_filter: \"#\"`, `kafka_topic: %s`, `key: \"{topic}\"`, in tenant `bench`, the tenant of every client of the benchmark (a client's tenant is its id up to the first `-`; the generator's ids are `bench-…`).\n\n", bridgedTopic)
	writeTables(w, res)
	fmt.Fprintf(w, "\nJSON: `bridge.json` (everything), and the generator's result of every throughput run (`<scenario>-<broker>-r<round>.json`); the processes' logs are in `logs/`.\n")
	for _, e := range res.Errors {
		fmt.Fprintf(w, "\n**Error:** %s\n", e)
	}
}

// writeTables writes the tables of the parts that ran, as markdown.
func writeTables(w io.Writer, res *results) {
	if len(res.Throughput) > 0 {
		writeThroughputTables(w, res)
	}
	if len(res.OutLatency) > 0 {
		o := res.Meta.opt
		fmt.Fprintf(w, "\n## MQTT to Kafka latency\n\n")
		fmt.Fprintf(w, "`shoal all` with the out mapping; %d publishers (one topic each) share %.0f msg/s, %s warm-up, %s measured; a read_committed kcat tails `%s` and prints each payload, which carries its scheduled send time. Latency: from the scheduled send time to kcat's line read by the benchmark. Counts: every message sent, warm-up included, against the records read by the end of the drain. Target: p99 ≤ %s ms.\n\n",
			o.outPublishers, o.outRate, o.warmup, o.outDuration, bridgedTopic, ms(targetOutP99us))
		writeLatencyTable(w, res.OutLatency, true)
	}
	if len(res.InLatency) > 0 {
		o := res.Meta.opt
		fmt.Fprintf(w, "\n## Kafka to MQTT latency\n\n")
		fmt.Fprintf(w, "`shoal all` with the in mapping alone (`kafka_topic: %s`, `mqtt_topic: \"bench/{key}/in\"`, QoS 1, tenant `bench`); the benchmark writes records (%d keys, round robin) at a fixed rate to the standard input of a `kcat -P -X linger.ms=0`; `mosquitto_sub -q 1 -t 'bench/#' -v` prints each message. Latency: from the time the line was due to be written to kcat to mosquitto_sub's line read by the benchmark; %s warm-up, %s measured. Lines are padded to %d bytes: kcat 1.7.1 reads its input in blocks and produces a line only once the block that ends it is full (%d-byte lines are produced as written). \"Stuck at the end\": the records that had not arrived when nothing had arrived for 3 s after the last was written (they are in the percentiles, which then count those 3 s); \"released after\": how long after that they all had, one more record per key being written every 500 ms; \"without the last 2 s\": the percentiles of the records due before the last %s of the window.\n\n",
			inTopic, o.inKeys, o.warmup, o.inDuration, lineSize, lineSize, steadyTail)
		writeLatencyTable(w, res.InLatency, false)
	}
	if c := res.CatchUp; c != nil {
		writeCatchUpTable(w, c)
	}
	if d := res.Distributed; d != nil && len(d.Runs) > 0 {
		writeDistributedTable(w, res.Meta.opt, d)
	}
}

var distProcs = []string{"gateway", "router", "session", "bridge", "kafka", "cassandra", "kcat"}

func writeDistributedTable(w io.Writer, o options, d *distributedRun) {
	fmt.Fprintf(w, "\n## MQTT to Kafka latency, distributed\n\n")
	fmt.Fprintf(w, "Apache Kafka %s (KRaft, one node) and Cassandra %s (one node) as local JVMs with the full JIT, %d partitions per event topic; `shoal session`, `shoal router`, one `shoal gateway` and a `shoal bridge` with the out mapping, each a process; %d publishers share %.0f msg/s on the gateway, %s warm-up, %s measured, after an unrecorded run of %s; a read_committed kcat tails `%s` on Kafka. JIT compiling: the CPU of each JVM's JIT compiler threads over the run, in %% of one core (a JVM still compiling has not warmed up). Target: p99 ≤ %s ms.\n\n",
		d.Kafka, d.Cassandra, distPartitions, o.outPublishers, o.outRate, o.warmup, o.outDuration, o.prime, bridgedTopic, ms(targetDistP99us))
	fmt.Fprintf(w, "| QoS | msg/s | sent | received | lost | repeats | reordered | p50 ms | p99 ms | p99.9 ms | max ms | CPU %%: %s | JIT compiling %%: kafka, cassandra | target |\n", strings.Join(distProcs, ", "))
	fmt.Fprintf(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|\n")
	for _, r := range d.Runs {
		p50, p99, p999, pmax := percentiles(r.Latency)
		c := r.Counts
		verdict := "met"
		if !(p99 <= targetDistP99us) || c.Lost > 0 || c.Repeats > 0 {
			verdict = "missed"
		}
		cpus := make([]string, len(distProcs))
		for i, n := range distProcs {
			cpus[i] = pct(r.Processes, n)
		}
		jit := "–"
		if len(r.JITPercent) > 0 {
			jit = fmt.Sprintf("%.0f, %.0f", r.JITPercent["kafka"], r.JITPercent["cassandra"])
		}
		fmt.Fprintf(w, "| %d | %.0f | %d | %d | %d | %d | %d | %s | %s | %s | %s | %s | %s | %s |\n", r.QoS, r.Rate,
			c.Sent, c.Received, c.Lost, c.Repeats, c.Reordered, ms(p50), ms(p99), ms(p999), ms(pmax), strings.Join(cpus, ", "), jit, verdict)
	}
	for _, r := range d.Runs {
		if r.Errors != "" {
			fmt.Fprintf(w, "\nQoS %d: errors: %s\n", r.QoS, r.Errors)
		}
	}
}

func writeThroughputTables(w io.Writer, res *results) {
	fmt.Fprintf(w, "## Throughput: saturating pairs, with and without the mapping\n\n")
	fmt.Fprintf(w, "The generator's `pairs-qos0` (50 pairs, 64 B, window 100) and `pairs-qos1` (50 pairs, 64 B, 64 in flight), %s warm-up, %s measured, %d round(s); Mosquitto, `shoal all` without mappings and `shoal all` with the out mapping, fresh for every run, their order rotating each round. Medians of the rounds (min–max). Target: with the mapping ≥ %.2f× the deliveries/s without.\n\n",
		res.Meta.opt.warmup, res.Meta.opt.duration, res.Meta.opt.rounds, targetThroughputRatio)
	fmt.Fprintf(w, "| scenario | broker | deliveries/s | broker CPU %% | deliveries per CPU-s | lost + undelivered | × shoal without mappings |\n")
	fmt.Fprintf(w, "|---|---|---:|---:|---:|---:|---:|\n")
	for _, sc := range throughputScenarios {
		for _, b := range throughputBrokers {
			runs := selectRuns(res.Throughput, sc.name, b)
			if len(runs) == 0 {
				continue
			}
			var missing uint64
			for _, r := range runs {
				missing += r.Lost + r.Undelivered
			}
			ratio := "1"
			if b != brokerShoal {
				ratio = fmtRatio(ratios(res.Throughput, sc.name, b, brokerShoal))
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %d | %s |\n", sc.name, b,
				spreadOf(runs, func(r throughputRun) float64 { return r.DeliveriesPerSec }, "%.0f"),
				spreadOf(runs, func(r throughputRun) float64 { return r.BrokerCPUPercent }, "%.0f"),
				spreadOf(runs, func(r throughputRun) float64 { return r.DeliveriesPerCPUSec }, "%.0f"),
				missing, ratio)
		}
	}
	var rows []throughputRun
	for _, r := range res.Throughput {
		if r.Bridge != nil {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "\nThe bridge in each run with the mapping: the records it wrote in the measured window and the PUBLISH the gateway received in it (Shoal's /metrics, `%s` and `%s`, read at the window's edges); the lag at the window's end (received minus bridged, one scrape; in brackets `%s` as the bridge last measured it, every 5 s); how long after the window the bridge had a record for every message received; and the committed records of `%s` read by kcat then, against the messages received.\n\n",
		metricBridgeRecords, metricReceived, metricBridgeLag, bridgedTopic)
	fmt.Fprintf(w, "| scenario | round | bridged/s | received/s | lag at the end | caught up after | records in %s / received |\n|---|---:|---:|---:|---:|---:|---|\n", bridgedTopic)
	for _, r := range rows {
		bw := r.Bridge
		lag := fmt.Sprintf("%d", bw.LagAtEnd)
		if bw.LagMetricAtEnd != nil {
			lag += fmt.Sprintf(" (%.0f)", *bw.LagMetricAtEnd)
		}
		caught := fmt.Sprintf("not in %.0f s", bw.CaughtUpWaitSec)
		if bw.CaughtUpSec != nil {
			caught = fmt.Sprintf("%.1f s", *bw.CaughtUpSec)
		}
		fmt.Fprintf(w, "| %s | %d | %.0f | %.0f | %s | %s | %d / %d |\n", r.Scenario, r.Round,
			bw.RecordsPerSec, bw.ReceivedPerSec, lag, caught, bw.TopicRecords, bw.TotalReceived)
	}
}

// selectRuns returns the runs of scenario on broker.
func selectRuns(runs []throughputRun, scenario, broker string) []throughputRun {
	var out []throughputRun
	for _, r := range runs {
		if r.Scenario == scenario && r.Broker == broker {
			out = append(out, r)
		}
	}
	return out
}

// ratios returns, round by round, a's deliveries/s over b's in scenario.
func ratios(runs []throughputRun, scenario, a, b string) load.Spread {
	var xs []float64
	for _, ra := range selectRuns(runs, scenario, a) {
		for _, rb := range selectRuns(runs, scenario, b) {
			if ra.Round == rb.Round {
				xs = append(xs, load.Ratio(ra.DeliveriesPerSec, rb.DeliveriesPerSec))
			}
		}
	}
	return load.Summarize(xs)
}

func spreadOf(runs []throughputRun, f func(throughputRun) float64, format string) string {
	xs := make([]float64, len(runs))
	for i, r := range runs {
		xs[i] = f(r)
	}
	s := load.Summarize(xs)
	if s.N == 0 {
		return "–"
	}
	if s.N == 1 || s.Min == s.Max {
		return fmt.Sprintf(format, s.Median)
	}
	return fmt.Sprintf(format+" ("+format+"–"+format+")", s.Median, s.Min, s.Max)
}

func fmtRatio(s load.Spread) string {
	switch {
	case s.N == 0:
		return "–"
	case s.N == 1 || s.Min == s.Max:
		return fmt.Sprintf("%.2f", s.Median)
	}
	return fmt.Sprintf("%.2f (%.2f–%.2f)", s.Median, s.Min, s.Max)
}

// ms formats µs as milliseconds.
func ms(us float64) string {
	switch {
	case math.IsNaN(us):
		return "–"
	case us < 10_000:
		return fmt.Sprintf("%.2f", us/1000)
	case us < 100_000:
		return fmt.Sprintf("%.1f", us/1000)
	}
	return fmt.Sprintf("%.0f", us/1000)
}

func pct(us []load.ProcUsage, name string) string {
	for _, p := range us {
		if p.Name == name {
			return fmt.Sprintf("%.0f", p.CPUPercent)
		}
	}
	return "–"
}

func percentiles(l *load.LatencySummary) (p50, p99, p999, pmax float64) {
	if l == nil {
		return math.NaN(), math.NaN(), math.NaN(), math.NaN()
	}
	return l.P50, l.P99, l.P999, l.Max
}

func writeLatencyTable(w io.Writer, runs []latencyRun, out bool) {
	if out {
		fmt.Fprintf(w, "| QoS | msg/s | sent | received | lost | repeats | reordered | p50 ms | p99 ms | p99.9 ms | max ms | CPU %%: shoal, kcat | target |\n")
		fmt.Fprintf(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n")
	} else {
		fmt.Fprintf(w, "| records/s | sent | received | lost | repeats | reordered | p50 ms | p99 ms | p99.9 ms | max ms | p50 / p99 ms without the last 2 s | stuck at the end | released after | CPU %%: shoal, kcat, mosquitto_sub |\n")
		fmt.Fprintf(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|\n")
	}
	for _, r := range runs {
		p50, p99, p999, pmax := percentiles(r.Latency)
		c := r.Counts
		if out {
			verdict := "met"
			if !(p99 <= targetOutP99us) || c.Lost > 0 || c.Repeats > 0 {
				verdict = "missed"
			}
			fmt.Fprintf(w, "| %d | %.0f | %d | %d | %d | %d | %d | %s | %s | %s | %s | %s, %s | %s |\n", r.QoS, r.Rate,
				c.Sent, c.Received, c.Lost, c.Repeats, c.Reordered, ms(p50), ms(p99), ms(p999), ms(pmax),
				pct(r.Processes, "shoal"), pct(r.Processes, "kcat"), verdict)
		} else {
			released := "–"
			if r.StuckAtEnd > 0 {
				released = "not in the drain"
				if r.ReleasedAfterSec != nil {
					released = fmt.Sprintf("%.1f s", *r.ReleasedAfterSec)
				}
			}
			s50, s99, _, _ := percentiles(r.SteadyLatency)
			fmt.Fprintf(w, "| %.0f | %d | %d | %d | %d | %d | %s | %s | %s | %s | %s / %s | %d | %s | %s, %s, %s |\n", r.Rate,
				c.Sent, c.Received, c.Lost, c.Repeats, c.Reordered, ms(p50), ms(p99), ms(p999), ms(pmax),
				ms(s50), ms(s99), r.StuckAtEnd, released, pct(r.Processes, "shoal"), pct(r.Processes, "kcat"), pct(r.Processes, "mosquitto_sub"))
		}
	}
	for _, r := range runs {
		if r.Errors != "" {
			fmt.Fprintf(w, "\n%s at %.0f/s: errors: %s\n", r.Part, r.Rate, r.Errors)
		}
		if r.Counts.Malformed > 0 {
			fmt.Fprintf(w, "\n%s at %.0f/s: %d malformed payloads, the first: %s\n", r.Part, r.Rate, r.Counts.Malformed, r.Counts.FirstBad)
		}
	}
}

func secs(v *float64) string {
	if v == nil {
		return "–"
	}
	return fmt.Sprintf("%.1f s", *v)
}

func writeCatchUpTable(w io.Writer, c *catchUpRun) {
	fmt.Fprintf(w, "\n## Catch-up after the bridge was stopped\n\n")
	fmt.Fprintf(w, "`shoal all` without mappings and a `shoal bridge` with the out mapping on its embedded backbone (TCP listener, SASL/SCRAM credentials of its client.properties); %d publishers share %.0f msg/s at QoS 1; a read_committed kcat tails `%s`. After %.0f s the bridge is stopped (SIGTERM) for %.0f s, then started again (the same instance id). Times are from the start of the new process. \"Caught up\": every record from then on arrived within %.0f ms of its send time.\n\n",
		c.Publishers, c.Rate, bridgedTopic, c.BeforeSec, c.StoppedSec, c.ThresholdMs)
	fmt.Fprintf(w, "| backlog at the restart | ready | backlog read | caught up | `%s`: 0 at; max; last (at) | catch-up rate | CPU %% catching up: shoal, bridge, kcat | steady p50 / p99 ms |\n", metricBridgeLag)
	fmt.Fprintf(w, "|---:|---:|---:|---:|---|---:|---|---|\n")
	p50, p99, _, _ := percentiles(c.Steady)
	fmt.Fprintf(w, "| %d | %.1f s | %s | %s | %s; %.0f; %.0f (%.1f s) | %.0f records/s | %s, %s, %s | %s / %s |\n", c.Backlog, c.ReadySec,
		secs(c.BacklogReadSec), secs(c.CaughtUpSec), secs(c.LagZeroSec), c.LagMax, c.LagLast, c.LagLastSec, c.CatchUpRate,
		pct(c.Processes, "shoal"), pct(c.Processes, "bridge"), pct(c.Processes, "kcat"), ms(p50), ms(p99))
	f := c.Final
	fmt.Fprintf(w, "\nAt the end, `%s` read again from the beginning by a read_committed kcat: %d of the %d messages sent (%d acknowledged, %d refused) are there, %d lost, %d repeated, %d out of order per publisher.\n",
		bridgedTopic, f.Received, f.Sent, c.Acked, c.Refused, f.Lost, f.Repeats, f.Reordered)
	if c.Errors != "" {
		fmt.Fprintf(w, "\nErrors: %s\n", c.Errors)
	}
}
