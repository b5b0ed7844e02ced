package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shoal-mqtt/shoal/bench/load"
	"github.com/shoal-mqtt/shoal/internal/localserver/realkafka"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

// bench runs everything: for each topology its backbone when the one
// running is not that (the one-node backbone is stopped before the
// cluster's starts), then its Shoal processes and runs. Whatever happens,
// every process it started is stopped before it returns, and the README is
// written for the runs that finished.
func bench(ctx context.Context, opt options, stdout, stderr io.Writer) (err error) {
	work, err := os.MkdirTemp("", "shoal-distbench-")
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
	logDir := filepath.Join(opt.out, "logs")
	for _, d := range []string{opt.out, logDir, filepath.Join(opt.out, "profiles")} {
		if d == filepath.Join(opt.out, "profiles") && !opt.profile {
			continue
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("output directory: %w", err)
		}
	}
	// Results of an earlier run into the same directory would mix with
	// this run's in `shoal-bench report`.
	old, err := oldResults(opt.out)
	if err != nil {
		return fmt.Errorf("output directory: %w", err)
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return fmt.Errorf("remove an earlier result: %w", err)
		}
	}
	meta := machineInfo(opt)

	bin := opt.shoal
	if bin == "" {
		fmt.Fprintln(stderr, "building shoal")
		if bin, err = buildShoal(ctx, work); err != nil {
			return err
		}
	}
	cfgPath := filepath.Join(work, "shoal.yaml")
	cfgText := []byte(defaultShoalConfig)
	if opt.shoalConfig != "" {
		if cfgText, err = os.ReadFile(opt.shoalConfig); err != nil {
			return fmt.Errorf("shoal config: %w", err)
		}
	}
	if err := os.WriteFile(cfgPath, cfgText, 0o600); err != nil {
		return fmt.Errorf("shoal config: %w", err)
	}
	meta.shoalConfig = string(cfgText)

	var bb *backbone
	defer func() {
		if bb == nil {
			return
		}
		if serr := bb.stop(); serr != nil {
			err = errors.Join(err, serr)
		}
	}()
	var results []*load.Result
	defer func() {
		if len(results) == 0 || opt.scenario == scenUnits { // units writes its own
			return
		}
		if werr := writeReadme(filepath.Join(opt.out, "README.md"), meta, results); werr != nil {
			err = errors.Join(err, werr)
		}
		writeSummary(stdout, opt.scenario, results)
	}()
	for _, topo := range opt.topologies {
		if nodes := backboneNodes(topo); bb == nil || bb.nodes != nodes {
			if bb != nil {
				fmt.Fprintf(stderr, "stopping the backbone of %d node(s)\n", bb.nodes)
				serr := bb.stop()
				bb = nil
				if serr != nil {
					return fmt.Errorf("stop the backbone: %w", serr)
				}
			}
			fmt.Fprintf(stderr, "%s: starting kafka and cassandra, %d node(s) each (jars fetched once into the cache)\n", topo, nodes)
			if bb, err = startBackbone(ctx, work, nodes, opt.c1Only); err != nil {
				return fmt.Errorf("%s: %w", topo, err)
			}
			fmt.Fprintf(stderr, "%s: kafka %s at %v, cassandra %s at %v (pids %v), up after %s\n", topo,
				realkafka.Version, bb.brokers, bb.cqlVersion, bb.cqlHosts, bb.procs(), bb.took.Round(100*time.Millisecond))
			meta.backbones = append(meta.backbones, backboneStart{nodes: nodes, took: bb.took})
		}
		sa := shoalArgs{bin: bin, config: cfgPath, brokers: bb.brokers, cqlHosts: bb.cqlHosts,
			partitions: opt.partitions, pprof: opt.profile || opt.scenario == scenUnits, logDir: logDir, extra: bb.replicationArgs()}
		rs, err := runTopology(ctx, opt, topo, sa, bb, stdout, stderr)
		results = append(results, rs...)
		if err != nil {
			return fmt.Errorf("%s: %w", topo, err)
		}
	}
	return nil
}

