package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/shoal-mqtt/shoal/bench/load"
)

// The fleet hold (-unit-hold N): N devices connect across -hold-gateways
// gateways, each with a persistent session and one subscription of its
// own (its commands' topic), and stay connected and idle, pinging every
// keepalive, as a fleet between its messages does. Measured: each kind of
// process's memory per device (RSS growth, and the live heap of the
// roles), the kernel's TCP memory per connection, and the CPU each kind
// spends per device and second held, beyond its idle. The devices are
// split over one generator process per gateway, each a child of this
// command (-hold-child), so that none needs more descriptors than the
// machine's limit for one process.

// holdFile is bench/fleet-hold.json.
type holdFile struct {
	runHeader
	Connections int `json:"connections"`
	Gateways    int `json:"gateways"`
	// FDLimit is the open files one process may have here: why the
	// devices are split over generator processes.
	FDLimit    uint64  `json:"fd_limit"`
	KeepAliveS int     `json:"keepalive_s"`
	Connected  int     `json:"connected"`
	Failed     int     `json:"failed"`
	Subscribed int     `json:"subscribed"`
	SetupS     float64 `json:"setup_s"`
	HoldS      float64 `json:"hold_s"`
	// RSS is each kind of process's RSS growth per device held (the
	// processes of a kind summed), from the idle topology to the hold.
	RSS map[string]float64 `json:"rss_bytes_per_connection"`
	// Heap is each role's live heap growth per device, after a forced
	// collection.
	Heap map[string]float64 `json:"heap_live_bytes_per_connection"`
	// KernelTCP is the growth of the kernel's memory per connection, both
	// of its ends (the generator's and the gateway's sockets are in the
	// one kernel): its slab caches (the sockets, their files and epoll
	// entries) and the TCP buffers' pages (sockstat's mem).
	KernelTCP float64 `json:"kernel_tcp_bytes_per_connection"`
	// IdleCPU is each kind's CPU per device and second held, less its
	// rate before the devices came.
	IdleCPU map[string]float64 `json:"cpu_us_per_connection_second"`
	// AliveAtEnd is the connections still up when the hold ended.
	AliveAtEnd int `json:"alive_at_end"`
	// Scale is, with -hold-scale, a second session service started and
	// stopped while the devices are held, under persistent QoS 1 pairs.
	Scale []index `json:"scale,omitempty"`
}

// holdScaleRate is the persistent QoS 1 pairs' rate while a session
// service joins and leaves: every message goes through a session's inbox.
const holdScaleRate = 2000

// holdChildFlag is the flag a generator child is started with: its
// gateway's address, its devices, their identifiers' prefix and their
// keepalive, comma-separated.
const holdChildFlag = "hold-child"

// holdSettle is the wait after the last SUBACK before the memory is read:
// the session rows and subscriptions written, the collectors run.
const holdSettle = 5 * time.Second

