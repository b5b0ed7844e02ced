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

// catchUpRun is the catch-up part's result. Times are seconds after the
// bridge's restart (the start of the new process).
type catchUpRun struct {
	Rate       float64 `json:"rate"`
	Publishers int     `json:"publishers"`
	BeforeSec  float64 `json:"before_s"` // load with the bridge running before the stop
	StoppedSec float64 `json:"stopped_s"`
	// Backlog is the messages sent before the restart that had not
	// arrived by then.
	Backlog uint64 `json:"backlog"`
	// ReadySec is when the new process answered /readyz.
	ReadySec float64 `json:"ready_s"`
	// BacklogReadSec is when the last message sent before the restart
	// arrived (nil: not all did).
	BacklogReadSec *float64 `json:"backlog_read_s,omitempty"`
	// CaughtUpSec is when the last record later than the caught-up
	// threshold (ThresholdMs) arrived: from then on, records arrive
	// within it (nil: the wait ended before).
	CaughtUpSec *float64 `json:"caught_up_s,omitempty"`
	ThresholdMs float64  `json:"threshold_ms"`
	// LagZeroSec is when the restarted bridge's shoal.bridge.lag first
	// read 0 (it measures every 5 s; nil: never), LagMax the most it read.
	LagZeroSec *float64 `json:"lag_metric_zero_s,omitempty"`
	LagMax     float64  `json:"lag_metric_max"`
	// LagLast is its last reading, LagLastSec when it was taken: under a
	// steady load the group's committed offsets trail the log's end by
	// what one poll holds, so the metric need not read 0.
	LagLast    float64 `json:"lag_metric_last"`
	LagLastSec float64 `json:"lag_metric_last_s"`
	// CatchUpRate is the backlog over the time to read it, records/s.
	CatchUpRate float64 `json:"catch_up_rate"`
	// Steady is the latency of the records sent before the stop, the
	// bridge running.
	Steady *load.LatencySummary `json:"steady_latency_us,omitempty"`
	// Acked is every QoS 1 message the broker acknowledged; Final the
	// count of the topic read by a read_committed kcat at the end,
	// against the messages sent.
	Acked   uint64 `json:"acked"`
	Refused uint64 `json:"refused,omitempty"`
	Final   counts `json:"final"`
	// Processes are the CPU of the processes from the restart to the
	// catch-up (CaughtUpSec, or the end of the wait).
	Processes []load.ProcUsage `json:"processes_catching_up"`
	LoadAvg   *load.LoadAvg    `json:"loadavg,omitempty"`
	Errors    string           `json:"errors,omitempty"`
}

// runCatchUp runs `shoal all` without mappings and a `shoal bridge` on its
// embedded backbone under a paced QoS 1 load, stops the bridge for
// opt.catchStop and starts it again.
func runCatchUp(ctx context.Context, h *harness, opt options, clk *clock, stdout io.Writer) (run *catchUpRun, err error) {
	fmt.Fprintf(h.stderr, "catchup: %.0f msg/s QoS 1, the bridge stopped for %s\n", opt.catchRate, opt.catchStop)
	b, err := h.startShoalAll(ctx, "catchup", "log_level: info\n")
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, b.stop()) }()
	br, err := h.startBridge(ctx, "catchup-bridge", outYAML, b)
	if err != nil {
		return nil, err
	}
	defer func() {
		if br.p.Exited() {
			return // stopped by the test, or failed: reported below
		}
		err = errors.Join(err, br.stop())
	}()
	log := &recvLog{}
	kc, err := h.tailTopic(ctx, b, "catchup-kcat", bridgedTopic, opt.fetchWait, clk, log)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, kc.close()) }()
	pl, err := dialLoad(ctx, clk, b.mqtt, "catchup", 0, opt.outPublishers)
	if err != nil {
		return nil, err
	}
	defer pl.close()
	if err := pl.probe(ctx, func() bool { return log.probed() > 0 }); err != nil {
		return nil, errors.Join(err, kc.alive(), br.alive())
	}

	run = &catchUpRun{Rate: opt.catchRate, Publishers: opt.outPublishers, BeforeSec: opt.catchBefore.Seconds(),
		StoppedSec: opt.catchStop.Seconds(), ThresholdMs: float64(opt.caughtUp.Microseconds()) / 1000}
	t0 := clk.since()
	pl.start(opt.catchRate, packet.QoS(1))
	if !load.Sleep(ctx, opt.catchBefore) {
		return run, ctx.Err()
	}
	stoppedAt := clk.since()
	fmt.Fprintf(h.stderr, "catchup: stopping the bridge\n")
	if err := br.stop(); err != nil {
		return run, err
	}
	if !load.Sleep(ctx, opt.catchStop-(clk.since()-stoppedAt)) {
		return run, ctx.Err()
	}
	before := pl.sentCounts()
	restart := clk.since()
	run.Backlog = sum(before) - countBefore(log, clk.unix(restart))
	fmt.Fprintf(h.stderr, "catchup: starting the bridge again, %d messages behind\n", run.Backlog)
	if err := h.restartBridge(ctx, br); err != nil {
		return run, err
	}
	run.ReadySec = (clk.since() - restart).Seconds()
	pw, err := watchProcs(map[string]int{"shoal": b.pid(), "bridge": br.pid(), "kcat": kc.pid()})
	if err != nil {
		return run, err
	}
	pw.begin()
	s := newScraper("http://"+br.http+"/metrics", clk.since)
	for deadline := restart + opt.catchLimit; clk.since() < deadline; {
		lagSample(ctx, s, run, restart)
		if caughtUp(log, before, clk.now(), opt.caughtUp) {
			break
		}
		if err := errors.Join(br.alive(), kc.alive()); err != nil {
			return run, err
		}
		if !load.Sleep(ctx, 100*time.Millisecond) {
			return run, ctx.Err()
		}
	}
	run.Processes, run.LoadAvg = pw.end()
	fmt.Fprintf(h.stderr, "catchup: caught up (or the wait ended) %.1fs after the restart\n", (clk.since() - restart).Seconds())
	// The load goes on; the lag metric is read until it says 0.
	for end := clk.since() + opt.catchAfter; clk.since() < end; {
		lagSample(ctx, s, run, restart)
		if !load.Sleep(ctx, 250*time.Millisecond) {
			return run, ctx.Err()
		}
	}
	pl.halt()
	left := pl.settle(ctx, opt.drain)
	sent := pl.sentCounts()
	waitArrivals(ctx, log.total, sum(sent), 3*time.Second, opt.drain)
	run.Acked, run.Refused = pl.acked()

	// The times, from every arrival.
	restartNs := clk.unix(restart)
	var backlogRead, lastLate int64
	log.each(func(pub, seq int, a arrival) {
		if pub < len(before) && uint64(seq) < before[pub] {
			backlogRead = max(backlogRead, a.first)
		}
		if a.first > restartNs && a.first-a.sent > opt.caughtUp.Nanoseconds() {
			lastLate = max(lastLate, a.first)
		}
	})
	if c := log.account(before); c.Lost == 0 {
		v := float64(backlogRead-restartNs) / 1e9
		run.BacklogReadSec = &v
		if v > 0 {
			run.CatchUpRate = float64(run.Backlog) / v
		}
	}
	if lastLate > 0 && lastLate < clk.unix(restart+opt.catchLimit) {
		v := float64(lastLate-restartNs) / 1e9
		run.CaughtUpSec = &v
	}
	run.Steady = latencyOf(log, clk.unix(t0+time.Second), clk.unix(stoppedAt-time.Second))

	// The count: every committed record of the topic, read again.
	final := &recvLog{}
	var errs []error
	if err := h.readTopic(ctx, b, bridgedTopic, final); err != nil {
		errs = append(errs, err)
	}
	run.Final = final.account(sent)
	if left > 0 {
		errs = append(errs, fmt.Errorf("%d messages still unacknowledged %s after the load", left, opt.drain))
	}
	errs = append(errs, pl.err(), br.alive())
	if err := errors.Join(errs...); err != nil {
		run.Errors = err.Error()
	}
	writeCatchUpLine(stdout, run)
	return run, nil
}