// backboneNodes is the number of Kafka brokers, and of Cassandra nodes, a
// topology runs on.
func backboneNodes(topo string) int {
	if topo == topoCluster {
		return clusterNodes
	}
	return 1
}

// layout is the Shoal processes of a topology.
type layout struct{ sessions, routers, gateways int }

func topoLayout(topo string) layout {
	switch topo {
	case topoTwo:
		return layout{sessions: 1, routers: 1, gateways: 2}
	case topoCluster:
		return layout{sessions: 2, routers: 2, gateways: 3}
	}
	return layout{sessions: 1, routers: 1, gateways: 1}
}

// runTopology starts the Shoal processes of topo, runs every round and
// QoS against them and stops them.
func runTopology(ctx context.Context, opt options, topo string, sa shoalArgs, bb *backbone, stdout, stderr io.Writer) (results []*load.Result, err error) {
	sa.logDir = filepath.Join(sa.logDir, topo)
	if err := os.MkdirAll(sa.logDir, 0o755); err != nil {
		return nil, fmt.Errorf("log directory: %w", err)
	}
	c := &cluster{}
	defer func() {
		if serr := c.stop(); serr != nil {
			err = errors.Join(err, serr)
		}
	}()
	if err := c.start(ctx, topo, sa, bb, stderr); err != nil {
		return nil, err
	}
	if opt.outsideRounds > 0 && opt.scenario == scenLatency {
		if err := c.outside(ctx, opt, topo, time.Now(), stderr); err != nil {
			return nil, err
		}
	}
	if opt.prime > 0 {
		if err := c.prime(ctx, opt, topo, stderr); err != nil {
			return nil, err
		}
	}
	if opt.scenario == scenUnits && opt.indexConcrete > 0 {
		return c.routerIndex(ctx, opt, topo, bb, stdout, stderr)
	}
	if opt.scenario == scenUnits && opt.stormClients > 0 {
		return c.storms(ctx, opt, topo, bb, stdout, stderr)
	}
	if opt.scenario == scenUnits && opt.holdClients > 0 {
		return c.hold(ctx, opt, topo, bb, stdout, stderr)
	}
	if opt.scenario == scenUnits && opt.unitTicks {
		return c.ticks(ctx, opt, topo, bb, stdout, stderr)
	}
	if opt.scenario == scenUnits {
		return c.units(ctx, opt, topo, bb, stdout, stderr)
	}
	for round := 1; round <= opt.rounds; round++ {
		qs := slices.Clone(opt.qos)
		if round%2 == 0 { // neither QoS always runs on a warmer system
			slices.Reverse(qs)
		}
		for _, q := range qs {
			res, err := c.measure(ctx, opt, topo, q, round, stdout, stderr)
			if res != nil {
				results = append(results, res)
			}
			if err != nil {
				return results, err
			}
			if !load.Sleep(ctx, opt.pause) {
				return results, ctx.Err()
			}
		}
		if opt.connects > 0 {
			if err := c.connectWaves(ctx, opt, topo, round, stdout, stderr); err != nil {
				return results, err
			}
		}
	}
	return results, nil
}

// connectWaves runs the connections scenario twice with the same client
// ids: new to the broker, then returning after their sessions ended. It
// writes each wave's JSON and a line; the tables hold the latency runs
// alone.
func (c *cluster) connectWaves(ctx context.Context, opt options, topo string, round int, stdout, stderr io.Writer) error {
	for _, wave := range []string{"new", "returning"} {
		cfg := load.DefaultConfig()
		cfg.Scenario = load.ScenarioConnections
		cfg.Clients = opt.connects
		cfg.Warmup, cfg.Duration = time.Second, time.Second
		cfg.SetupTimeout = setupTimeout
		cfg.Prefix = fmt.Sprintf("bench-%s-c-r%d", topoShort(topo), round)
		cfg.Name = "connections-" + wave
		cfg.Label, cfg.Round = topo, round
		cfg.Addr = c.gws[0].mqtt
		cfg.BrokerPID = c.gws[0].pid()
		cfg.Processes = c.named
		res, err := load.Run(ctx, cfg, stderr)
		if err != nil {
			return fmt.Errorf("connections (%s ids): %w", wave, err)
		}
		if err := writeJSON(filepath.Join(opt.out, resultFile(topo, cfg.Name, round)), res); err != nil {
			return err
		}
		writeConnectLine(stdout, res)
		if !load.Sleep(ctx, opt.pause+3*time.Second) { // the disconnects applied
			return ctx.Err()
		}
	}
	return nil
}