// hold runs the fleet hold on a topology of opt.holdGateways gateways,
// started in place of the one given.
func (c *cluster) hold(ctx context.Context, opt options, topo string, bb *backbone, stdout, stderr io.Writer) ([]*load.Result, error) {
	sa := c.sa
	if err := c.stop(); err != nil {
		return nil, err
	}
	*c = cluster{}
	l := topoLayout(topo)
	l.gateways = opt.holdGateways
	if err := c.startLayout(ctx, topo, l, sa, bb, stderr); err != nil {
		return nil, err
	}
	m, err := newUnitMeter(bb, c.named, c.procs)
	if err != nil {
		return nil, err
	}
	meta := machineInfo(opt)
	f := holdFile{runHeader: meta.header(bb),
		Connections: opt.holdClients,
		Gateways:    len(c.gws), KeepAliveS: int(opt.holdKeepAlive / time.Second)}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil {
		f.FDLimit = lim.Cur
	}
	fmt.Fprintf(stderr, "hold: idle for %s\n", opt.unitIdle)
	_, s1, idle, err := m.idleWindow(ctx, opt.unitIdle)
	if err != nil {
		return nil, err
	}
	heap0, err := m.liveHeap(ctx)
	if err != nil {
		return nil, err
	}
	tcp0, err := kernelTCPBytes()
	if err != nil {
		return nil, err
	}

	kids, err := c.startHoldChildren(opt, stderr)
	defer func() {
		for _, k := range kids {
			k.kill()
		}
	}()
	if err != nil {
		return nil, err
	}
	began := time.Now()
	for _, k := range kids {
		if err := k.awaitHeld(ctx, opt.holdSetup); err != nil {
			return nil, err
		}
	}
	f.SetupS = time.Since(began).Seconds()
	fmt.Fprintf(stderr, "hold: %d devices up and subscribed after %.1f s\n", opt.holdClients, f.SetupS)
	if !load.Sleep(ctx, holdSettle) {
		return nil, ctx.Err()
	}
	heap1, err := m.liveHeap(ctx)
	if err != nil {
		return nil, err
	}
	tcp1, err := kernelTCPBytes()
	if err != nil {
		return nil, err
	}
	h0, err := m.sample(ctx)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "hold: holding for %s\n", opt.holdWindow)
	if !load.Sleep(ctx, opt.holdWindow) {
		return nil, ctx.Err()
	}
	h1, err := m.sample(ctx)
	if err != nil {
		return nil, err
	}
	f.HoldS = h1.at.Sub(h0.at).Seconds()
	n := float64(opt.holdClients)
	f.RSS, f.Heap, f.IdleCPU = map[string]float64{}, map[string]float64{}, map[string]float64{}
	for name, rss := range h0.rss {
		f.RSS[roleKind(name)] += (float64(rss) - float64(s1.rss[name])) / n
	}
	for name, v := range heap1 {
		f.Heap[roleKind(name)] += (float64(v) - float64(heap0[name])) / n
	}
	f.KernelTCP = float64(tcp1-tcp0) / n
	for name, cpu := range h1.cpu {
		rate := (cpu - h0.cpu[name]).Seconds() / f.HoldS
		f.IdleCPU[roleKind(name)] += (rate - idle[name]) * 1e6 / n
	}

	var results []*load.Result
	if opt.holdScale {
		persistent := func(cfg *load.Config) {
			cfg.QoS, cfg.Rate, cfg.SessionExpiry = 1, holdScaleRate, 10*time.Minute
		}
		phases, rs, err := c.scaleRole(ctx, opt, topo, "session", "session-2", persistent, stdout, stderr)
		results = append(results, rs...)
		if err != nil {
			return results, err
		}
		f.Scale = phases
	}
	for _, k := range kids {
		res, err := k.finish(ctx)
		if err != nil {
			return results, err
		}
		results = append(results, res)
		if cs := res.Connect; cs != nil {
			f.Connected += cs.Connected
			f.Failed += cs.Failed
			f.Subscribed += cs.Subscribed
			f.AliveAtEnd += cs.AliveAtEnd
		}
	}
	fmt.Fprintf(stdout, "hold: %d devices on %d gateways (%d failed); per device: RSS %s B; live heap %s B; kernel %.0f B (both ends); CPU-µs per device-second %s\n",
		f.Connected, f.Gateways, f.Failed, cpuList(f.RSS, 0), cpuList(f.Heap, 0), f.KernelTCP, cpuList(f.IdleCPU, 3))
	if f.Failed > 0 || f.Connected != opt.holdClients || f.Subscribed != opt.holdClients {
		return results, fmt.Errorf("hold: %d of %d connected, %d subscribed, %d failed", f.Connected, opt.holdClients, f.Subscribed, f.Failed)
	}
	return results, writeCeiling(opt, opt.holdOut, "fleet hold", f, holdReadme(f), stderr)
}

// kernelTCPBytes is the kernel memory that sockets take: its slab
// caches (/proc/meminfo's Slab) and the TCP buffers (/proc/net/sockstat's
// mem, in pages), in bytes.
func kernelTCPBytes() (int64, error) {
	slab, err := meminfoBytes("Slab")
	if err != nil {
		return 0, err
	}
	buffers, err := tcpBufferBytes()
	return slab + buffers, err
}

