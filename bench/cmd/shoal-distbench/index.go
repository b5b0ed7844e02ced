package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/shoal-mqtt/shoal/bench/load"
)

// The router index ceiling (-unit-index): the units scenario's topology
// loaded with many persistent sessions' subscriptions, which stay in the
// router's index while the sessions are offline, then measured: the
// router's heap per subscription at that size, its CPU per message with
// the index against without, and how long a router takes to rebuild it
// from CQL when it restarts.

// indexSubscribers is the connections that subscribe the index's filters,
// each its share of them.
const indexSubscribers = 1000

// indexRebuildBound bounds a restarted router's wait to be ready.
const indexRebuildBound = 20 * time.Minute

// indexFile is bench/router-index.json.
type indexFile struct {
	runHeader
	Concrete int     `json:"concrete_filters"`
	Wildcard int     `json:"wildcard_filters"`
	Phases   []index `json:"phases"`
	// RebuildSeconds is a restarted router's time from its start to
	// ready: its shards, every subscription of them, read from CQL.
	RebuildSeconds float64 `json:"rebuild_s"`
	// RouterHeapBytes is the router's live heap: empty, with the
	// concrete filters, with both, and in the restarted router.
	RouterHeapBytes map[string]uint64 `json:"router_heap_bytes"`
}

// index is one phase of the index ceiling.
type index struct {
	Name string `json:"name"`
	// For subscribe phases: filters acknowledged, per second, SUBACK
	// latency and the router's live heap per filter.
	Subscribed      int     `json:"subscribed,omitempty"`
	SubscribePerSec float64 `json:"subscribe_per_s,omitempty"`
	SubackP50Ms     float64 `json:"suback_p50_ms,omitempty"`
	SubackP99Ms     float64 `json:"suback_p99_ms,omitempty"`
	RouterHeapPer   float64 `json:"router_heap_bytes_per_filter,omitempty"`
	// For match phases: messages at a fixed rate, the router's CPU-µs per
	// message and the end-to-end latency.
	Messages        uint64  `json:"messages,omitempty"`
	RouterCPUMicros float64 `json:"router_cpu_us,omitempty"`
	P50Ms           float64 `json:"p50_ms,omitempty"`
	P99Ms           float64 `json:"p99_ms,omitempty"`
	// For scale phases: the tail, and how long the join (until the new
	// router was ready) or the leave (until it exited) took.
	P999Ms       float64 `json:"p99_9_ms,omitempty"`
	MaxMs        float64 `json:"max_ms,omitempty"`
	EventSeconds float64 `json:"event_s,omitempty"`
	Lost         uint64  `json:"lost_or_undelivered"`
}

