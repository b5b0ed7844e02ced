package main

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/shoal-mqtt/shoal/bench/load"
	"github.com/shoal-mqtt/shoal/internal/localserver/realcql"
	"github.com/shoal-mqtt/shoal/internal/localserver/realkafka"
)

// The distributed latency target: 50 pairs at 10,000 msg/s with p50 ≤ 5 ms, p99 ≤
// 25 ms and nothing lost.
const (
	targetP50us = 5000
	targetP99us = 25000
)

// meta describes the machine and the command for the README.
type meta struct {
	date        string
	command     string
	cpu         string
	cores       int
	memGiB      float64
	kernel      string
	goVersion   string
	commit      string
	loadStart   string
	shoalConfig string
	backbones   []backboneStart // in start order
	opt         options
}

// runHeader is what every result file of the units and the ceilings says
// first: when, by which command and commit, on what machine and backbone.
type runHeader struct {
	Date       string `json:"date"`
	Command    string `json:"command"`
	Commit     string `json:"commit"`
	CPU        string `json:"cpu"`
	Cores      int    `json:"cores"`
	Kafka      string `json:"kafka"`
	Cassandra  string `json:"cassandra"`
	Partitions int    `json:"partitions"`
}

// header is the run's header on backbone bb.
func (m meta) header(bb *backbone) runHeader {
	return runHeader{Date: m.date, Command: m.command, Commit: m.commit, CPU: m.cpu, Cores: m.cores,
		Kafka: realkafka.Version, Cassandra: bb.cqlVersion, Partitions: m.opt.partitions}
}

// backboneStart is one backbone's start, for the README.
type backboneStart struct {
	nodes int
	took  time.Duration
}

// machineInfo reads what describes the machine now; what cannot be read
// is left empty.
func machineInfo(opt options) meta {
	m := meta{
		date:      time.Now().UTC().Format(time.RFC3339),
		command:   strings.TrimSpace("go run ./bench/cmd/shoal-distbench " + strings.Join(opt.args, " ")),
		cores:     runtime.NumCPU(),
		goVersion: runtime.Version(),
		opt:       opt,
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb float64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %g kB", &kb); err == nil {
			m.memGiB = kb / (1 << 20)
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = strings.TrimSpace(string(b))
	}
	if l, err := load.ReadLoadAvg(); err == nil {
		m.loadStart = fmt.Sprintf("%.2f %.2f %.2f", l[0], l[1], l[2])
	}
	if out, err := exec.Command("git", "describe", "--always", "--dirty").Output(); err == nil {
		m.commit = strings.TrimSpace(string(out))
	}
	return m
}

// group is the runs of one topology and QoS.
type group struct {
	topo, name string
	runs       []*load.Result
}

// groups splits results by topology and scenario name, in order of first
// appearance.
func groups(results []*load.Result) []*group {
	var gs []*group
	for _, r := range results {
		var g *group
		for _, x := range gs {
			if x.topo == r.Label && x.name == r.Name {
				g = x
			}
		}
		if g == nil {
			g = &group{topo: r.Label, name: r.Name}
			gs = append(gs, g)
		}
		g.runs = append(g.runs, r)
	}
	return gs
}

// procNames are the names of the processes measured: the gateways in
// order of their names, then the others in order of first appearance.
func procNames(results []*load.Result) []string {
	var gws, others []string
	for _, r := range results {
		for _, p := range r.Processes {
			switch {
			case slices.Contains(gws, p.Name) || slices.Contains(others, p.Name):
			case strings.HasPrefix(p.Name, "gateway"):
				gws = append(gws, p.Name)
			default:
				others = append(others, p.Name)
			}
		}
	}
	slices.Sort(gws)
	return append(gws, others...)
}

// latency returns a percentile of r in µs, NaN without a histogram.
func latency(r *load.Result, f func(*load.LatencySummary) float64) float64 {
	if r.Latency == nil || r.Latency.Count == 0 {
		return math.NaN()
	}
	return f(r.Latency)
}

func p50(l *load.LatencySummary) float64  { return l.P50 }
func p99(l *load.LatencySummary) float64  { return l.P99 }
func p999(l *load.LatencySummary) float64 { return l.P999 }
func pmax(l *load.LatencySummary) float64 { return l.Max }