// cluster is the Shoal processes of one topology: session services,
// routers and gateways (topoLayout).
type cluster struct {
	sa    shoalArgs      // what its processes were started with
	procs []*proc        // in start order
	gws   []*proc        // the gateways among procs
	named []load.Process // every process measured, the backbone's too
}

// start starts the session services and the routers, waits for them, then
// the gateways. A role that runs once is named after it (session, router);
// several are numbered (session-1, session-2); gateways always are.
func (c *cluster) start(ctx context.Context, topo string, sa shoalArgs, bb *backbone, stderr io.Writer) error {
	return c.startLayout(ctx, topo, topoLayout(topo), sa, bb, stderr)
}

// startLayout is start with the processes of l.
func (c *cluster) startLayout(ctx context.Context, topo string, l layout, sa shoalArgs, bb *backbone, stderr io.Writer) error {
	c.sa = sa
	start := func(role, name string) (*proc, error) {
		p, err := startShoal(sa, role, name)
		if err != nil {
			return nil, err
		}
		c.procs = append(c.procs, p)
		return p, nil
	}
	fmt.Fprintf(stderr, "%s: starting shoal: %d session service(s), %d router(s), %d gateway(s)\n", topo, l.sessions, l.routers, l.gateways)
	began := time.Now()
	var sessions, routers []*proc
	for i := range l.sessions {
		p, err := start("session", roleName("session", i, l.sessions))
		if err != nil {
			return err
		}
		sessions = append(sessions, p)
	}
	for i := range l.routers {
		p, err := start("router", roleName("router", i, l.routers))
		if err != nil {
			return err
		}
		routers = append(routers, p)
	}
	for _, p := range c.procs {
		if err := p.waitReady(ctx); err != nil {
			return err
		}
	}
	for i := range l.gateways {
		gw, err := start("gateway", fmt.Sprintf("gateway-%d", i+1))
		if err != nil {
			return err
		}
		c.gws = append(c.gws, gw)
	}
	for _, gw := range c.gws {
		if err := gw.waitReady(ctx); err != nil {
			return err
		}
	}
	fmt.Fprintf(stderr, "%s: ready after %s\n", topo, time.Since(began).Round(100*time.Millisecond))
	for _, p := range slices.Concat(c.gws, routers, sessions) {
		c.named = append(c.named, load.Process{Name: p.name, PID: p.pid()})
	}
	c.named = append(c.named, bb.procs()...)
	return nil
}

// roleName names process i of the n of a role.
func roleName(role string, i, n int) string {
	if n == 1 {
		return role
	}
	return fmt.Sprintf("%s-%d", role, i+1)
}

// stop stops the processes, gateways first, as an operator would drain a
// cluster.
func (c *cluster) stop() error {
	var err error
	for _, p := range slices.Backward(c.procs) {
		if serr := p.stop(); serr != nil {
			err = errors.Join(err, serr)
		}
	}
	c.procs = nil
	return err
}

// addrs points cfg's clients at the gateways: every client at the one
// gateway; publishers at the first of two and subscribers at the second;
// with more, pair i's publisher at gateway i mod n and its subscriber at
// the next one, so that every message crosses the log and every gateway
// both receives and delivers.
func (c *cluster) addrs(cfg *load.Config) {
	cfg.Addr, cfg.SubscriberAddr = gatewayAddrs(c.gws)
}