// routerIndex runs the index ceiling on the started topology.
func (c *cluster) routerIndex(ctx context.Context, opt options, topo string, bb *backbone, stdout, stderr io.Writer) ([]*load.Result, error) {
	router := c.role("router")
	if router == nil {
		return nil, errors.New("the index ceiling needs one router")
	}
	meta := machineInfo(opt)
	f := indexFile{runHeader: meta.header(bb),

		Concrete: opt.indexConcrete, Wildcard: opt.indexWildcard, RouterHeapBytes: map[string]uint64{}}
	var results []*load.Result
	heap := func(p *proc) (uint64, error) {
		m := &unitMeter{debug: map[string]string{p.name: p.http}}
		h, err := m.liveHeap(ctx)
		return h[p.name], err
	}
	match := func(name string, r *proc) error {
		cfg := opt.loadConfig(topo, 0, 1)
		cfg.Scenario, cfg.Rate, cfg.Window = load.ScenarioLatency, 10000, 0
		cfg.Prefix, cfg.Name = "bench-ixm-"+name, name
		c.addrs(&cfg)
		cfg.Processes = []load.Process{{Name: r.name, PID: r.pid()}}
		fmt.Fprintf(stderr, "%s: index, %s\n", topo, name)
		res, err := load.Run(ctx, cfg, stderr)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		results = append(results, res)
		ph := index{Name: name, Messages: res.Measured.Sent}
		if len(res.Processes) == 1 && res.Measured.Sent > 0 {
			ph.RouterCPUMicros = res.Processes[0].CPUSeconds * 1e6 / float64(res.Measured.Sent)
		}
		if res.Latency != nil {
			ph.P50Ms, ph.P99Ms = res.Latency.P50/1000, res.Latency.P99/1000
		}
		if res.Expected > res.Unique {
			ph.Lost = res.Expected - res.Unique
		}
		f.Phases = append(f.Phases, ph)
		fmt.Fprintf(stdout, "%s: %d messages at 10,000/s; router %.2f CPU-µs per message; p50 %.2f ms, p99 %.2f ms; %d lost\n",
			name, ph.Messages, ph.RouterCPUMicros, ph.P50Ms, ph.P99Ms, ph.Lost)
		return nil
	}
	subscribe := func(name, prefix string, filters int, wildcard bool, before uint64) (uint64, error) {
		cfg := load.DefaultConfig()
		cfg.Scenario, cfg.Clients, cfg.QoS = load.ScenarioConnections, indexSubscribers, 1
		cfg.Subscriptions, cfg.WildcardFilters = max(1, filters/indexSubscribers), wildcard
		// Persistent sessions, kept: their subscriptions stay in the index
		// once they disconnect.
		cfg.SessionExpiry, cfg.KeepSessions = time.Hour, true
		cfg.Warmup, cfg.Duration = 3*time.Second, time.Second
		cfg.SetupTimeout = 30 * time.Minute
		cfg.Prefix, cfg.Name, cfg.Label, cfg.Round = prefix, name, topo, 1
		cfg.Addr = c.gws[0].mqtt
		fmt.Fprintf(stderr, "%s: index, %s (%d filters)\n", topo, name, cfg.Clients*cfg.Subscriptions)
		res, err := load.Run(ctx, cfg, stderr)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		results = append(results, res)
		cs := res.Connect
		if cs == nil || cs.Subscribed != cfg.Clients*cfg.Subscriptions {
			return 0, fmt.Errorf("%s: not every filter subscribed (errors: %v)", name, res.Errors)
		}
		h, err := heap(router)
		if err != nil {
			return 0, err
		}
		ph := index{Name: name, Subscribed: cs.Subscribed, SubscribePerSec: cs.SubscribePerSec,
			RouterHeapPer: float64(int64(h)-int64(before)) / float64(cs.Subscribed)}
		if l := cs.SubscribeLatency; l != nil {
			ph.SubackP50Ms, ph.SubackP99Ms = l.P50/1000, l.P99/1000
		}
		f.Phases = append(f.Phases, ph)
		fmt.Fprintf(stdout, "%s: %d filters at %.0f/s, SUBACK p50 %.1f ms, p99 %.1f ms; router heap %.0f B per filter\n",
			name, ph.Subscribed, ph.SubscribePerSec, ph.SubackP50Ms, ph.SubackP99Ms, ph.RouterHeapPer)
		return h, nil
	}

	h0, err := heap(router)
	if err != nil {
		return nil, err
	}
	f.RouterHeapBytes["empty"] = h0
	if err := match("match-empty", router); err != nil {
		return results, err
	}
	h1, err := subscribe("subscribe-concrete", "bench-ixc", opt.indexConcrete, false, h0)
	if err != nil {
		return results, err
	}
	f.RouterHeapBytes["concrete"] = h1
	h2, err := subscribe("subscribe-wildcard", "bench-ixw", opt.indexWildcard, true, h1)
	if err != nil {
		return results, err
	}
	f.RouterHeapBytes["concrete_and_wildcard"] = h2
	if err := match("match-full", router); err != nil {
		return results, err
	}

	// The rebuild: the router stops and a new one reads the index back.
	fmt.Fprintf(stderr, "%s: index, router restart\n", topo)
	if err := router.stop(); err != nil {
		return results, err
	}
	began := time.Now()
	again, err := startShoal(c.sa, "router", "router-restarted")
	if err != nil {
		return results, err
	}
	for i, p := range c.procs { // the stopped router's place: the cluster stops the new one
		if p == router {
			c.procs[i] = again
		}
	}
	if err := waitReadyWithin(ctx, again, indexRebuildBound); err != nil {
		return results, err
	}
	f.RebuildSeconds = time.Since(began).Seconds()
	if f.RouterHeapBytes["rebuilt"], err = heap(again); err != nil {
		return results, err
	}
	fmt.Fprintf(stdout, "router restart: ready after %.1f s with %d MiB of live heap (%d MiB before it stopped)\n",
		f.RebuildSeconds, f.RouterHeapBytes["rebuilt"]>>20, h2>>20)
	if err := match("match-rebuilt", again); err != nil {
		return results, err
	}
	rs, err := c.scaleRouters(ctx, opt, topo, &f, stdout, stderr)
	results = append(results, rs...)
	if err != nil {
		return results, err
	}

	return results, writeCeiling(opt, opt.indexOut, "index ceiling", f, indexReadme(f), stderr)
}