// procCPU returns the CPU % of the named process in r, NaN if absent.
func procCPU(r *load.Result, name string) float64 {
	for _, p := range r.Processes {
		if p.Name == name {
			return p.CPUPercent
		}
	}
	return math.NaN()
}

// missing counts the deliveries that did not happen: lost, and not
// delivered by the end of the drain.
func missing(r *load.Result) uint64 { return r.Lost + r.Tail }

// faults counts what else went wrong in a run: duplicates, reordering,
// foreign or malformed payloads, refused publishes, lost connections and
// errors.
func faults(r *load.Result) uint64 {
	return r.Duplicates + r.Reordered + r.Foreign + r.Malformed + r.Refused + r.LostConns + uint64(r.ErrorsN)
}

func spread(rs []*load.Result, f func(*load.Result) float64) load.Spread {
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = f(r)
	}
	return load.Summarize(xs)
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

func msSpread(s load.Spread) string {
	if s.N <= 1 {
		return ms(s.Median)
	}
	return fmt.Sprintf("%s (%s–%s)", ms(s.Median), ms(s.Min), ms(s.Max))
}

func pct(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf("%.0f", x)
}

func rate(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf("%.0f", x)
}

func loadAvg(r *load.Result) string {
	if r.LoadAvg == nil {
		return "–"
	}
	return fmt.Sprintf("%.2f", r.LoadAvg.End[0])
}

// verdict says whether a group meets the target, on the medians of its
// rounds, with nothing missing in any round.
func verdict(g *group) string {
	p50s, p99s := spread(g.runs, func(r *load.Result) float64 { return latency(r, p50) }), spread(g.runs, func(r *load.Result) float64 { return latency(r, p99) })
	var miss []string
	if !(p50s.Median <= targetP50us) {
		miss = append(miss, "p50")
	}
	if !(p99s.Median <= targetP99us) {
		miss = append(miss, "p99")
	}
	for _, r := range g.runs {
		if missing(r) > 0 {
			miss = append(miss, "loss")
			break
		}
	}
	if len(miss) == 0 {
		return "met"
	}
	return "missed (" + strings.Join(miss, ", ") + ")"
}

// writeRunLine prints one run's headline figures.
func writeRunLine(w io.Writer, r *load.Result) {
	if r.Scenario == scenPairs {
		fmt.Fprintf(w, "%s %s round %d: %s deliveries/s (%s sent/s), %s per Shoal CPU-second, p50 %s ms, p99 %s ms, %d lost/undelivered, %d other faults; CPU %%",
			r.Label, r.Name, r.Round, rate(r.Measured.DeliveriesPerSec), rate(r.Measured.SentPerSec), rate(perCPUSecond(r, isShoal)),
			ms(latency(r, p50)), ms(latency(r, p99)), missing(r), faults(r))
	} else {
		fmt.Fprintf(w, "%s %s round %d: p50 %s ms, p99 %s ms, p99.9 %s ms, %s deliveries/s, %d lost/undelivered, %d other faults; CPU %%",
			r.Label, r.Name, r.Round, ms(latency(r, p50)), ms(latency(r, p99)), ms(latency(r, p999)),
			rate(r.Measured.DeliveriesPerSec), missing(r), faults(r))
	}
	for _, p := range r.Processes {
		fmt.Fprintf(w, " %s %.0f", p.Name, p.CPUPercent)
	}
	if r.Generator != nil {
		fmt.Fprintf(w, " generator %.0f", r.Generator.CPUPercent)
	}
	fmt.Fprintf(w, "; load %s\n", loadAvg(r))
	for _, e := range r.Errors {
		fmt.Fprintf(w, "  error: %s\n", e)
	}
}

// writeConnectLine prints a connections run as a line: connects/s, the
// CONNECT-to-CONNACK latency and each process's CPU.
func writeConnectLine(w io.Writer, r *load.Result) {
	cs := r.Connect
	if cs == nil {
		fmt.Fprintf(w, "%s %s round %d: no connect phase\n", r.Label, r.Name, r.Round)
		return
	}
	var p50v, p99v float64
	if l := cs.Latency; l != nil {
		p50v, p99v = l.P50, l.P99
	}
	fmt.Fprintf(w, "%s %s round %d: %d of %d connected, %.0f connects/s, CONNACK p50 %s ms, p99 %s ms; CPU %%",
		r.Label, r.Name, r.Round, cs.Connected, cs.Attempted, cs.PerSec, ms(p50v), ms(p99v))
	for _, p := range r.Processes {
		fmt.Fprintf(w, " %s %.0f", p.Name, p.CPUPercent)
	}
	fmt.Fprintln(w)
}

