package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/shoal-mqtt/shoal/bench/load"
)

// The connect storms (-unit-storm N): N clients connect to the first of two
// gateways all at once, with persistent sessions; the gateway is killed
// (SIGKILL) while they are connected, and all N connect again at once to
// the second gateway, resuming their sessions. Measured with each count of
// session services of -storm-sessions: connects/s, CONNECT-to-CONNACK
// latency, the sessions found present, and the session services' CPU.

// stormFile is bench/connect-storm.json.
type stormFile struct {
	runHeader
	Clients int     `json:"clients"`
	Storms  []storm `json:"storms"`
}

// storm is one wave of connects.
type storm struct {
	// Sessions is the count of session services; Wave is "new" (sessions
	// new to the broker) or "resume" (the same clients after their gateway
	// was killed, Clean Start 0).
	Sessions       int     `json:"session_services"`
	Wave           string  `json:"wave"`
	Connected      int     `json:"connected"`
	Failed         int     `json:"failed"`
	SessionPresent int     `json:"session_present"`
	Seconds        float64 `json:"seconds"`
	PerSec         float64 `json:"connects_per_s"`
	P50Ms          float64 `json:"connack_p50_ms"`
	P99Ms          float64 `json:"connack_p99_ms"`
	MaxMs          float64 `json:"connack_max_ms"`
	// CPUMicros is each kind of process's CPU (all of a kind together)
	// from the wave's first CONNECT to the start of its hold, per connect.
	CPUMicros map[string]float64 `json:"cpu_us_per_connect"`
}

// stormHold is how long the first wave's connections stay up before their
// gateway is killed, after its warm-up.
const stormHold = time.Second

// storms runs the storms on the started topology (two gateways), then
// again on a new one of each further count of session services.
func (c *cluster) storms(ctx context.Context, opt options, topo string, bb *backbone, stdout, stderr io.Writer) ([]*load.Result, error) {
	meta := machineInfo(opt)
	f := stormFile{runHeader: meta.header(bb),
		Clients: opt.stormClients}
	var results []*load.Result
	for i, k := range opt.stormSessions {
		if i > 0 || topoLayout(topo).sessions != k {
			sa := c.sa
			if err := c.stop(); err != nil {
				return results, err
			}
			*c = cluster{}
			l := topoLayout(topo)
			l.sessions = k
			if err := c.startLayout(ctx, topo, l, sa, bb, stderr); err != nil {
				return results, err
			}
		}
		if len(c.gws) < 2 {
			return results, errors.New("the connect storms need two gateways (-topologies two-gateways)")
		}
		rs, ws, err := c.stormWaves(ctx, opt, k, stdout, stderr)
		results = append(results, rs...)
		f.Storms = append(f.Storms, ws...)
		if err != nil {
			return results, err
		}
	}
	return results, writeCeiling(opt, opt.stormOut, "connect storms", f, stormReadme(f), stderr)
}

// stormWaves runs the two waves with k session services: new sessions on
// the first gateway, which is killed while they are up, then the same
// clients resuming on the second.
func (c *cluster) stormWaves(ctx context.Context, opt options, k int, stdout, stderr io.Writer) ([]*load.Result, []storm, error) {
	var results []*load.Result
	var waves []storm
	first, second := c.gws[0], c.gws[1]
	wave := func(name, addr string, resume bool, onHold func(time.Duration)) error {
		cfg := load.DefaultConfig()
		cfg.Scenario, cfg.Clients = load.ScenarioConnections, opt.stormClients
		cfg.ConnectConcurrency = opt.stormClients // all at once
		cfg.SessionExpiry, cfg.Resume, cfg.KeepSessions = time.Hour, resume, !resume
		cfg.Warmup, cfg.Duration = 2*time.Second, stormHold
		cfg.SetupTimeout = 10 * time.Minute
		cfg.Prefix, cfg.Name, cfg.Label, cfg.Round = fmt.Sprintf("bench-st%d", k), fmt.Sprintf("storm-%d-%s", k, name), "storm", 1
		cfg.Addr = addr
		cpu, err := c.sampler()
		if err != nil {
			return err
		}
		var used map[string]time.Duration
		cfg.OnMeasure = func(d time.Duration) {
			used = cpu.since() // before the hold, and before a kill
			if onHold != nil {
				onHold(d)
			}
		}
		fmt.Fprintf(stderr, "storm: %d session service(s), %s: %d clients at once\n", k, name, cfg.Clients)
		res, err := load.Run(ctx, cfg, stderr)
		if err != nil {
			return fmt.Errorf("storm %s: %w", name, err)
		}
		results = append(results, res)
		cs := res.Connect
		if cs == nil {
			return fmt.Errorf("storm %s: no connect figures", name)
		}
		w := storm{Sessions: k, Wave: name, Connected: cs.Connected, Failed: cs.Failed, SessionPresent: cs.SessionPresent,
			Seconds: cs.Seconds, PerSec: cs.PerSec}
		if l := cs.Latency; l != nil {
			w.P50Ms, w.P99Ms, w.MaxMs = l.P50/1000, l.P99/1000, l.Max/1000
		}
		if cs.Connected > 0 && used != nil {
			// The CPU from the wave's start to the hold's: the settle
			// adds the idle CPU of its two seconds.
			w.CPUMicros = map[string]float64{}
			for kind, d := range used {
				w.CPUMicros[kind] = d.Seconds() * 1e6 / float64(cs.Connected)
			}
		}
		waves = append(waves, w)
		fmt.Fprintf(stdout, "storm, %d session service(s), %s: %d of %d connected in %.2f s (%.0f/s), %d sessions present, CONNACK p50 %.1f ms, p99 %.1f ms, max %.1f ms; CPU-µs per connect: %s\n",
			k, name, w.Connected, cfg.Clients, w.Seconds, w.PerSec, w.SessionPresent, w.P50Ms, w.P99Ms, w.MaxMs, cpuList(w.CPUMicros, 0))
		return nil
	}
	kill := func(time.Duration) {
		fmt.Fprintf(stderr, "storm: killing %s\n", first.name)
		if err := c.kill(first); err != nil {
			fmt.Fprintf(stderr, "storm: %v\n", err)
		}
	}
	if err := wave("new", first.mqtt, false, kill); err != nil {
		return results, waves, err
	}
	if first.alive() == nil {
		return results, waves, fmt.Errorf("storm: %s still runs after the first wave", first.name)
	}
	if err := wave("resume", second.mqtt, true, nil); err != nil {
		return results, waves, err
	}
	return results, waves, nil
}