// writeCeiling writes a ceiling's results, v as JSON into path and readme
// as the README of opt.out, and says so on stderr; what names them in the
// errors and the message.
func writeCeiling(opt options, path, what string, v any, readme string, stderr io.Writer) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the %s: %w", what, err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write the %s: %w", what, err)
	}
	if err := os.WriteFile(filepath.Join(opt.out, "README.md"), []byte(readme), 0o644); err != nil {
		return fmt.Errorf("write README: %w", err)
	}
	fmt.Fprintln(stderr, what, "written to", path)
	return nil
}

// role returns the one process named name, nil if none.
func (c *cluster) role(name string) *proc {
	for _, p := range c.procs {
		if p.name == name {
			return p
		}
	}
	return nil
}

// waitReadyWithin polls p's /readyz until it answers 200, p exits, ctx
// ends or bound passes (proc.waitReady's, readyTimeout; a router
// rebuilding a large index takes longer).
func waitReadyWithin(ctx context.Context, p *proc, bound time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.http+"/readyz", nil)
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		if resp, err := client.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before it was ready: %w%s", p.name, p.err, p.tail())
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w%s", p.name, ctx.Err(), p.tail())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// indexReadme is the README of an index ceiling's results.
func indexReadme(f indexFile) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# The router's index at %d concrete and %d wildcard filters (%s)\n\n```\n%s\n```\n\n", f.Concrete, f.Wildcard, f.Date[:10], f.Command)
	fmt.Fprintf(&b, "- Machine: %s, %d cores; Kafka %s, Cassandra %s, one node each; Shoal `%s`, one router, %d partitions per event topic.\n", f.CPU, f.Cores, f.Kafka, f.Cassandra, f.Commit, f.Partitions)
	fmt.Fprintf(&b, "- The filters are persistent sessions' (kept offline, so they stay in the index), %d connections subscribing their share one SUBSCRIBE at a time, 64 at once. The match phases are 50 QoS 0 pairs at 10,000 msg/s on topics outside the index.\n\n", indexSubscribers)
	fmt.Fprintln(&b, "| phase | filters | per second | SUBACK p50 / p99 ms | router heap per filter, B | messages | router CPU-µs per message | p50 / p99 ms | lost |")
	fmt.Fprintln(&b, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	var scale []index
	for _, p := range f.Phases {
		if p.EventSeconds > 0 {
			scale = append(scale, p)
			continue
		}
		if p.Subscribed > 0 {
			fmt.Fprintf(&b, "| %s | %d | %.0f | %.1f / %.1f | %.0f | | | | |\n", p.Name, p.Subscribed, p.SubscribePerSec, p.SubackP50Ms, p.SubackP99Ms, p.RouterHeapPer)
			continue
		}
		fmt.Fprintf(&b, "| %s | | | | | %d | %.2f | %.2f / %.2f | %d |\n", p.Name, p.Messages, p.RouterCPUMicros, p.P50Ms, p.P99Ms, p.Lost)
	}
	fmt.Fprintf(&b, "\nRouter live heap: empty %d MiB, with the concrete filters %d MiB, with both %d MiB; the restarted router was ready after %.1f s with %d MiB.\n",
		f.RouterHeapBytes["empty"]>>20, f.RouterHeapBytes["concrete"]>>20, f.RouterHeapBytes["concrete_and_wildcard"]>>20, f.RebuildSeconds, f.RouterHeapBytes["rebuilt"]>>20)
	if len(scale) > 0 {
		fmt.Fprintf(&b, "\nElasticity: under the same 10,000 msg/s, %s into a window of %s, a second router starts (scale-out) and then stops (scale-in: SIGTERM); the second column is from its start until it answered ready (before the group gave it partitions) or until it exited. The longest latency is the pause of the partitions that moved while their new owner loaded their shards.\n\n", scaleEventAfter, scaleWindow)
		fmt.Fprintln(&b, "| phase | start or stop | messages | p50 / p99 / p99.9 / max ms | lost |")
		fmt.Fprintln(&b, "|---|---:|---:|---:|---:|")
		for _, p := range scale {
			fmt.Fprintf(&b, "| %s | %.1f s | %d | %.2f / %.1f / %.1f / %.1f | %d |\n", p.Name, p.EventSeconds, p.Messages, p.P50Ms, p.P99Ms, p.P999Ms, p.MaxMs, p.Lost)
		}
	}
	return b.String()
}