// writeTables writes the summary, CPU and per-run tables as markdown.
func writeTables(w io.Writer, results []*load.Result) {
	gs := groups(results)
	names := procNames(results)
	fmt.Fprintf(w, "| topology | scenario | p50 ms | p99 ms | p99.9 ms | deliveries/s | lost + undelivered | other faults | target |\n")
	fmt.Fprintf(w, "|---|---|---:|---:|---:|---:|---:|---:|---|\n")
	for _, g := range gs {
		var lost, other uint64
		for _, r := range g.runs {
			lost += missing(r)
			other += faults(r)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %d | %d | %s |\n", g.topo, g.name,
			msSpread(spread(g.runs, func(r *load.Result) float64 { return latency(r, p50) })),
			msSpread(spread(g.runs, func(r *load.Result) float64 { return latency(r, p99) })),
			msSpread(spread(g.runs, func(r *load.Result) float64 { return latency(r, p999) })),
			rate(spread(g.runs, func(r *load.Result) float64 { return r.Measured.DeliveriesPerSec }).Median),
			lost, other, verdict(g))
	}
	fmt.Fprintf(w, "\nCPU over the measured window, %% of one core (median of the rounds):\n\n")
	fmt.Fprintf(w, "| topology | scenario |")
	for _, n := range names {
		fmt.Fprintf(w, " %s |", n)
	}
	fmt.Fprintf(w, " generator | load average (1 min) |\n|---|---|")
	for range names {
		fmt.Fprintf(w, "---:|")
	}
	fmt.Fprintf(w, "---:|---|\n")
	for _, g := range gs {
		fmt.Fprintf(w, "| %s | %s |", g.topo, g.name)
		for _, n := range names {
			fmt.Fprintf(w, " %s |", pct(spread(g.runs, func(r *load.Result) float64 { return procCPU(r, n) }).Median))
		}
		gen := spread(g.runs, func(r *load.Result) float64 {
			if r.Generator == nil {
				return math.NaN()
			}
			return r.Generator.CPUPercent
		})
		la := spread(g.runs, func(r *load.Result) float64 {
			if r.LoadAvg == nil {
				return math.NaN()
			}
			return r.LoadAvg.End[0]
		})
		loads := "–"
		if la.N > 0 {
			loads = fmt.Sprintf("%.2f–%.2f", la.Min, la.Max)
		}
		fmt.Fprintf(w, " %s | %s |\n", pct(gen.Median), loads)
	}
	fmt.Fprintf(w, "\nEvery run:\n\n| topology | scenario | round | p50 ms | p99 ms | p99.9 ms | max ms | deliveries/s | lost + undelivered | other faults | CPU %%: ")
	fmt.Fprintf(w, "%s, generator | load |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|\n", strings.Join(names, ", "))
	for _, r := range results {
		cpus := make([]string, 0, len(names)+1)
		for _, n := range names {
			cpus = append(cpus, pct(procCPU(r, n)))
		}
		gen := math.NaN()
		if r.Generator != nil {
			gen = r.Generator.CPUPercent
		}
		cpus = append(cpus, pct(gen))
		fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %s | %s | %d | %d | %s | %s |\n", r.Label, r.Name, r.Round,
			ms(latency(r, p50)), ms(latency(r, p99)), ms(latency(r, p999)), ms(latency(r, pmax)),
			rate(r.Measured.DeliveriesPerSec), missing(r), faults(r), strings.Join(cpus, " / "), loadAvg(r))
	}
}

// writeSummary prints the tables of the scenario.
func writeSummary(w io.Writer, scenario string, results []*load.Result) {
	if scenario == scenPairs {
		fmt.Fprintln(w)
		writePairsTables(w, results)
		return
	}
	fmt.Fprintf(w, "\nTarget: p50 ≤ %s ms, p99 ≤ %s ms, nothing lost (medians of the rounds).\n\n", ms(targetP50us), ms(targetP99us))
	writeTables(w, results)
}

