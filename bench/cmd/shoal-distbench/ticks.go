package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/shoal-mqtt/shoal/bench/load"
	"github.com/shoal-mqtt/shoal/internal/localserver/realkafka"
)

// The per-partition records (-unit-ticks): every gateway writes a
// GatewayHeartbeat to each partition of shoal.sessions every
// gateway.heartbeat (1 s), and the session services a SessionTick to each
// every session.expiry_check (5 s), whatever the load. The idle topology
// is measured with those periods, then restarted with both at
// tickFastPeriod: the CPU each process spends per such record is the
// difference over the difference in records, which the model multiplies
// by gateways × partitions.

// tickFastPeriod is the heartbeat and expiry check of the second phase.
const tickFastPeriod = 100 * time.Millisecond

// ticksFile is bench/partition-costs.json.
type ticksFile struct {
	runHeader
	Gateways int         `json:"gateways"`
	Phases   []tickPhase `json:"phases"`
	// PerRecordMicros is each kind of process's CPU per record of
	// shoal.sessions written by the periods alone (heartbeats and ticks):
	// the second phase's CPU less the first's, over its records less the
	// first's.
	PerRecordMicros map[string]float64 `json:"cpu_us_per_record"`
}

// tickPhase is one idle window.
type tickPhase struct {
	Name        string  `json:"name"`
	Heartbeat   string  `json:"gateway_heartbeat"`
	ExpiryCheck string  `json:"session_expiry_check"`
	Seconds     float64 `json:"seconds"`
	// RecordsPerSec is what shoal.sessions took per second over the
	// window (the heartbeats and ticks: nothing else runs).
	RecordsPerSec float64 `json:"sessions_records_per_s"`
	// CPUPercent is each kind of process's CPU over the window, in % of
	// one core.
	CPUPercent map[string]float64 `json:"cpu_percent"`
}

// ticks measures the per-partition records' cost on the started topology.
func (c *cluster) ticks(ctx context.Context, opt options, topo string, bb *backbone, stdout, stderr io.Writer) ([]*load.Result, error) {
	meta := machineInfo(opt)
	f := ticksFile{runHeader: meta.header(bb),
		Gateways: len(c.gws)}
	base, err := os.ReadFile(c.sa.config)
	if err != nil {
		return nil, fmt.Errorf("ticks: %w", err)
	}
	for line := range strings.Lines(string(base)) {
		if strings.HasPrefix(line, "gateway:") || strings.HasPrefix(line, "session:") {
			return nil, errors.New("ticks: the Shoal configuration sets gateway: or session: itself; the ticks phase sets their periods")
		}
	}
	fast := filepath.Join(filepath.Dir(c.sa.config), "shoal-ticks.yaml")
	text := fmt.Sprintf("%sgateway:\n  heartbeat: %s\nsession:\n  expiry_check: %s\n", base, tickFastPeriod, tickFastPeriod)
	if err := os.WriteFile(fast, []byte(text), 0o600); err != nil {
		return nil, fmt.Errorf("ticks: %w", err)
	}

	if err := c.tickWindow(ctx, opt, &f, "default", "1s", "5s", bb, stdout, stderr); err != nil {
		return nil, err
	}
	sa := c.sa
	sa.config = fast
	if err := c.stop(); err != nil {
		return nil, err
	}
	*c = cluster{}
	if err := c.start(ctx, topo, sa, bb, stderr); err != nil {
		return nil, err
	}
	if err := c.tickWindow(ctx, opt, &f, "fast", tickFastPeriod.String(), tickFastPeriod.String(), bb, stdout, stderr); err != nil {
		return nil, err
	}
	a, b := f.Phases[0], f.Phases[1]
	if d := b.RecordsPerSec - a.RecordsPerSec; d > 0 {
		f.PerRecordMicros = map[string]float64{}
		for kind, pb := range b.CPUPercent {
			// % of a core is 10,000 µs per second.
			f.PerRecordMicros[kind] = (pb - a.CPUPercent[kind]) * 1e4 / d
		}
	}
	fmt.Fprintf(stdout, "per record of heartbeats and ticks: CPU-µs %s\n", cpuList(f.PerRecordMicros, 1))
	return nil, writeCeiling(opt, opt.ticksOut, "partition costs", f, ticksReadme(f), stderr)
}

// tickWindow lets the idle topology settle, then measures every process's
// CPU and what shoal.sessions took over opt.unitIdle.
func (c *cluster) tickWindow(ctx context.Context, opt options, f *ticksFile, name, heartbeat, check string, bb *backbone, stdout, stderr io.Writer) error {
	fmt.Fprintf(stderr, "ticks: %s (heartbeat %s, expiry check %s), %s idle\n", name, heartbeat, check, opt.unitIdle)
	if !load.Sleep(ctx, 5*time.Second) { // the roles' first heartbeats and ticks
		return ctx.Err()
	}
	cpu, err := c.sampler()
	if err != nil {
		return err
	}
	r0, _, err := realkafka.TopicTotals(ctx, bb.brokers, "shoal.sessions")
	if err != nil {
		return err
	}
	began := time.Now()
	if !load.Sleep(ctx, opt.unitIdle) {
		return ctx.Err()
	}
	used := cpu.since()
	r1, _, err := realkafka.TopicTotals(ctx, bb.brokers, "shoal.sessions")
	if err != nil {
		return err
	}
	secs := time.Since(began).Seconds()
	ph := tickPhase{Name: name, Heartbeat: heartbeat, ExpiryCheck: check, Seconds: secs,
		RecordsPerSec: float64(r1["shoal.sessions"]-r0["shoal.sessions"]) / secs, CPUPercent: map[string]float64{}}
	for kind, d := range used {
		ph.CPUPercent[kind] = 100 * d.Seconds() / secs
	}
	f.Phases = append(f.Phases, ph)
	fmt.Fprintf(stdout, "ticks, %s: %.0f records/s in shoal.sessions; CPU %% of a core: %s\n", name, ph.RecordsPerSec, cpuList(ph.CPUPercent, 1))
	return nil
}

// ticksReadme is the README of the partition costs.
func ticksReadme(f ticksFile) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# What the per-partition records cost (%s)\n\n```\n%s\n```\n\n", f.Date[:10], f.Command)
	fmt.Fprintf(&b, "- Machine: %s, %d cores; Kafka %s, Cassandra %s, one node each; Shoal `%s`, a session service, a router and %d gateways, %d partitions per event topic, no client.\n", f.CPU, f.Cores, f.Kafka, f.Cassandra, f.Commit, f.Gateways, f.Partitions)
	fmt.Fprintf(&b, "- Each gateway writes a GatewayHeartbeat to every partition of shoal.sessions each gateway.heartbeat, the session service a SessionTick to every partition each session.expiry_check. The idle topology is measured with the defaults, then restarted with both at %s.\n\n", tickFastPeriod)
	fmt.Fprintln(&b, "| phase | heartbeat | expiry check | shoal.sessions records/s | CPU % of a core |")
	fmt.Fprintln(&b, "|---|---|---|---:|---|")
	for _, p := range f.Phases {
		fmt.Fprintf(&b, "| %s | %s | %s | %.0f | %s |\n", p.Name, p.Heartbeat, p.ExpiryCheck, p.RecordsPerSec, cpuList(p.CPUPercent, 1))
	}
	fmt.Fprintf(&b, "\nCPU-µs per record of heartbeats and ticks: %s.\n", cpuList(f.PerRecordMicros, 1))
	return b.String()
}
