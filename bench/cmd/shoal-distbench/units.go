package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/shoal-mqtt/shoal/bench/load"
)

// scenUnits measures what one message and one connect cost each kind of
// process (CPU from /proc), the log (records and bytes per topic, from
// Kafka) and the database (requests, from Cassandra's own tables), one
// phase after another on one topology.
const scenUnits = "units"

// unitPhase is one phase of the units scenario: a generator run, and what
// its costs are divided by.
type unitPhase struct {
	name string
	// per is what a cost is per: "message" (a publish), "connect" or
	// "subscription".
	per string
	cfg load.Config
	// takeover: the connects take over sessions live on another gateway.
	takeover bool
}

// unitSessionExpiry is the session expiry of the phases with persistent
// sessions: longer than any phase, and the clients end their sessions
// when a phase ends (but for connect-persistent-new's, which the next
// phase takes up).
const unitSessionExpiry = 10 * time.Minute

// unitPhases are the units scenario's phases on topo, in order.
func (o *options) unitPhases(topo string) []unitPhase {
	pairs := func(name string, qos, payload int) unitPhase {
		cfg := o.loadConfig(topo, 0, 1)
		cfg.Scenario = load.ScenarioPairs
		cfg.QoS = 0
		cfg.Rate = 0
		if qos == 0 {
			cfg.Window = o.window
		} else {
			cfg.QoS, cfg.Window = 1, 0
		}
		cfg.Payload = payload
		cfg.Prefix = "bench-u" + name
		cfg.Name = name
		return unitPhase{name: name, per: "message", cfg: cfg}
	}
	fan := o.loadConfig(topo, 0, 1)
	fan.Scenario = load.ScenarioFanout
	fan.Clients = o.fanout
	fan.Rate = o.fanoutRate
	fan.Window = 0
	fan.Prefix = "bench-ufan"
	fan.Name = fmt.Sprintf("fanout-%d-qos0", o.fanout)
	persistent := pairs("pairs-qos1-persistent", 1, 62)
	persistent.cfg.SessionExpiry = unitSessionExpiry
	// An end-to-end window as at QoS 0: a persistent session's QoS 1
	// messages go through its inbox, and a publisher acknowledged as soon
	// as its message is in the log runs ahead of the inbox's forwarding
	// until session.max_inbox drops the excess (docs/capacity.md).
	persistent.cfg.Window = o.window
	// The offline phase: 500 persistent sessions offline while their
	// publishers send -unit-queued messages each, then back for them.
	off := o.loadConfig(topo, 1, 1)
	off.Clients = 500
	off.Scenario = load.ScenarioOffline
	off.Rate, off.Window, off.Payload = 0, 0, 62
	off.SessionExpiry = unitSessionExpiry
	off.Queued = o.unitQueued
	off.Warmup = 3 * time.Second // each settle: the stores caught up
	off.Duration = time.Minute   // each stage's bound
	off.Prefix = "bench-uoff"
	off.Name = "offline-qos1"
	conns := func(name, prefix string) unitPhase {
		cfg := load.DefaultConfig()
		cfg.Scenario = load.ScenarioConnections
		cfg.Clients = o.unitConnects
		cfg.Warmup, cfg.Duration = time.Second, time.Second
		cfg.SetupTimeout = setupTimeout
		cfg.Prefix = prefix
		cfg.Name = name
		cfg.Label, cfg.Round = topo, 1
		return unitPhase{name: name, per: "connect", cfg: cfg}
	}
	subs := func(name, prefix string, filters int, wildcard bool) unitPhase {
		ph := conns(name, prefix)
		ph.per = "subscription"
		ph.cfg.Clients, ph.cfg.Subscriptions, ph.cfg.WildcardFilters = o.unitSubscribers, filters, wildcard
		ph.cfg.QoS = 1
		ph.cfg.Warmup = 3 * time.Second // the stores caught up
		ph.cfg.SetupTimeout = 5 * time.Minute
		return ph
	}
	takeover := conns("connect-takeover", "bench-utake")
	takeover.takeover = true
	persNew := conns("connect-persistent-new", "bench-upers")
	persNew.cfg.SessionExpiry, persNew.cfg.KeepSessions = unitSessionExpiry, true
	persBack := conns("connect-persistent-resumed", "bench-upers")
	persBack.cfg.SessionExpiry, persBack.cfg.Resume = unitSessionExpiry, true
	return []unitPhase{
		pairs("pairs-qos0", 0, 64),
		// TBMQ's point-to-point payload.
		pairs("pairs-qos1", 1, 62),
		persistent,
		{name: off.Name, per: "message", cfg: off},
		{name: fan.Name, per: "message", cfg: fan},
		// The same ids twice: new, then returning to a session that ended.
		conns("connect-new", "bench-uconn"),
		conns("connect-returning", "bench-uconn"),
		// Persistent sessions, kept offline, then taken up.
		persNew,
		persBack,
		takeover,
		subs("subscribe-concrete", "bench-usubc", o.unitFilters, false),
		subs("subscribe-wildcard", "bench-usubw", o.unitWildcards, true),
	}
}