// writeReadme writes the results directory's README.md.
func writeReadme(path string, m meta, results []*load.Result) error {
	var b bytes.Buffer
	o := m.opt
	title := "Distributed mode on a real Kafka and Cassandra"
	if o.scenario == scenPairs {
		title = "Throughput of distributed mode on a real Kafka and Cassandra"
	}
	fmt.Fprintf(&b, "# %s (%s)\n\n", title, m.date[:10])
	fmt.Fprintf(&b, "```\n%s\n```\n\n", m.command)
	fmt.Fprintf(&b, "- Machine: %s, %d cores, %.0f GiB, kernel %s, %s; Kafka %s (KRaft), Cassandra %s, all on loopback, sharing the machine with the generator and other work.\n",
		m.cpu, m.cores, m.memGiB, m.kernel, m.goVersion, realkafka.Version, realcql.Version)
	if m.commit != "" {
		fmt.Fprintf(&b, "- Shoal: `%s`.\n", m.commit)
	}
	jit := "full JIT (C1 and C2)"
	if o.c1Only {
		jit = "C1 compiler only"
	}
	if o.scenario == scenPairs {
		fmt.Fprintf(&b, "- Load: the pairs scenario, %d publisher → subscriber pairs publishing as fast as flow control allows (QoS 0: an end-to-end window of %d messages per publisher; QoS 1 and 2: %d in flight per publisher), %d B payloads; ",
			o.clients, o.window, o.inflight, o.payload)
	} else {
		fmt.Fprintf(&b, "- Load: the latency scenario, %d publisher → subscriber pairs, %.0f msg/s in total, %d B payloads (QoS 1: %d in flight per publisher); ",
			o.clients, o.rate, o.payload, o.inflight)
	}
	fmt.Fprintf(&b, "%s warm-up, %s measured, %d round(s), %d partitions per event topic; QoS order alternates per round; an unrecorded run of %s first per topology; JVMs with the %s.\n",
		o.warmup, o.duration, o.rounds, o.partitions, o.prime, jit)
	fmt.Fprintf(&b, "- Topologies, in the order run:\n")
	for _, t := range o.topologies {
		fmt.Fprintf(&b, "  - `%s`: %s.\n", t, topoText(t))
	}
	for _, s := range m.backbones {
		if s.nodes == 1 {
			fmt.Fprintf(&b, "- Backbone of one Kafka broker and one Cassandra node (the configuration's replication factors, 1): up after %s.\n", s.took.Round(100*time.Millisecond))
			continue
		}
		fmt.Fprintf(&b, "- Backbone of %d Kafka brokers (a KRaft quorum of all, topics of %d replicas with min.insync.replicas 2) and a Cassandra ring of %d (%d MiB heaps, keyspace of %d replicas at QUORUM), started once the one-node backbone was stopped: up after %s.\n",
			s.nodes, s.nodes, s.nodes, ringHeapMiB, s.nodes, s.took.Round(100*time.Millisecond))
	}
	fmt.Fprintf(&b, "- Load average at the start: %s.\n", m.loadStart)
	fmt.Fprintf(&b, "- Shoal configuration (every process; the command line adds Kafka, CQL, partitions, listeners and, on the cluster, the replication factors):\n\n```yaml\n%s```\n\n", m.shoalConfig)
	if o.scenario == scenPairs {
		writePairsTables(&b, results)
		fmt.Fprintf(&b, "\nDelivered msg/s are over the measured window, medians of the rounds (min–max); the ratio is to the first topology's median at the same QoS. CPU is summed over the processes of a kind; \"Shoal\" is the gateways, routers and session services, \"all\" adds the JVMs. \"Lost + undelivered\" counts sequence gaps and messages not delivered by the end of the drain (QoS 0 may drop); \"other faults\" duplicates, reordering, refused publishes, lost connections and errors. JSON results: one file per run; the logs of the Shoal processes are in `logs/`.\n")
	} else {
		fmt.Fprintf(&b, "Target: p50 ≤ %s ms, p99 ≤ %s ms, nothing lost; judged on the medians of the rounds, with no loss in any round.\n\n", ms(targetP50us), ms(targetP99us))
		writeTables(&b, results)
		writeOutsideTables(&b, filepath.Dir(path))
		fmt.Fprintf(&b, "\nLatency is from the scheduled send time to the subscriber's read (no coordinated omission). \"Lost + undelivered\" counts sequence gaps and messages not delivered by the end of the drain; \"other faults\" duplicates, reordering, refused publishes, lost connections and errors. JSON results: one file per run; the logs of the Shoal processes are in `logs/`.\n")
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write README: %w", err)
	}
	return nil
}

