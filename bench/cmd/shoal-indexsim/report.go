package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// result is the JSON of one run (-out).
type result struct {
	machine
	Flags options `json:"flags"`
	// LiveHeapBytes is the live heap after a collection: with empty
	// shards, after each phase that adds to the index, and once the
	// loaded index is dropped.
	LiveHeapBytes map[string]uint64 `json:"live_heap_bytes"`
	PeakRSSBytes  uint64            `json:"peak_rss_bytes"`
	WallS         float64           `json:"wall_s"`
	CPUS          float64           `json:"cpu_s"`
	Phases        []phase           `json:"phases"`
}

// phase is the figures of one phase. The shard figures are those of the
// shard calls alone (LoadSubscription, Apply and the outputs' Reset),
// without the making of their inputs, which stands for what the store's
// driver or the Kafka client and the decoder do in a router; the phase's
// wall and CPU time include it.
type phase struct {
	Name string `json:"name"`
	// Items is the filters or the publishes; Records the shard calls: a
	// wildcard filter is one per shard.
	Items      int     `json:"items"`
	Records    int     `json:"records"`
	WallS      float64 `json:"wall_s"`
	CPUS       float64 `json:"cpu_s"`
	ShardWallS float64 `json:"shard_wall_s"`
	ShardCPUS  float64 `json:"shard_cpu_s"`
	// The rates and costs per record are of the shard calls.
	RecordsPerS     float64 `json:"records_per_s"`
	RecordsPerCPUS  float64 `json:"records_per_cpu_s"`
	CPUNsPerRecord  float64 `json:"cpu_ns_per_record"`
	AllocsPerRecord float64 `json:"allocs_per_record"`
	HeapBefore      uint64  `json:"live_heap_before_bytes"`
	HeapAfter       uint64  `json:"live_heap_after_bytes"`
	// HeapPerItem is the live heap the phase added per filter, for the
	// phases that fill the index.
	HeapPerItem float64 `json:"live_heap_bytes_per_item,omitempty"`
	// Deliveries and Targets are what the publishes of a match phase
	// made.
	Deliveries int `json:"deliveries,omitempty"`
	Targets    int `json:"targets,omitempty"`

	index bool // the phase fills the index
}

func (p *phase) finish(m0, m1 mark, sp span) {
	p.WallS, p.CPUS = m1.at.Sub(m0.at).Seconds(), (m1.cpu - m0.cpu).Seconds()
	p.ShardWallS, p.ShardCPUS = sp.wall.Seconds(), sp.cpu.Seconds()
	if p.Records > 0 {
		p.CPUNsPerRecord = float64(sp.cpu.Nanoseconds()) / float64(p.Records)
		p.AllocsPerRecord = float64(sp.allocs) / float64(p.Records)
	}
	if sp.wall > 0 {
		p.RecordsPerS = float64(p.Records) / sp.wall.Seconds()
	}
	if sp.cpu > 0 {
		p.RecordsPerCPUS = float64(p.Records) / sp.cpu.Seconds()
	}
	if p.index && p.Items > 0 {
		p.HeapPerItem = (float64(p.HeapAfter) - float64(p.HeapBefore)) / float64(p.Items)
	}
}

// line is the phase's figures on one line, for the terminal.
func (p *phase) line() string {
	s := fmt.Sprintf("%s: %d records in %.1f s (shard calls %.2f s, %.2f CPU-s: %.0f ns, %.2f allocations per record, %.0f per CPU-second)",
		p.Name, p.Records, p.WallS, p.ShardWallS, p.ShardCPUS, p.CPUNsPerRecord, p.AllocsPerRecord, p.RecordsPerCPUS)
	if p.index {
		s += fmt.Sprintf("; live heap %.0f MiB, %.0f B per filter", float64(p.HeapAfter)/(1<<20), p.HeapPerItem)
	}
	if strings.HasPrefix(p.Name, "match") {
		s += fmt.Sprintf("; %d deliveries", p.Deliveries)
	}
	return s
}

// phase returns the run's phase called name, a zero phase if none.
func (r *result) phase(name string) phase {
	for _, p := range r.Phases {
		if p.Name == name {
			return p
		}
	}
	return phase{}
}

// write writes res as JSON into opt.out and, with opt.readme, its README
// with the runs of opt.beside and the process's figures of opt.process.
func write(opt options, res *result, stderr io.Writer) error {
	if err := writeFile(opt.out, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}); err != nil {
		return fmt.Errorf("write the figures: %w", err)
	}
	fmt.Fprintln(stderr, "figures written to", opt.out)
	if opt.readme == "" {
		return nil
	}
	runs := []*result{res}
	for _, path := range opt.beside {
		r := &result{}
		if err := readJSON(path, r); err != nil {
			return fmt.Errorf("-beside: %w", err)
		}
		runs = append(runs, r)
	}
	var proc *processFile
	if opt.process != "" {
		proc = &processFile{}
		if err := readJSON(opt.process, proc); err != nil {
			return fmt.Errorf("-process: %w", err)
		}
		proc.link = opt.process
		if rel, err := filepath.Rel(filepath.Dir(opt.readme), opt.process); err == nil {
			proc.link = filepath.ToSlash(rel)
		}
	}
	if err := writeFile(opt.readme, func(w io.Writer) error { return readme(w, runs, proc) }); err != nil {
		return fmt.Errorf("write the README: %w", err)
	}
	fmt.Fprintln(stderr, "README written to", opt.readme)
	return nil
}

// writeFile writes path, its directory made if need be, with fill.
func writeFile(path string, fill func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fill(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// processFile is what the README uses of shoal-distbench's index ceiling
// (bench/router-index.json): the router process's figures.
type processFile struct {
	Date       string `json:"date"`
	Commit     string `json:"commit"`
	Partitions int    `json:"partitions"`
	Concrete   int    `json:"concrete_filters"`
	Wildcard   int    `json:"wildcard_filters"`
	Phases     []struct {
		Name            string  `json:"name"`
		RouterHeapPer   float64 `json:"router_heap_bytes_per_filter"`
		RouterCPUMicros float64 `json:"router_cpu_us"`
	} `json:"phases"`
	RebuildSeconds  float64           `json:"rebuild_s"`
	RouterHeapBytes map[string]uint64 `json:"router_heap_bytes"`

	link string // the file, from the README's directory
}

// heapPer returns the router's heap per filter of phase name, 0 if none.
func (f *processFile) heapPer(name string) float64 {
	for _, p := range f.Phases {
		if p.Name == name {
			return p.RouterHeapPer
		}
	}
	return 0
}

// cpuMicros returns the router's CPU-µs per message of phase name.
func (f *processFile) cpuMicros(name string) float64 {
	for _, p := range f.Phases {
		if p.Name == name {
			return p.RouterCPUMicros
		}
	}
	return 0
}

// date is the day of an RFC 3339 time, or the text itself.
func date(s string) string {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.Format(time.DateOnly)
	}
	return s
}