// plainPhase runs a message or connect phase: its costs are those of the
// generator's measured window (messages) or of the whole run (connects).
func plainPhase(ctx context.Context, ph unitPhase, cfg load.Config, m *unitMeter, idle map[string]float64, stderr io.Writer) (*load.Result, []unitResult, error) {
	before, err := m.sample(ctx)
	if err != nil {
		return nil, nil, err
	}
	// A message phase's log and database counts are those of its
	// measured window, as its CPU is: not its clients' connects and
	// subscriptions.
	window := make(chan [2]unitSample, 1)
	werr := make(chan error, 1)
	if ph.per == "message" {
		cfg.OnMeasure = func(d time.Duration) {
			go func() {
				a, err := m.sample(ctx)
				if err == nil && load.Sleep(ctx, d) {
					var b unitSample
					if b, err = m.sample(ctx); err == nil {
						window <- [2]unitSample{a, b}
						return
					}
				}
				werr <- errors.Join(err, ctx.Err())
			}()
		}
	}
	res, err := load.Run(ctx, cfg, stderr)
	if err != nil {
		return res, nil, err
	}
	after, err := m.sample(ctx)
	if err != nil {
		return res, nil, err
	}
	if ph.per == "message" {
		select {
		case w := <-window:
			before, after = w[0], w[1]
		case err := <-werr:
			return res, nil, fmt.Errorf("measured window: %w", err)
		case <-ctx.Done():
			return res, nil, ctx.Err()
		}
	}
	return res, []unitResult{unitCosts(ph, res, before, after, idle)}, nil
}

// stagedPhase runs a phase whose costs are taken between the stages the
// generator calls out (load.Config.OnStage): the offline phase's queue and
// delivery, a subscribe phase's subscriptions.
func stagedPhase(ctx context.Context, ph unitPhase, cfg load.Config, m *unitMeter, idle map[string]float64, stderr io.Writer) (*load.Result, []unitResult, error) {
	stages := map[string]unitSample{}
	var serr error
	cfg.OnStage = func(stage string) {
		// A subscribe phase's live heaps: collected before the CPU sample
		// at its start and after it at its end, so that the forced
		// collections are outside what it measures.
		var heap map[string]uint64
		var herr error
		if ph.per == "subscription" && stage == "subscribe" {
			heap, herr = m.liveHeap(ctx)
		}
		s, err := m.sample(ctx)
		if ph.per == "subscription" && stage == "hold" {
			heap, herr = m.liveHeap(ctx)
		}
		s.heap = heap
		stages[stage], serr = s, errors.Join(serr, err, herr)
	}
	res, err := load.Run(ctx, cfg, stderr)
	if err != nil {
		return res, nil, err
	}
	if serr != nil {
		return res, nil, fmt.Errorf("stage samples: %w", serr)
	}
	if ph.cfg.Scenario == load.ScenarioOffline {
		us, err := offlineCosts(ph, res, stages, idle)
		return res, us, err
	}
	a, okA := stages["subscribe"]
	b, okB := stages["hold"]
	if !okA || !okB || res.Connect == nil {
		return res, nil, fmt.Errorf("no samples of the subscriptions (errors: %v)", res.Errors)
	}
	u := unitCosts(ph, res, a, b, idle)
	if want := ph.cfg.Clients * ph.cfg.Subscriptions; res.Connect.Subscribed < want {
		return res, nil, fmt.Errorf("%d of %d filters subscribed (errors: %v)", res.Connect.Subscribed, want, res.Errors)
	}
	return res, []unitResult{u}, nil
}