// meminfoBytes is one line of /proc/meminfo, in bytes.
func meminfoBytes(name string) (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		rest, ok := strings.CutPrefix(line, name+":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("meminfo %s: %w", name, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("meminfo: no %s", name)
}

// tcpBufferBytes is sockstat's TCP mem, in bytes.
func tcpBufferBytes() (int64, error) {
	b, err := os.ReadFile("/proc/net/sockstat")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		rest, ok := strings.CutPrefix(line, "TCP:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		for i := 0; i+1 < len(fields); i += 2 {
			if fields[i] == "mem" {
				pages, err := strconv.ParseInt(fields[i+1], 10, 64)
				if err != nil {
					return 0, fmt.Errorf("sockstat: %w", err)
				}
				return pages * int64(os.Getpagesize()), nil
			}
		}
	}
	return 0, errors.New("sockstat: no TCP mem")
}

// holdChild is a generator child process and what it tells its parent.
type holdChild struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines *bufio.Scanner
	done  chan error
}

// startHoldChildren starts one generator per gateway, the devices split
// evenly.
func (c *cluster) startHoldChildren(opt options, stderr io.Writer) ([]*holdChild, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var kids []*holdChild
	for i, gw := range c.gws {
		n := opt.holdClients / len(c.gws)
		if i < opt.holdClients%len(c.gws) {
			n++
		}
		spec := fmt.Sprintf("%s,%d,bench-h%d,%d", gw.mqtt, n, i, int(opt.holdKeepAlive/time.Second))
		cmd := exec.Command(self, "-"+holdChildFlag, spec)
		cmd.Stderr = stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			return kids, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return kids, err
		}
		if err := cmd.Start(); err != nil {
			return kids, fmt.Errorf("hold: start a generator: %w", err)
		}
		k := &holdChild{name: fmt.Sprintf("generator-%d", i+1), cmd: cmd, stdin: in, lines: bufio.NewScanner(out), done: make(chan error, 1)}
		k.lines.Buffer(make([]byte, 64<<10), 16<<20)
		kids = append(kids, k)
	}
	return kids, nil
}

