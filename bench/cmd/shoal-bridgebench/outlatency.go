package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/shoal-mqtt/shoal/bench/load"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

// latencyRun is one run of a latency part: messages sent at a fixed rate
// on one side, read on the other.
type latencyRun struct {
	Part        string  `json:"part"` // out-latency or in-latency
	QoS         int     `json:"qos"`
	Rate        float64 `json:"rate"`
	Senders     int     `json:"senders"` // MQTT publishers, or record keys
	WarmupSec   float64 `json:"warmup_s"`
	DurationSec float64 `json:"duration_s"`
	// Counts is every message sent (warm-up and measured window) against
	// what arrived by the end of the drain.
	Counts counts `json:"counts"`
	// Latency is from the scheduled send time to the arrival of the
	// messages scheduled in the measured window, in µs.
	Latency *load.LatencySummary `json:"latency_us,omitempty"`
	// SteadyLatency is the same without the messages scheduled in the
	// window's last steadyTail: those that a stall at the end of the load
	// holds (in-latency) are left out.
	SteadyLatency *load.LatencySummary `json:"steady_latency_us,omitempty"`
	// SendLagMaxMs is how late the benchmark sent a message after its
	// scheduled time at worst (part of Latency).
	SendLagMaxMs float64 `json:"send_lag_max_ms"`
	// LastArrivalSec is how long after the last message was sent the last
	// one arrived.
	LastArrivalSec float64 `json:"last_arrival_s"`
	// StuckAtEnd is, in-latency only, the messages that had not arrived
	// when nothing had arrived for 3 s after the last was sent;
	// ReleasedAfterSec how long after that they all had, one more record
	// per key written every 500 ms (nil: not within the drain).
	StuckAtEnd       uint64   `json:"stuck_at_end,omitempty"`
	ReleasedAfterSec *float64 `json:"released_after_s,omitempty"`
	// Acked and Refused are the QoS 1 publishes the broker acknowledged.
	Acked   uint64 `json:"acked,omitempty"`
	Refused uint64 `json:"refused,omitempty"`
	// Processes are the CPU of the processes involved over the window.
	Processes []load.ProcUsage `json:"processes"`
	// JITPercent is, distributed only, the CPU of each JVM's JIT compiler
	// threads over the whole run (warm-up, window and drain), in % of one
	// core: a JVM still compiling has not warmed up, and its requests
	// run slower meanwhile.
	JITPercent map[string]float64 `json:"jit_pct,omitempty"`
	LoadAvg    *load.LoadAvg      `json:"loadavg,omitempty"`
	Errors     string             `json:"errors,omitempty"`
}

// steadyTail is the end of a window that SteadyLatency leaves out.
const steadyTail = 2 * time.Second

// latencyOf returns the latency of every message of log scheduled in
// [from, to) (Unix nanoseconds).
func latencyOf(log *recvLog, from, to int64) *load.LatencySummary {
	return latencyOfPubs(log, 0, maxPublishers, from, to)
}

// latencyOfPubs is latencyOf for the messages of publishers base to
// base+n-1 alone.
func latencyOfPubs(log *recvLog, base, n int, from, to int64) *load.LatencySummary {
	h := load.NewLatencyHistogram()
	log.each(func(pub, _ int, a arrival) {
		if pub >= base && pub < base+n && a.sent >= from && a.sent < to {
			load.RecordLatency(h, a.first-a.sent)
		}
	})
	return load.SummarizeLatency(h)
}

// procWatch reads the CPU of a few processes at the edges of a window.
type procWatch struct {
	names []string
	procs []*load.Proc
	start []load.ProcSample
	at    time.Time
	load0 [3]float64
}

func watchProcs(procs map[string]int) (*procWatch, error) {
	w := &procWatch{}
	for _, name := range sortedKeys(procs) {
		p, err := load.NewProc(procs[name])
		if err != nil {
			return nil, fmt.Errorf("process %s: %w", name, err)
		}
		w.names, w.procs = append(w.names, name), append(w.procs, p)
	}
	return w, nil
}

// begin marks the start of the window.
func (w *procWatch) begin() {
	w.start = w.start[:0]
	for _, p := range w.procs {
		s, _ := p.Sample() // a process gone shows as zero use
		w.start = append(w.start, s)
	}
	w.at = time.Now()
	w.load0, _ = load.ReadLoadAvg()
}

// end returns each process's use since begin, and the load averages.
func (w *procWatch) end() ([]load.ProcUsage, *load.LoadAvg) {
	secs := time.Since(w.at).Seconds()
	var out []load.ProcUsage
	for i, p := range w.procs {
		s, err := p.Sample()
		if err != nil {
			continue
		}
		cpu := (s.CPU - w.start[i].CPU).Seconds()
		out = append(out, load.ProcUsage{Name: w.names[i], CPUSeconds: cpu, CPUPercent: 100 * cpu / secs,
			RSSStart: w.start[i].RSS, RSSEnd: s.RSS, RSSMax: max(w.start[i].RSS, s.RSS)})
	}
	l1, _ := load.ReadLoadAvg()
	return out, &load.LoadAvg{Start: w.load0, End: l1}
}