// topoText describes a topology's processes and where the clients connect.
func topoText(topo string) string {
	switch topo {
	case topoOne:
		return "shoal session, shoal router and one gateway; publishers and subscribers on it"
	case topoTwo:
		return "shoal session, shoal router and two gateways; publishers on gateway-1, subscribers on gateway-2"
	}
	return "2 session services, 2 routers and 3 gateways on the cluster backbone; pair i's publisher on gateway i mod 3, its subscriber on the next gateway"
}

// The kinds of processes, in table order: Shoal's roles, then the JVMs.
var procKinds = [...]string{"gateway", "router", "session", "kafka", "cassandra"}

// kindOf returns the kind of a process from its name (gateway-2: gateway).
func kindOf(name string) string {
	k, _, _ := strings.Cut(name, "-")
	return k
}

// isShoal reports whether a kind is one of Shoal's roles.
func isShoal(kind string) bool { return kind == "gateway" || kind == "router" || kind == "session" }

// anyKind is every kind.
func anyKind(string) bool { return true }

// kindSum sums f over the processes of r whose kind is accepted; NaN when
// none is.
func kindSum(r *load.Result, accept func(string) bool, f func(load.ProcUsage) float64) float64 {
	sum, n := 0.0, 0
	for _, p := range r.Processes {
		if accept(kindOf(p.Name)) {
			sum += f(p)
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return sum
}

func isKind(kind string) func(string) bool { return func(k string) bool { return k == kind } }

func cpuPct(p load.ProcUsage) float64 { return p.CPUPercent }
func cpuSec(p load.ProcUsage) float64 { return p.CPUSeconds }
func rssMiB(p load.ProcUsage) float64 { return float64(p.RSSEnd) / (1 << 20) }

// perCPUSecond is the measured window's deliveries per CPU-second of the
// processes of the accepted kinds; NaN without CPU time.
func perCPUSecond(r *load.Result, accept func(string) bool) float64 {
	cpu := kindSum(r, accept, cpuSec)
	if !(cpu > 0) {
		return math.NaN()
	}
	return float64(r.Measured.Deliveries) / cpu
}

func deliveries(r *load.Result) float64 { return r.Measured.DeliveriesPerSec }

func rateSpread(s load.Spread) string {
	if s.N <= 1 {
		return rate(s.Median)
	}
	return fmt.Sprintf("%s (%s–%s)", rate(s.Median), rate(s.Min), rate(s.Max))
}

func ratio(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "–"
	}
	return fmt.Sprintf("%.2f", x)
}

// writePairsTables writes the throughput tables as markdown: delivered
// msg/s and their ratio to the first topology's, CPU and memory per kind of
// process, and every run.
func writePairsTables(w io.Writer, results []*load.Result) {
	gs := groups(results)
	if len(gs) == 0 {
		return
	}
	first := gs[0].topo
	base := map[string]float64{} // scenario name: the first topology's median
	for _, g := range gs {
		if g.topo == first {
			base[g.name] = spread(g.runs, deliveries).Median
		}
	}
	fmt.Fprintf(w, "| topology | scenario | delivered msg/s | vs %s | per Shoal CPU-second | per CPU-second, JVMs included | p50 ms | p99 ms | lost + undelivered | other faults |\n", first)
	fmt.Fprintf(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, g := range gs {
		var lost, other uint64
		for _, r := range g.runs {
			lost += missing(r)
			other += faults(r)
		}
		d := spread(g.runs, deliveries)
		vs := math.NaN()
		if b, ok := base[g.name]; ok {
			vs = load.Ratio(d.Median, b)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %d | %d |\n", g.topo, g.name, rateSpread(d), ratio(vs),
			rate(spread(g.runs, func(r *load.Result) float64 { return perCPUSecond(r, isShoal) }).Median),
			rate(spread(g.runs, func(r *load.Result) float64 { return perCPUSecond(r, anyKind) }).Median),
			ms(spread(g.runs, func(r *load.Result) float64 { return latency(r, p50) }).Median),
			ms(spread(g.runs, func(r *load.Result) float64 { return latency(r, p99) }).Median),
			lost, other)
	}

	fmt.Fprintf(w, "\nCPU over the measured window, %% of one core, summed over the processes of each kind (median of the rounds):\n\n")
	fmt.Fprintf(w, "| topology | scenario | %s | Shoal | all | generator | load average (1 min) |\n", strings.Join(procKinds[:], " | "))
	fmt.Fprintf(w, "|---|---|%s---:|---:|---:|---|\n", strings.Repeat("---:|", len(procKinds)))
	for _, g := range gs {
		fmt.Fprintf(w, "| %s | %s |", g.topo, g.name)
		for _, k := range procKinds {
			fmt.Fprintf(w, " %s |", pct(spread(g.runs, func(r *load.Result) float64 { return kindSum(r, isKind(k), cpuPct) }).Median))
		}
		fmt.Fprintf(w, " %s | %s | %s | %s |\n",
			pct(spread(g.runs, func(r *load.Result) float64 { return kindSum(r, isShoal, cpuPct) }).Median),
			pct(spread(g.runs, func(r *load.Result) float64 { return kindSum(r, anyKind, cpuPct) }).Median),
			pct(spread(g.runs, generatorCPU).Median), loadRange(g.runs))
	}

	fmt.Fprintf(w, "\nResident memory at the end of the measured window, MiB, summed over the processes of each kind (median of the rounds):\n\n")
	fmt.Fprintf(w, "| topology | scenario | %s | Shoal | all |\n", strings.Join(procKinds[:], " | "))
	fmt.Fprintf(w, "|---|---|%s---:|---:|\n", strings.Repeat("---:|", len(procKinds)))
	for _, g := range gs {
		fmt.Fprintf(w, "| %s | %s |", g.topo, g.name)
		for _, k := range procKinds {
			fmt.Fprintf(w, " %s |", rate(spread(g.runs, func(r *load.Result) float64 { return kindSum(r, isKind(k), rssMiB) }).Median))
		}
		fmt.Fprintf(w, " %s | %s |\n",
			rate(spread(g.runs, func(r *load.Result) float64 { return kindSum(r, isShoal, rssMiB) }).Median),
			rate(spread(g.runs, func(r *load.Result) float64 { return kindSum(r, anyKind, rssMiB) }).Median))
	}

	fmt.Fprintf(w, "\nEvery run:\n\n| topology | scenario | round | delivered msg/s | sent msg/s | per Shoal CPU-second | lost + undelivered | other faults | CPU %%: %s, generator | load |\n", strings.Join(procKinds[:], ", "))
	fmt.Fprintf(w, "|---|---|---:|---:|---:|---:|---:|---:|---|---:|\n")
	for _, r := range results {
		cpus := make([]string, 0, len(procKinds)+1)
		for _, k := range procKinds {
			cpus = append(cpus, pct(kindSum(r, isKind(k), cpuPct)))
		}
		cpus = append(cpus, pct(generatorCPU(r)))
		fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %d | %d | %s | %s |\n", r.Label, r.Name, r.Round,
			rate(r.Measured.DeliveriesPerSec), rate(r.Measured.SentPerSec), rate(perCPUSecond(r, isShoal)),
			missing(r), faults(r), strings.Join(cpus, " / "), loadAvg(r))
	}
}

func generatorCPU(r *load.Result) float64 {
	if r.Generator == nil {
		return math.NaN()
	}
	return r.Generator.CPUPercent
}

// loadRange is the range of the 1-minute load average at the ends of the
// runs' measured windows.
func loadRange(rs []*load.Result) string {
	la := spread(rs, func(r *load.Result) float64 {
		if r.LoadAvg == nil {
			return math.NaN()
		}
		return r.LoadAvg.End[0]
	})
	if la.N == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f–%.2f", la.Min, la.Max)
}
