package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The outside generator (-outside N): right after a topology starts, before
// the prime and the rounds of Shoal's own generator, scripts/outside-latency.py
// (its own MQTT 3.1.1 codec, pacer and percentiles, nothing of Shoal's)
// runs -outside-warmups saturating warm-ups and N latency rounds back to
// back, publishers on the first gateway, subscribers on the last. Each
// round is a line of the README's outside table, with each kind of
// process's CPU over it: what a tester who brings their own generator
// sees, the first minutes included.

// outsideRound is one round as the script reports it, with the CPU of
// each kind of process (% of a core) over the round.
type outsideRound struct {
	Round        int                `json:"round"`
	Sent         int                `json:"sent_in_window"`
	Received     int                `json:"received_in_window"`
	P50          float64            `json:"p50_ms"`
	P90          float64            `json:"p90_ms"`
	P99          float64            `json:"p99_ms"`
	P999         float64            `json:"p999_ms"`
	Max          float64            `json:"max_ms"`
	GeneratorCPU float64            `json:"generator_cpu_pct"`
	CPUPercent   map[string]float64 `json:"cpu_percent,omitempty"`
	// Since is when the round ended, from the topology's start.
	Since float64 `json:"since_start_s"`
}

// outsideFile is <topology>-outside.json in the results directory.
const outsideSuffix = "-outside.json"

// outside runs the outside generator against the started topology.
func (c *cluster) outside(ctx context.Context, opt options, topo string, started time.Time, stderr io.Writer) error {
	pub, sub := c.gws[0].mqtt, c.gws[len(c.gws)-1].mqtt
	cmd := exec.CommandContext(ctx, "python3", opt.outsideScript)
	cmd.Env = append(os.Environ(), "PUB="+pub, "SUB="+sub, "PREFIX=outside-"+topoShort(topo),
		"PAIRS="+strconv.Itoa(opt.clients), "RATE="+strconv.FormatFloat(opt.rate, 'f', -1, 64), "SIZE="+strconv.Itoa(opt.payload),
		"ROUNDS="+strconv.Itoa(opt.outsideRounds), "WARMUPS="+strconv.Itoa(opt.outsideWarmups),
		"DURATION_S="+strconv.FormatFloat(opt.duration.Seconds(), 'f', -1, 64))
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cpu, err := c.sampler()
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "%s: the outside generator, %d warm-ups and %d rounds\n", topo, opt.outsideWarmups, opt.outsideRounds)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("outside generator: %w", err)
	}
	var rounds []outsideRound
	lines := bufio.NewScanner(out)
	prev, prevAt := map[string]time.Duration{}, time.Now()
	for lines.Scan() {
		var r outsideRound
		if err := json.Unmarshal(lines.Bytes(), &r); err != nil {
			continue // not a round's line
		}
		now, used := time.Now(), cpu.since()
		r.CPUPercent = map[string]float64{}
		for k, d := range used {
			r.CPUPercent[k] = 100 * (d - prev[k]).Seconds() / now.Sub(prevAt).Seconds()
		}
		prev, prevAt = used, now
		r.Since = now.Sub(started).Seconds()
		rounds = append(rounds, r)
		fmt.Fprintf(stderr, "%s: outside round %d: p50 %.2f ms, p99 %.2f ms, %d of %d received\n", topo, r.Round, r.P50, r.P99, r.Received, r.Sent)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("outside generator: %w", err)
	}
	if len(rounds) != opt.outsideRounds {
		return fmt.Errorf("outside generator: %d of %d rounds reported", len(rounds), opt.outsideRounds)
	}
	b, err := json.MarshalIndent(rounds, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(opt.out, topo+outsideSuffix), append(b, '\n'), 0o644)
}

// writeOutsideTables adds the outside generator's rounds of every
// topology found in dir.
func writeOutsideTables(w io.Writer, dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, "*"+outsideSuffix))
	sort.Strings(files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		var rounds []outsideRound
		if err == nil {
			err = json.Unmarshal(b, &rounds)
		}
		if err != nil || len(rounds) == 0 {
			continue
		}
		topo := strings.TrimSuffix(filepath.Base(f), outsideSuffix)
		fmt.Fprintf(w, "\n### `%s`, measured by the outside generator\n\n", topo)
		fmt.Fprintln(w, "`scripts/outside-latency.py`: its own MQTT 3.1.1 codec, pacer and percentiles; saturating warm-ups, then the rounds back to back, started with the topology, before the prime and Shoal's generator's rounds above. CPU in % of a core over each round.")
		fmt.Fprintln(w, "\n| round | ends after | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | received of sent | CPU %: Shoal, Kafka, Cassandra, generator |")
		fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---|")
		for _, r := range rounds {
			shoal := r.CPUPercent["gateway"] + r.CPUPercent["router"] + r.CPUPercent["session"]
			fmt.Fprintf(w, "| %d | %.0f s | %.2f | %.2f | %.1f | %.1f | %.1f | %d of %d | %.0f, %.0f, %.0f, %.0f |\n", r.Round, r.Since, r.P50, r.P90, r.P99, r.P999, r.Max,
				r.Received, r.Sent, shoal, r.CPUPercent["kafka"], r.CPUPercent["cassandra"], r.GeneratorCPU)
		}
	}
}