// runOutLatency measures MQTT to Kafka: paced publishers on `shoal all`
// with the out mapping, a read_committed kcat tailing the bridged topic;
// one run per QoS on a fresh broker.
func runOutLatency(ctx context.Context, h *harness, opt options, clk *clock, stdout io.Writer) ([]latencyRun, error) {
	var runs []latencyRun
	for _, q := range []packet.QoS{0, 1} {
		r, err := outLatencyOnce(ctx, h, opt, clk, q)
		if err != nil {
			return runs, fmt.Errorf("out-latency qos %d: %w", q, err)
		}
		writeLatencyLine(stdout, r)
		runs = append(runs, r)
	}
	return runs, nil
}

func outLatencyOnce(ctx context.Context, h *harness, opt options, clk *clock, qos packet.QoS) (run latencyRun, err error) {
	name := fmt.Sprintf("out-latency-qos%d", qos)
	fmt.Fprintf(h.stderr, "%s: %.0f msg/s for %s\n", name, opt.outRate, opt.outDuration)
	b, err := h.startShoalAll(ctx, name, outYAML)
	if err != nil {
		return run, err
	}
	defer func() { err = errors.Join(err, b.stop()) }()
	log := &recvLog{}
	kc, err := h.tailTopic(ctx, b, name+"-kcat", bridgedTopic, opt.fetchWait, clk, log)
	if err != nil {
		return run, err
	}
	defer func() { err = errors.Join(err, kc.close()) }()
	return measureOut(ctx, opt, clk, outTarget{mqtt: b.mqtt, log: log, kcat: kc, name: "out",
		procs: map[string]int{"shoal": b.pid(), "kcat": kc.pid()}}, qos)
}

// outTarget is where measureOut publishes and reads.
type outTarget struct {
	mqtt  string
	log   *recvLog // what the kcat tail reads, maybe shared by several runs
	kcat  *lineReader
	name  string         // the publishers' client ids and topics: bench-<name>-p-<i>, bench/<name>/<i>
	base  int            // the first publisher's number in the payloads
	procs map[string]int // whose CPU to report
}

// measureOut publishes at opt.outRate for the warm-up and the window and
// accounts for what t's kcat read.
func measureOut(ctx context.Context, opt options, clk *clock, t outTarget, qos packet.QoS) (run latencyRun, err error) {
	log, kc := t.log, t.kcat
	pl, err := dialLoad(ctx, clk, t.mqtt, t.name, t.base, opt.outPublishers)
	if err != nil {
		return run, err
	}
	defer pl.close()
	probes := log.probed()
	if err := pl.probe(ctx, func() bool { return log.probed() > probes }); err != nil {
		return run, errors.Join(err, kc.alive())
	}
	pw, err := watchProcs(t.procs)
	if err != nil {
		return run, err
	}

	run = latencyRun{Part: partOutLatency, QoS: int(qos), Rate: opt.outRate, Senders: opt.outPublishers,
		WarmupSec: opt.warmup.Seconds(), DurationSec: opt.outDuration.Seconds()}
	t0 := clk.since()
	pl.start(opt.outRate, qos)
	from, to := clk.unix(t0+opt.warmup), clk.unix(t0+opt.warmup+opt.outDuration)
	if !load.Sleep(ctx, opt.warmup) {
		return run, ctx.Err()
	}
	pw.begin()
	if !load.Sleep(ctx, opt.outDuration) {
		return run, ctx.Err()
	}
	run.Processes, run.LoadAvg = pw.end()
	haltAt := clk.since()
	pl.halt()
	left := pl.settle(ctx, opt.drain)
	sent := pl.sentCounts()
	n := len(sent)
	waitArrivals(ctx, func() uint64 { return log.accountFrom(t.base, sent).Received }, sum(sent), 2*time.Second, opt.drain)

	run.Counts = log.accountFrom(t.base, sent)
	run.Latency = latencyOfPubs(log, t.base, n, from, to)
	run.SteadyLatency = latencyOfPubs(log, t.base, n, from, to-steadyTail.Nanoseconds())
	run.LastArrivalSec = float64(lastArrival(log)-clk.unix(haltAt)) / 1e9
	run.SendLagMaxMs = float64(pl.lag.Load()) / 1e6
	if qos > 0 {
		run.Acked, run.Refused = pl.acked()
	}
	var errs []error
	if left > 0 {
		errs = append(errs, fmt.Errorf("%d messages still unacknowledged %s after the load", left, opt.drain))
	}
	errs = append(errs, pl.err(), kc.alive())
	if err := errors.Join(errs...); err != nil {
		run.Errors = err.Error()
	}
	return run, nil
}

func sum(xs []uint64) uint64 {
	var n uint64
	for _, x := range xs {
		n += x
	}
	return n
}

func writeLatencyLine(w io.Writer, r latencyRun) {
	fmt.Fprintf(w, "%s QoS %d at %.0f/s: %d sent, %d received, %d lost, %d repeats, %d reordered",
		r.Part, r.QoS, r.Rate, r.Counts.Sent, r.Counts.Received, r.Counts.Lost, r.Counts.Repeats, r.Counts.Reordered)
	if l := r.Latency; l != nil {
		fmt.Fprintf(w, ", latency ms p50 %.2f p99 %.2f p99.9 %.2f max %.2f", l.P50/1000, l.P99/1000, l.P999/1000, l.Max/1000)
	}
	for _, p := range r.Processes {
		fmt.Fprintf(w, ", %s %.0f%% CPU", p.Name, p.CPUPercent)
	}
	if r.Errors != "" {
		fmt.Fprintf(w, " (errors: %s)", r.Errors)
	}
	fmt.Fprintln(w)
}