// kill kills p (SIGKILL), waits for it and takes it out of the cluster,
// whose stop would report it.
func (c *cluster) kill(p *proc) error {
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill %s: %w", p.name, err)
	}
	<-p.done
	drop := func(ps []*proc) []*proc {
		out := ps[:0]
		for _, q := range ps {
			if q != p {
				out = append(out, q)
			}
		}
		return out
	}
	c.procs, c.gws = drop(c.procs), drop(c.gws)
	return nil
}

// cpuSampler reads the CPU of processes since it was made.
type cpuSampler struct {
	names []string
	procs []*load.Proc
	start []time.Duration
}

// sampler samples the CPU of every process measured: the cluster's and
// the backbone's JVMs.
func (c *cluster) sampler() (*cpuSampler, error) {
	s := &cpuSampler{}
	for _, p := range c.named {
		pr, err := load.NewProc(p.PID)
		if err != nil {
			continue // a process killed since the cluster started
		}
		ps, err := pr.Sample()
		if err != nil {
			continue
		}
		s.names, s.procs, s.start = append(s.names, p.Name), append(s.procs, pr), append(s.start, ps.CPU)
	}
	if len(s.procs) == 0 {
		return nil, errors.New("no process to sample")
	}
	return s, nil
}

// since is the CPU each process used since the sampler was made, by its
// kind (roleKind: gateway, session, router, kafka, cassandra); a process
// that exited meanwhile is left out.
func (s *cpuSampler) since() map[string]time.Duration {
	out := map[string]time.Duration{}
	for i, p := range s.procs {
		ps, err := p.Sample()
		if err != nil {
			continue
		}
		out[roleKind(s.names[i])] += ps.CPU - s.start[i]
	}
	return out
}

// roleKind is the kind of a process name: its name up to a "-" and a
// number (gateway-2: gateway).
func roleKind(name string) string {
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			return name[:i]
		}
	}
	return name
}

// stormReadme is the README of the connect storms' results.
func stormReadme(f stormFile) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Connect storms of %d clients (%s)\n\n```\n%s\n```\n\n", f.Clients, f.Date[:10], f.Command)
	fmt.Fprintf(&b, "- Machine: %s, %d cores; Kafka %s, Cassandra %s, one node each; Shoal `%s`, one router, two gateways, %d partitions per event topic; everything, the generator too, on the same cores.\n", f.CPU, f.Cores, f.Kafka, f.Cassandra, f.Commit, f.Partitions)
	fmt.Fprintf(&b, "- new: %d clients connect at once to gateway-1 with persistent sessions (MQTT 5.0, session expiry 1 h); 3 s later gateway-1 is killed (SIGKILL). resume: the same clients connect at once to gateway-2 with Clean Start 0. The CPU of each kind of process (all of a kind together) is from the wave's first CONNECT to the start of its hold, 2 s after its last CONNACK (the idle CPU of that time included), per connect.\n\n", f.Clients)
	fmt.Fprintln(&b, "| session services | wave | connected | failed | sessions present | seconds | connects/s | CONNACK p50 / p99 / max ms | CPU-µs per connect |")
	fmt.Fprintln(&b, "|---:|---|---:|---:|---:|---:|---:|---:|---|")
	for _, s := range f.Storms {
		fmt.Fprintf(&b, "| %d | %s | %d | %d | %d | %.2f | %.0f | %.1f / %.1f / %.1f | %s |\n", s.Sessions, s.Wave, s.Connected, s.Failed,
			s.SessionPresent, s.Seconds, s.PerSec, s.P50Ms, s.P99Ms, s.MaxMs, cpuList(s.CPUMicros, 0))
	}
	return b.String()
}

// cpuKinds orders the kinds of process in a list of CPU figures.
var cpuKinds = []string{"gateway", "session", "router", "kafka", "cassandra"}

// cpuList is "gateway 120, session 30, …": each kind's figure of m, in
// the order of cpuKinds, with prec decimals.
func cpuList(m map[string]float64, prec int) string {
	var parts []string
	for _, k := range cpuKinds {
		if v, ok := m[k]; ok {
			parts = append(parts, fmt.Sprintf("%s %.*f", k, prec, v))
		}
	}
	return strings.Join(parts, ", ")
}
