package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// results is everything one invocation measured; it is written as
// bridge.json.
type results struct {
	Meta        meta            `json:"meta"`
	Throughput  []throughputRun `json:"throughput,omitempty"`
	OutLatency  []latencyRun    `json:"out_latency,omitempty"`
	InLatency   []latencyRun    `json:"in_latency,omitempty"`
	CatchUp     *catchUpRun     `json:"catchup,omitempty"`
	Distributed *distributedRun `json:"distributed,omitempty"`
	Errors      []string        `json:"errors,omitempty"`
}

// bench runs the parts. Whatever happens, every process it started is
// stopped before it returns, and the results of the parts that ran are
// written.
func bench(ctx context.Context, opt options, stdout, stderr io.Writer) (err error) {
	work, err := os.MkdirTemp("", "shoal-bridgebench-")
	if err != nil {
		return fmt.Errorf("work directory: %w", err)
	}
	defer func() {
		if opt.keep {
			fmt.Fprintln(stderr, "work directory kept:", work)
			return
		}
		if rerr := os.RemoveAll(work); rerr != nil {
			err = errors.Join(err, fmt.Errorf("remove work directory: %w", rerr))
		}
	}()
	h := &harness{work: work, logDir: filepath.Join(opt.out, "logs"), outDir: opt.out, stderr: stderr}
	if err := prepareOut(opt.out, h.logDir); err != nil {
		return err
	}
	if h.kcat, err = lookTool("kcat"); err != nil {
		return err
	}
	if opt.has(partThroughput) {
		if h.mosquitto, err = lookTool("mosquitto"); err != nil {
			return err
		}
	}
	if opt.has(partInLatency) {
		if h.mosquittoSub, err = lookTool("mosquitto_sub"); err != nil {
			return err
		}
	}
	res := &results{Meta: machineInfo(opt)}
	if h.shoal = opt.shoal; h.shoal == "" {
		fmt.Fprintln(stderr, "building shoal")
		if h.shoal, err = buildShoal(ctx, work); err != nil {
			return err
		}
	}
	res.Meta.Shoal = h.shoal
	if out, err := exec.CommandContext(ctx, h.shoal, "version").Output(); err == nil {
		res.Meta.ShoalVersion = strings.TrimSpace(string(out))
	}
	defer func() {
		res.Meta.LoadEnd = loadNow()
		if err != nil {
			res.Errors = append(res.Errors, err.Error())
		}
		if werr := writeResults(opt.out, res); werr != nil {
			err = errors.Join(err, werr)
		}
		writeTables(stdout, res)
	}()

	clk := newClock()
	if opt.has(partThroughput) {
		res.Throughput, err = runThroughput(ctx, h, opt, clk, stdout)
		if err != nil {
			return fmt.Errorf("throughput: %w", err)
		}
	}
	if opt.has(partOutLatency) {
		res.OutLatency, err = runOutLatency(ctx, h, opt, clk, stdout)
		if err != nil {
			return err
		}
	}
	if opt.has(partInLatency) {
		res.InLatency, err = runInLatency(ctx, h, opt, clk, stdout)
		if err != nil {
			return err
		}
	}
	if opt.has(partCatchUp) {
		res.CatchUp, err = runCatchUp(ctx, h, opt, clk, stdout)
		if err != nil {
			return fmt.Errorf("catchup: %w", err)
		}
	}
	if opt.has(partDistributed) {
		res.Distributed, err = runDistributed(ctx, h, opt, clk, stdout)
		if err != nil {
			return err
		}
	}
	return nil
}

// prepareOut makes the output directories and removes an earlier run's
// results, which would mix with this run's.
func prepareOut(out, logDir string) error {
	for _, d := range []string{out, logDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("output directory: %w", err)
		}
	}
	var old []string
	for _, pat := range []string{"*.json", "README.md", filepath.Join("logs", "*.log")} {
		m, err := filepath.Glob(filepath.Join(out, pat))
		if err != nil {
			return fmt.Errorf("output directory: %w", err)
		}
		old = append(old, m...)
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return fmt.Errorf("remove an earlier result: %w", err)
		}
	}
	return nil
}

// writeResults writes bridge.json and README.md.
func writeResults(out string, res *results) error {
	if err := writeJSON(filepath.Join(out, "bridge.json"), res); err != nil {
		return err
	}
	var b strings.Builder
	writeReadme(&b, res)
	if err := os.WriteFile(filepath.Join(out, "README.md"), []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write README: %w", err)
	}
	return nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	return nil
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
