package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shoal-mqtt/shoal/bench/load"
	"github.com/shoal-mqtt/shoal/internal/localserver/realcql"
	"github.com/shoal-mqtt/shoal/internal/localserver/realkafka"
	"github.com/shoal-mqtt/shoal/internal/localserver/serverproc"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

// distPartitions is the partition count of the event topics in the
// distributed part, as shoal-distbench runs it.
const distPartitions = 16

// distYAML is every role's configuration in the distributed part; the
// bridge's adds the mapping.
const distYAML = `log_level: info
cql:
  replication_factor: 1
`

// distributedRun is the distributed part's result.
type distributedRun struct {
	Kafka     string       `json:"kafka"`
	Cassandra string       `json:"cassandra"`
	PrimeSec  float64      `json:"prime_s"`
	Runs      []latencyRun `json:"runs"`
}

// runDistributed measures MQTT to Kafka on a real Kafka and Cassandra
// (started as shoal-distbench starts them: internal/localserver) with
// Shoal's roles as separate processes and a `shoal bridge`: one gateway,
// a session service, a router and the bridge, a read_committed kcat on
// the bridged topic. An unrecorded run first warms the JVMs.
func runDistributed(ctx context.Context, h *harness, opt options, clk *clock, stdout io.Writer) (res *distributedRun, err error) {
	fmt.Fprintln(h.stderr, "distributed: starting kafka and cassandra (jars fetched once into the cache)")
	work := filepath.Join(h.work, "dist")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, fmt.Errorf("distributed: %w", err)
	}
	// Kafka's log is long and says little about Shoal: it stays in the
	// work directory (-keep keeps it), as shoal-distbench's does.
	klog, err := os.Create(filepath.Join(work, "kafka.log"))
	if err != nil {
		return nil, fmt.Errorf("distributed: %w", err)
	}
	defer func() { _ = klog.Close() }() // the broker's output; nothing to report
	var kc *realkafka.Cluster
	var cq *realcql.Node
	var kerr, cerr error
	var wg sync.WaitGroup
	wg.Go(func() {
		kc, kerr = realkafka.StartWith(ctx, filepath.Join(work, "kafka"), klog, realkafka.Options{FullJIT: true})
	})
	wg.Go(func() {
		cq, cerr = realcql.StartWith(ctx, filepath.Join(work, "cassandra"), nil, realcql.Options{FullJIT: true})
	})
	wg.Wait()
	defer func() {
		if kc != nil {
			err = errors.Join(err, kc.Kill())
		}
		if cq != nil {
			err = errors.Join(err, cq.Kill())
		}
	}()
	if err := errors.Join(kerr, cerr); err != nil {
		return nil, fmt.Errorf("distributed: %w", err)
	}
	res = &distributedRun{Kafka: realkafka.Version, Cassandra: cq.ReleaseVersion(), PrimeSec: opt.prime.Seconds()}

	cfg := filepath.Join(work, "shoal.yaml")
	bcfg := filepath.Join(work, "bridge.yaml")
	if err := errors.Join(os.WriteFile(cfg, []byte(distYAML), 0o600),
		os.WriteFile(bcfg, []byte(distYAML+strings.TrimPrefix(outYAML, "log_level: info\n")), 0o600)); err != nil {
		return nil, fmt.Errorf("distributed: %w", err)
	}
	common := []string{"--kafka-brokers", strings.Join(kc.Brokers(), ","), "--kafka-partitions", strconv.Itoa(distPartitions),
		"--cql-hosts", strings.Join(cq.Hosts(), ","), "--cql-keyspace", "shoal_bridgebench"}
	var procs []*proc
	defer func() {
		for _, p := range slices.Backward(procs) {
			err = errors.Join(err, p.stop())
		}
	}()
	role := func(name, config string, extra ...string) (*proc, string, error) {
		addr, err := serverproc.FreeAddr()
		if err != nil {
			return nil, "", err
		}
		args := append([]string{name, "--config", config, "--http-listen", addr}, common...)
		p, err := h.start("dist-"+name, nil, nil, h.shoal, append(args, extra...)...)
		if err != nil {
			return nil, "", err
		}
		procs = append(procs, p)
		return p, addr, nil
	}
	fmt.Fprintln(h.stderr, "distributed: starting shoal session, router, gateway and bridge")
	session, shttp, err := role("session", cfg)
	if err != nil {
		return res, err
	}
	router, rhttp, err := role("router", cfg)
	if err != nil {
		return res, err
	}
	for p, addr := range map[*proc]string{session: shttp, router: rhttp} {
		if err := p.waitHTTP(ctx, "http://"+addr+"/readyz"); err != nil {
			return res, err
		}
	}
	mqtt, err := serverproc.FreeAddr()
	if err != nil {
		return res, err
	}
	gw, ghttp, err := role("gateway", cfg, "--mqtt-listen", mqtt, "--ws-listen", "", "--gateway-id", "gateway-1", "--gateway-slot", "-1")
	if err != nil {
		return res, err
	}
	br, bhttp, err := role("bridge", bcfg)
	if err != nil {
		return res, err
	}
	for p, addr := range map[*proc]string{gw: ghttp, br: bhttp} {
		if err := p.waitHTTP(ctx, "http://"+addr+"/readyz"); err != nil {
			return res, err
		}
	}
	b := &broker{proc: gw, mqtt: mqtt, kafka: kc.Brokers()[0]}
	log := &recvLog{}
	tail, err := h.tailTopic(ctx, b, "dist-kcat", bridgedTopic, opt.fetchWait, clk, log)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, tail.close()) }()
	named := map[string]int{"gateway": gw.pid(), "router": router.pid(), "session": session.pid(), "bridge": br.pid(),
		"kafka": kc.PID(), "cassandra": cq.PID(), "kcat": tail.pid()}

	if opt.prime > 0 {
		fmt.Fprintf(h.stderr, "distributed: priming for %s (not recorded)\n", opt.prime)
		po := opt
		po.warmup, po.outDuration = 0, opt.prime
		if _, err := measureOut(ctx, po, clk, outTarget{mqtt: mqtt, log: log, kcat: tail, name: "dprime", procs: named}, 0); err != nil {
			return res, fmt.Errorf("distributed: prime: %w", err)
		}
	}
	for i, q := range []packet.QoS{0, 1} {
		fmt.Fprintf(h.stderr, "distributed: QoS %d, %.0f msg/s for %s\n", q, opt.outRate, opt.outDuration)
		for _, p := range procs {
			if err := p.alive(); err != nil {
				return res, err
			}
		}
		jit := startJIT(map[string]int{"kafka": kc.PID(), "cassandra": cq.PID()})
		r, err := measureOut(ctx, opt, clk, outTarget{mqtt: mqtt, log: log, kcat: tail, name: fmt.Sprintf("d%d", q),
			base: 100 * (i + 1), procs: named}, q)
		if err != nil {
			return res, fmt.Errorf("distributed qos %d: %w", q, err)
		}
		r.JITPercent = jit.percent()
		r.Part = partDistributed
		writeLatencyLine(stdout, r)
		res.Runs = append(res.Runs, r)
		if !load.Sleep(ctx, 2*time.Second) {
			return res, ctx.Err()
		}
	}
	return res, nil
}

// jitWatch reads the CPU time of JVMs' JIT compiler threads at a start.
type jitWatch struct {
	began time.Time
	procs map[string]*load.Proc
	at    map[string]time.Duration
}

// startJIT starts watching the JVMs of pids (by name); one that cannot be
// read is left out.
func startJIT(pids map[string]int) *jitWatch {
	w := &jitWatch{began: time.Now(), procs: map[string]*load.Proc{}, at: map[string]time.Duration{}}
	for name, pid := range pids {
		p, err := load.NewProc(pid)
		if err != nil {
			continue
		}
		d, err := p.ThreadsCPU(load.JITCompiler)
		if err != nil {
			continue
		}
		w.procs[name], w.at[name] = p, d
	}
	return w
}

// percent is each JVM's JIT compiling since the start, in % of one core.
func (w *jitWatch) percent() map[string]float64 {
	out := map[string]float64{}
	el := time.Since(w.began).Seconds()
	for name, p := range w.procs {
		if d, err := p.ThreadsCPU(load.JITCompiler); err == nil && el > 0 {
			out[name] = 100 * (d - w.at[name]).Seconds() / el
		}
	}
	return out
}
