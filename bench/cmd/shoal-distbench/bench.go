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
	"sync"
	"time"

	"github.com/shoal-mqtt/shoal/bench/load"
	"github.com/shoal-mqtt/shoal/internal/localserver/realkafka"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

// bench runs everything: the backbone, then each topology's Shoal
// processes and runs. Whatever happens, every process it started is
// stopped before it returns, and the README is written for the runs that
// finished.
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
	old, err := filepath.Glob(filepath.Join(opt.out, "*-latency-qos*-r*.json"))
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

	fmt.Fprintln(stderr, "starting kafka and cassandra (jars fetched once into the cache)")
	began := time.Now()
	bb, err := startBackbone(ctx, work, opt.c1Only)
	if err != nil {
		return err
	}
	defer func() {
		if serr := bb.stop(); serr != nil {
			err = errors.Join(err, serr)
		}
	}()
	fmt.Fprintf(stderr, "kafka %s at %v (pid %d), cassandra %s at %v (pid %d), up after %s\n",
		realkafka.Version, bb.kafka.Brokers(), bb.kafka.PID(), bb.cql.ReleaseVersion(), bb.cql.Hosts(), bb.cql.PID(),
		time.Since(began).Round(100*time.Millisecond))

	sa := shoalArgs{bin: bin, config: cfgPath, brokers: bb.kafka.Brokers(), cqlHosts: bb.cql.Hosts(),
		partitions: opt.partitions, pprof: opt.profile, logDir: logDir}
	var results []*load.Result
	defer func() {
		if len(results) == 0 {
			return
		}
		if werr := writeReadme(filepath.Join(opt.out, "README.md"), meta, results); werr != nil {
			err = errors.Join(err, werr)
		}
		writeSummary(stdout, results)
	}()
	for _, topo := range opt.topologies {
		rs, err := runTopology(ctx, opt, topo, sa, bb, stdout, stderr)
		results = append(results, rs...)
		if err != nil {
			return fmt.Errorf("%s: %w", topo, err)
		}
	}
	return nil
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
	if opt.prime > 0 {
		if err := c.prime(ctx, opt, topo, stderr); err != nil {
			return nil, err
		}
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
		if err := writeJSON(filepath.Join(opt.out, fmt.Sprintf("%s-%s-r%d.json", topo, cfg.Name, round)), res); err != nil {
			return err
		}
		writeConnectLine(stdout, res)
		if !load.Sleep(ctx, opt.pause+3*time.Second) { // the disconnects applied
			return ctx.Err()
		}
	}
	return nil
}

// cluster is the Shoal processes of one topology: a session service, a
// router and one or two gateways.
type cluster struct {
	procs []*proc        // in start order
	gws   []*proc        // the gateways among procs
	named []load.Process // every process measured, the backbone's too
}

// start starts the session service and the router, waits for them, then
// the gateways.
func (c *cluster) start(ctx context.Context, topo string, sa shoalArgs, bb *backbone, stderr io.Writer) error {
	start := func(role, name string) (*proc, error) {
		p, err := startShoal(sa, role, name)
		if err != nil {
			return nil, err
		}
		c.procs = append(c.procs, p)
		return p, nil
	}
	fmt.Fprintf(stderr, "%s: starting shoal session, router and gateways\n", topo)
	began := time.Now()
	session, err := start("session", "session")
	if err != nil {
		return err
	}
	router, err := start("router", "router")
	if err != nil {
		return err
	}
	for _, p := range []*proc{session, router} {
		if err := p.waitReady(ctx); err != nil {
			return err
		}
	}
	n := 1
	if topo == topoTwo {
		n = 2
	}
	for i := range n {
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
	for _, gw := range c.gws {
		c.named = append(c.named, load.Process{Name: gw.name, PID: gw.pid()})
	}
	c.named = append(c.named,
		load.Process{Name: router.name, PID: router.pid()},
		load.Process{Name: session.name, PID: session.pid()},
		load.Process{Name: "kafka", PID: bb.kafka.PID()},
		load.Process{Name: "cassandra", PID: bb.cql.PID()})
	return nil
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

// addrs points cfg's publishers at the first gateway and its subscribers
// at the second, when there is one.
func (c *cluster) addrs(cfg *load.Config) {
	cfg.Addr = c.gws[0].mqtt
	if len(c.gws) > 1 {
		cfg.SubscriberAddr = c.gws[1].mqtt
	}
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
	if werr := writeJSON(filepath.Join(opt.out, fmt.Sprintf("%s-latency-qos%d-r%d.json", topo, q, round)), res); werr != nil {
		return res, werr
	}
	writeRunLine(stdout, res)
	return res, nil
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
