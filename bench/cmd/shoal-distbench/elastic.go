package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/shoal-mqtt/shoal/bench/load"
)

// Elasticity, after the index ceiling's rebuild: a second router joins
// while 10,000 msg/s flow, and leaves again (SIGTERM) under the same load.
// Each move hands partitions to another router, which rebuilds their
// shards from CQL before it routes them: the longest latency of the run is
// the pause the change caused in the partitions that moved.

// scaleEventAfter is when, in a scale phase's measured window, the router
// joins or leaves; scaleWindow is the window, long enough for the rebuild
// of a full index's share (docs/capacity.md: 26 s for all of it).
const (
	scaleEventAfter = 5 * time.Second
	scaleWindow     = 60 * time.Second
)

// scalePhase runs the latency load (10,000 msg/s QoS 0, or as shape
// makes it) and, scaleEventAfter into its measured window, act, whose
// duration it reports with the run's latency.
func (c *cluster) scalePhase(ctx context.Context, opt options, topo, name string, shape func(*load.Config), act func() error, stdout, stderr io.Writer) (index, *load.Result, error) {
	cfg := opt.loadConfig(topo, 0, 1)
	cfg.Scenario, cfg.Rate, cfg.Window = load.ScenarioLatency, 10000, 0
	cfg.Duration = scaleWindow
	cfg.Drain = 30 * time.Second
	cfg.Prefix, cfg.Name = "bench-ixs-"+name, name
	if shape != nil {
		shape(&cfg)
	}
	c.addrs(&cfg)
	done := make(chan error, 1)
	var took time.Duration
	cfg.OnMeasure = func(time.Duration) {
		go func() {
			if !load.Sleep(ctx, scaleEventAfter) {
				done <- ctx.Err()
				return
			}
			began := time.Now()
			err := act()
			took = time.Since(began)
			done <- err
		}()
	}
	fmt.Fprintf(stderr, "%s: index, %s\n", topo, name)
	res, err := load.Run(ctx, cfg, stderr)
	if err != nil {
		return index{}, nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := <-done; err != nil {
		return index{}, res, fmt.Errorf("%s: %w", name, err)
	}
	ph := index{Name: name, Messages: res.Measured.Sent, EventSeconds: took.Seconds()}
	if l := res.Latency; l != nil {
		ph.P50Ms, ph.P99Ms, ph.P999Ms, ph.MaxMs = l.P50/1000, l.P99/1000, l.P999/1000, l.Max/1000
	}
	if res.Expected > res.Unique {
		ph.Lost = res.Expected - res.Unique
	}
	fmt.Fprintf(stdout, "%s: the start or stop took %.1f s; %d messages at %.0f/s, p50 %.2f ms, p99 %.1f ms, p99.9 %.1f ms, max %.1f ms; %d lost\n",
		name, ph.EventSeconds, ph.Messages, cfg.Rate, ph.P50Ms, ph.P99Ms, ph.P999Ms, ph.MaxMs, ph.Lost)
	return ph, res, nil
}

// scaleRouters adds a router and removes it again, each under load.
func (c *cluster) scaleRouters(ctx context.Context, opt options, topo string, f *indexFile, stdout, stderr io.Writer) ([]*load.Result, error) {
	phases, results, err := c.scaleRole(ctx, opt, topo, "router", "router-2", nil, stdout, stderr)
	f.Phases = append(f.Phases, phases...)
	return results, err
}

// scaleRole starts a second instance of role (named name) under load, and
// stops it again under load.
func (c *cluster) scaleRole(ctx context.Context, opt options, topo, role, name string, shape func(*load.Config), stdout, stderr io.Writer) ([]index, []*load.Result, error) {
	var results []*load.Result
	var phases []index
	var added *proc
	join := func() error {
		p, err := startShoal(c.sa, role, name)
		if err != nil {
			return err
		}
		c.procs = append(c.procs, p)
		added = p
		return waitReadyWithin(ctx, p, indexRebuildBound)
	}
	leave := func() error {
		if err := added.stop(); err != nil {
			return err
		}
		out := c.procs[:0]
		for _, p := range c.procs {
			if p != added {
				out = append(out, p)
			}
		}
		c.procs = out
		return nil
	}
	for _, s := range []struct {
		name string
		act  func() error
	}{{"scale-out", join}, {"scale-in", leave}} {
		ph, res, err := c.scalePhase(ctx, opt, topo, s.name, shape, s.act, stdout, stderr)
		if res != nil {
			results = append(results, res)
		}
		if err != nil {
			return phases, results, err
		}
		phases = append(phases, ph)
	}
	return phases, results, nil
}