// awaitHeld waits for the child's "held" line: every device connected and
// subscribed.
func (k *holdChild) awaitHeld(ctx context.Context, bound time.Duration) error {
	got := make(chan error, 1)
	go func() {
		for k.lines.Scan() {
			if k.lines.Text() == "held" {
				got <- nil
				return
			}
		}
		got <- fmt.Errorf("hold: %s ended before its devices were up: %w", k.name, errors.Join(k.lines.Err(), io.ErrUnexpectedEOF))
	}()
	select {
	case err := <-got:
		return err
	case <-time.After(bound):
		return fmt.Errorf("hold: %s not up within %s", k.name, bound)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// finish lets the child end its run (its devices disconnect and end their
// sessions) and reads its result, the last line it writes.
func (k *holdChild) finish(ctx context.Context) (*load.Result, error) {
	if _, err := io.WriteString(k.stdin, "go\n"); err != nil {
		return nil, fmt.Errorf("hold: %s: %w", k.name, err)
	}
	var last string
	for k.lines.Scan() {
		last = k.lines.Text()
	}
	if err := k.cmd.Wait(); err != nil {
		return nil, fmt.Errorf("hold: %s: %w", k.name, err)
	}
	k.cmd = nil
	var res load.Result
	if err := json.Unmarshal([]byte(last), &res); err != nil {
		return nil, fmt.Errorf("hold: %s's result: %w", k.name, err)
	}
	return &res, ctx.Err()
}

// kill ends a child that did not finish.
func (k *holdChild) kill() {
	if k.cmd != nil && k.cmd.Process != nil {
		_ = k.cmd.Process.Kill()
		_ = k.cmd.Wait()
	}
}

// runHoldChild is a generator child: spec is its gateway's address, its
// devices, their prefix and keepalive. It writes "held" when every device
// is connected and subscribed, waits for a line on stdin, ends the run
// and writes its result as one line of JSON.
func runHoldChild(ctx context.Context, spec string, stdin io.Reader, stdout, stderr io.Writer) error {
	parts := strings.Split(spec, ",")
	if len(parts) != 4 {
		return fmt.Errorf("%s: %q (want ADDR,DEVICES,PREFIX,KEEPALIVE)", holdChildFlag, spec)
	}
	n, err1 := strconv.Atoi(parts[1])
	ka, err2 := strconv.Atoi(parts[3])
	if err := errors.Join(err1, err2); err != nil || n < 1 || ka < 1 {
		return fmt.Errorf("%s: %q: devices and keepalive must be counts ≥ 1", holdChildFlag, spec)
	}
	cfg := load.DefaultConfig()
	cfg.Addr, cfg.Prefix, cfg.Clients = parts[0], parts[2], n
	cfg.Scenario, cfg.Subscriptions, cfg.QoS = load.ScenarioConnections, 1, 1
	cfg.SessionExpiry, cfg.KeepAlive = time.Hour, time.Duration(ka)*time.Second
	cfg.Warmup, cfg.Duration = time.Second, time.Second
	cfg.SetupTimeout = 10 * time.Minute
	cfg.Name, cfg.Label, cfg.Round = "hold", "hold", 1
	lines := bufio.NewScanner(stdin)
	cfg.OnStage = func(stage string) {
		if stage != "hold" {
			return
		}
		fmt.Fprintln(stdout, "held")
		lines.Scan() // the parent measured the hold
	}
	res, err := load.Run(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", b)
	return err
}

// holdReadme is the README of the fleet hold's results.
func holdReadme(f holdFile) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Fleet hold: %d idle devices on %d gateways (%s)\n\n```\n%s\n```\n\n", f.Connections, f.Gateways, f.Date[:10], f.Command)
	fmt.Fprintf(&b, "- Machine: %s, %d cores; Kafka %s, Cassandra %s, one node each; Shoal `%s`, one session service, one router, %d gateways, %d partitions per event topic; the generators (one process per gateway: %d open files at most per process here) on the same cores.\n",
		f.CPU, f.Cores, f.Kafka, f.Cassandra, f.Commit, f.Gateways, f.Partitions, f.FDLimit)
	fmt.Fprintf(&b, "- Each device: MQTT 5.0, a persistent session (expiry 1 h), one QoS 1 subscription of its own, keepalive %d s (a PINGREQ every %d s). %d connected and subscribed in %.1f s, %d failed, %d still up when the hold of %.0f s ended.\n\n",
		f.KeepAliveS, f.KeepAliveS/2, f.Connected, f.SetupS, f.Failed, f.AliveAtEnd, f.HoldS)
	fmt.Fprintln(&b, "| per device | gateway | session | router | kafka | cassandra |")
	fmt.Fprintln(&b, "|---|---:|---:|---:|---:|---:|")
	row := func(what string, m map[string]float64, prec int) {
		fmt.Fprintf(&b, "| %s |", what)
		for _, k := range []string{"gateway", "session", "router", "kafka", "cassandra"} {
			if v, ok := m[k]; ok {
				fmt.Fprintf(&b, " %.*f |", prec, v)
			} else {
				b.WriteString(" |")
			}
		}
		b.WriteString("\n")
	}
	row("RSS growth, bytes", f.RSS, 0)
	row("live heap growth, bytes", f.Heap, 0)
	row("CPU-µs per second held", f.IdleCPU, 3)
	fmt.Fprintf(&b, "\nThe kernel's memory for sockets (slab caches and TCP buffers) grew %.0f B per connection, both ends together.\n", f.KernelTCP)
	if len(f.Scale) > 0 {
		fmt.Fprintf(&b, "\nElasticity: with the devices held, 50 pairs of persistent sessions at %d msg/s QoS 1 (every message through an inbox); %s into a window of %s a second session service starts (scale-out), then stops (scale-in: SIGTERM). The longest latency is the pause of the partitions that moved while their new owner loaded their sessions.\n\n", holdScaleRate, scaleEventAfter, scaleWindow)
		fmt.Fprintln(&b, "| phase | start or stop | messages | p50 / p99 / p99.9 / max ms | lost |")
		fmt.Fprintln(&b, "|---|---:|---:|---:|---:|")
		for _, p := range f.Scale {
			fmt.Fprintf(&b, "| %s | %.1f s | %d | %.2f / %.1f / %.1f / %.1f | %d |\n", p.Name, p.EventSeconds, p.Messages, p.P50Ms, p.P99Ms, p.P999Ms, p.MaxMs, p.Lost)
		}
	}
	return b.String()
}