// takeoverPhase connects ph.cfg's clients to the first gateway and, while
// they are held, the same identifiers to the second: each connect of the
// second run takes a session over from a live connection on another
// gateway. The costs are the second run's, per connect.
func (c *cluster) takeoverPhase(ctx context.Context, ph unitPhase, cfg load.Config, m *unitMeter, idle map[string]float64, stderr io.Writer) (*load.Result, []unitResult, error) {
	if len(c.gws) < 2 {
		return nil, nil, errors.New("a takeover needs two gateways")
	}
	first := cfg
	first.Name = ph.name + "-held"
	first.Duration = 5 * time.Minute // cut short once the takeovers are done
	held := make(chan struct{})
	first.OnMeasure = func(time.Duration) { close(held) }
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := load.Run(hctx, first, io.Discard)
		done <- err
	}()
	select {
	case <-held:
	case err := <-done:
		return nil, nil, fmt.Errorf("the connections to take over: %w", err)
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	second := cfg
	second.Addr = c.gws[1].mqtt
	second.BrokerPID = c.gws[1].pid()
	res, us, err := plainPhase(ctx, ph, second, m, idle, stderr)
	cancel()
	if err := <-done; err != nil && ctx.Err() == nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(stderr, "%s: the held connections' run: %v (expected: cut short)\n", ph.name, err)
	}
	return res, us, err
}

// units runs the units scenario's phases on the started topology and
// writes their costs to opt.unitsOut and stdout.
func (c *cluster) units(ctx context.Context, opt options, topo string, bb *backbone, stdout, stderr io.Writer) ([]*load.Result, error) {
	m, err := newUnitMeter(bb, c.named, c.procs)
	if err != nil {
		return nil, err
	}
	meta := machineInfo(opt)
	f := unitsFile{runHeader: meta.header(bb),
		MemGiB: meta.memGiB, Kernel: meta.kernel, Go: meta.goVersion,
		Topology: topo}
	fmt.Fprintf(stderr, "%s: units, idle for %s\n", topo, opt.unitIdle)
	s0, s1, idle, err := m.idleWindow(ctx, opt.unitIdle)
	if err != nil {
		return nil, err
	}
	f.IdleSeconds = s1.at.Sub(s0.at).Seconds()
	f.IdleCPUPercent = map[string]float64{}
	for name, r := range idle {
		f.IdleCPUPercent[kindOf(name)] += 100 * r
	}
	var results []*load.Result
	for _, ph := range opt.unitPhases(topo) {
		for _, p := range c.procs {
			if err := p.alive(); err != nil {
				return results, err
			}
		}
		cfg := ph.cfg
		c.addrs(&cfg)
		if ph.per != "message" {
			cfg.Addr, cfg.SubscriberAddr = c.gws[0].mqtt, ""
		}
		cfg.BrokerPID = c.gws[0].pid()
		cfg.Processes = c.named
		fmt.Fprintf(stderr, "%s: units, %s\n", topo, ph.name)
		var us []unitResult
		var res *load.Result
		switch {
		case ph.takeover:
			res, us, err = c.takeoverPhase(ctx, ph, cfg, m, idle, stderr)
		case ph.cfg.Scenario == load.ScenarioOffline || ph.cfg.Subscriptions > 0:
			res, us, err = stagedPhase(ctx, ph, cfg, m, idle, stderr)
		default:
			res, us, err = plainPhase(ctx, ph, cfg, m, idle, stderr)
		}
		if res != nil {
			results = append(results, res)
			if werr := writeJSON(filepath.Join(opt.out, topo+"-units-"+ph.name+".json"), res); werr != nil {
				return results, werr
			}
		}
		if err != nil {
			return results, fmt.Errorf("%s: %w", ph.name, err)
		}
		for _, u := range us {
			f.Units = append(f.Units, u)
			writeUnitLine(stdout, u)
		}
		if !load.Sleep(ctx, opt.pause+3*time.Second) { // disconnects applied, queues drained
			return results, ctx.Err()
		}
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return results, fmt.Errorf("encode units: %w", err)
	}
	if err := os.WriteFile(opt.unitsOut, append(b, '\n'), 0o644); err != nil {
		return results, fmt.Errorf("write units: %w", err)
	}
	fmt.Fprintln(stderr, "units written to", opt.unitsOut)
	fmt.Fprintln(stdout)
	writeUnitsTable(stdout, f.Units)
	if err := os.WriteFile(filepath.Join(opt.out, "README.md"), []byte(unitsReadme(f)), 0o644); err != nil {
		return results, fmt.Errorf("write README: %w", err)
	}
	return results, nil
}