func gatewayAddrs(gws []*proc) (pub, sub string) {
	switch len(gws) {
	case 1:
		return gws[0].mqtt, ""
	case 2:
		return gws[0].mqtt, gws[1].mqtt
	}
	pubs := make([]string, len(gws))
	subs := make([]string, len(gws))
	for i, gw := range gws {
		pubs[i] = gw.mqtt
		subs[(i+len(gws)-1)%len(gws)] = gw.mqtt
	}
	return strings.Join(pubs, ","), strings.Join(subs, ",")
}

// prime runs load that is not recorded: the JVMs compile their hot paths,
// every process warms its connections and buffers.
func (c *cluster) prime(ctx context.Context, opt options, topo string, stderr io.Writer) error {
	cfg := opt.loadConfig(topo, opt.qos[0], 0)
	cfg.Prefix = "bench-" + topoShort(topo) + "-prime"
	cfg.Name = "prime"
	cfg.Duration = opt.prime
	c.addrs(&cfg)
	fmt.Fprintf(stderr, "%s: priming for %s (not recorded)\n", topo, opt.prime)
	if _, err := load.Run(ctx, cfg, io.Discard); err != nil {
		return fmt.Errorf("prime: %w", err)
	}
	if !load.Sleep(ctx, opt.pause) {
		return ctx.Err()
	}
	return nil
}

// measure runs one recorded run at QoS q, once every process is checked
// alive, and writes its JSON and its line. A run cut short measured
// nothing worth keeping: it returns no result.
func (c *cluster) measure(ctx context.Context, opt options, topo string, q packet.QoS, round int, stdout, stderr io.Writer) (*load.Result, error) {
	for _, p := range c.procs {
		if err := p.alive(); err != nil {
			return nil, err
		}
	}
	cfg := opt.loadConfig(topo, q, round)
	c.addrs(&cfg)
	cfg.BrokerPID = c.gws[0].pid()
	cfg.Processes = c.named
	res, err := runOnce(ctx, opt, cfg, c.procs, stderr)
	if err != nil {
		return nil, err
	}
	if werr := writeJSON(filepath.Join(opt.out, resultFile(topo, cfg.Name, round)), res); werr != nil {
		return res, werr
	}
	writeRunLine(stdout, res)
	return res, nil
}

// oldResults lists the result files of an earlier run in dir: every name
// resultFile makes.
func oldResults(dir string) ([]string, error) {
	var old []string
	for _, scenario := range []string{scenLatency, scenPairs, "connections", scenUnits} {
		fs, err := filepath.Glob(filepath.Join(dir, "*-"+scenario+"-*-r*.json"))
		if err != nil {
			return nil, err
		}
		old = append(old, fs...)
	}
	return old, nil
}

// resultFile names a run's JSON: <topology>-<scenario>-qos<N>-r<round>.json
// (name is <scenario>-qos<N>).
func resultFile(topo, name string, round int) string {
	return fmt.Sprintf("%s-%s-r%d.json", topo, name, round)
}

// runOnce runs the generator once, taking CPU profiles of procs over its
// measured window with -profile.
func runOnce(ctx context.Context, opt options, cfg load.Config, procs []*proc, stderr io.Writer) (*load.Result, error) {
	var profiles sync.WaitGroup
	var perrs []error
	var mu sync.Mutex
	if opt.profile {
		cfg.OnMeasure = func(d time.Duration) {
			for _, p := range procs {
				path := filepath.Join(opt.out, "profiles", fmt.Sprintf("%s-%s-r%d-%s.pprof", cfg.Label, cfg.Name, cfg.Round, p.name))
				profiles.Go(func() {
					if err := p.profile(ctx, d, path); err != nil {
						mu.Lock()
						perrs = append(perrs, err)
						mu.Unlock()
					}
				})
			}
		}
	}
	res, err := load.Run(ctx, cfg, stderr)
	profiles.Wait()
	if err != nil {
		return res, fmt.Errorf("%s round %d: %w", cfg.Name, cfg.Round, err)
	}
	if len(perrs) > 0 {
		fmt.Fprintln(stderr, "profiles:", errors.Join(perrs...))
	}
	return res, nil
}

func writeJSON(path string, res *load.Result) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	return nil
}