// lagSample reads the bridge's lag metric once into run.
func lagSample(ctx context.Context, s *scraper, run *catchUpRun, restart time.Duration) {
	smp, err := s.scrape(ctx)
	if err != nil || !smp.hasLag {
		return // not measured yet, or the bridge is busy: the next try
	}
	run.LagMax = max(run.LagMax, smp.lag)
	run.LagLast, run.LagLastSec = smp.lag, (smp.at - restart).Seconds()
	if smp.lag == 0 && run.LagZeroSec == nil {
		v := (smp.at - restart).Seconds()
		run.LagZeroSec = &v
	}
}

// countBefore returns the messages that arrived before at (Unix ns).
func countBefore(log *recvLog, at int64) uint64 {
	var n uint64
	log.each(func(_, _ int, a arrival) {
		if a.first < at {
			n++
		}
	})
	return n
}

// caughtUp reports whether every message sent before the restart
// (before, per publisher) has arrived and the newest arrivals are within
// threshold of their send time: the newest message of each publisher
// that arrived was sent at most threshold before now.
func caughtUp(log *recvLog, before []uint64, now int64, threshold time.Duration) bool {
	log.mu.Lock()
	defer log.mu.Unlock()
	for pub, n := range before {
		if pub >= len(log.pubs) || uint64(len(log.pubs[pub])) < n {
			return false
		}
		for _, a := range log.pubs[pub][:n] {
			if a.first == 0 {
				return false
			}
		}
		top := log.maxSeq[pub]
		if top < 0 || now-log.pubs[pub][top].sent > threshold.Nanoseconds() {
			return false
		}
	}
	return true
}

func writeCatchUpLine(w io.Writer, r *catchUpRun) {
	fmt.Fprintf(w, "catchup at %.0f/s QoS 1, bridge stopped %.0fs: backlog %d, ready %.1fs after the restart", r.Rate, r.StoppedSec, r.Backlog, r.ReadySec)
	if r.BacklogReadSec != nil {
		fmt.Fprintf(w, ", backlog read %.1fs after (%.0f records/s)", *r.BacklogReadSec, r.CatchUpRate)
	}
	if r.CaughtUpSec != nil {
		fmt.Fprintf(w, ", within %.0f ms from %.1fs after", r.ThresholdMs, *r.CaughtUpSec)
	}
	if r.LagZeroSec != nil {
		fmt.Fprintf(w, ", lag metric 0 at %.1fs", *r.LagZeroSec)
	}
	fmt.Fprintf(w, "; %d acked, topic holds %d of %d sent, %d lost, %d repeats, %d reordered",
		r.Acked, r.Final.Received, r.Final.Sent, r.Final.Lost, r.Final.Repeats, r.Final.Reordered)
	if r.Errors != "" {
		fmt.Fprintf(w, " (errors: %s)", r.Errors)
	}
	fmt.Fprintln(w)
}
