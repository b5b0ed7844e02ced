package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shoal-mqtt/shoal/bench/load"
	"github.com/shoal-mqtt/shoal/internal/localserver/realcql"
	"github.com/shoal-mqtt/shoal/internal/localserver/realkafka"
	"github.com/shoal-mqtt/shoal/internal/localserver/serverproc"
)

// Bounds of the waits for processes.
const (
	// readyTimeout bounds a Shoal process's start until /readyz answers.
	readyTimeout = 2 * time.Minute
	// stopTimeout is how long a Shoal process gets after SIGTERM before
	// SIGKILL.
	stopTimeout = 20 * time.Second
	// tailBytes is how much of a failing process's log an error quotes.
	tailBytes = 2 << 10
)

// keyspace is the CQL keyspace of the views (Cassandra is fresh for every
// invocation).
const keyspace = "shoal_bench"

// defaultShoalConfig is the configuration of every Shoal process unless
// -shoal-config names another: Shoal's defaults, on a one-node Cassandra.
const defaultShoalConfig = `log_level: info
cql:
  replication_factor: 1
`

// clusterNodes is the number of Kafka brokers and of Cassandra nodes of
// the cluster's backbone: topics and the keyspace have as many replicas,
// min.insync.replicas is 2 and the database is read and written at QUORUM,
// so that one node of each may be down.
const clusterNodes = 3

// ringHeapMiB is the heap of each Cassandra node of the cluster's ring:
// three of them beside three Kafka brokers (512 MiB each) and seven Shoal
// processes on one machine.
const ringHeapMiB = 512

// backbone is the Kafka brokers and the Cassandra nodes Shoal runs on:
// one of each, or the cluster's clusterNodes of each.
type backbone struct {
	nodes      int // Kafka brokers, and Cassandra nodes
	brokers    []string
	cqlHosts   []string
	cqlVersion string
	// The JVMs: kafka and cassandra, or kafka-1 … and cassandra-1 ….
	kafka, cassandra []load.Process
	took             time.Duration // from the start until both answered
	// Kafka's and Cassandra's start at once: each sets its own fields.
	killKafka func() error
	killCQL   []func() error
	logs      []*os.File
}

// startBackbone starts Kafka and Cassandra side by side under work, one
// node each (nodes 1) or a cluster of nodes each; their logs stay there
// (kafka.log and cassandra/output.log, or kafka-N.log and
// cassandra-ring/nodeN/output.log). c1Only runs the JVMs
// with the C1 compiler only (faster start, slower run) instead of the full
// JIT.
func startBackbone(ctx context.Context, work string, nodes int, c1Only bool) (*backbone, error) {
	b := &backbone{nodes: nodes}
	began := time.Now()
	logw := make([]io.Writer, nodes)
	for i := range nodes {
		name := "kafka.log"
		if nodes > 1 {
			name = fmt.Sprintf("kafka-%d.log", i+1)
		}
		f, err := os.Create(filepath.Join(work, name))
		if err != nil {
			return nil, errors.Join(fmt.Errorf("start kafka: %w", err), b.stop())
		}
		b.logs = append(b.logs, f)
		logw[i] = f
	}
	var kerr, cerr error
	var wg sync.WaitGroup
	kdir, cdir := filepath.Join(work, "kafka"), filepath.Join(work, "cassandra")
	if nodes > 1 { // beside the one-node backbone's
		kdir, cdir = kdir+"-cluster", cdir+"-ring"
	}
	wg.Go(func() { kerr = b.startKafka(ctx, kdir, logw, c1Only) })
	wg.Go(func() { cerr = b.startCassandra(ctx, cdir, c1Only) })
	wg.Wait()
	if err := errors.Join(kerr, cerr); err != nil {
		return nil, errors.Join(err, b.stop())
	}
	b.took = time.Since(began)
	return b, nil
}

// startKafka starts the brokers and notes how to stop them.
func (b *backbone) startKafka(ctx context.Context, dir string, logw []io.Writer, c1Only bool) error {
	opts := realkafka.Options{FullJIT: !c1Only}
	if b.nodes == 1 {
		k, err := realkafka.StartWith(ctx, dir, logw[0], opts)
		if err != nil {
			return err
		}
		b.brokers, b.killKafka = k.Brokers(), k.Kill
		b.kafka = []load.Process{{Name: "kafka", PID: k.PID()}}
		return nil
	}
	k, err := realkafka.StartNodes(ctx, dir, b.nodes, func(i int) io.Writer { return logw[i] }, opts)
	if err != nil {
		return err
	}
	b.brokers, b.killKafka = k.Brokers(), k.Kill
	for i := range k.Len() {
		b.kafka = append(b.kafka, load.Process{Name: fmt.Sprintf("kafka-%d", i+1), PID: k.Node(i).PID()})
	}
	return nil
}

// startCassandra starts the node or the ring and notes how to stop it.
func (b *backbone) startCassandra(ctx context.Context, dir string, c1Only bool) error {
	if b.nodes == 1 {
		n, err := realcql.StartWith(ctx, dir, nil, realcql.Options{FullJIT: !c1Only})
		if err != nil {
			return err
		}
		b.cqlHosts, b.cqlVersion, b.killCQL = n.Hosts(), n.ReleaseVersion(), []func() error{n.Kill}
		b.cassandra = []load.Process{{Name: "cassandra", PID: n.PID()}}
		return nil
	}
	r, err := realcql.StartRing(ctx, dir, b.nodes, nil, realcql.Options{FullJIT: !c1Only, MaxHeapMiB: ringHeapMiB})
	if err != nil {
		return err
	}
	b.cqlHosts, b.cqlVersion = r.Hosts(), r.Node(0).ReleaseVersion()
	for i := range r.Len() {
		b.cassandra = append(b.cassandra, load.Process{Name: fmt.Sprintf("cassandra-%d", i+1), PID: r.Node(i).PID()})
		b.killCQL = append(b.killCQL, r.Node(i).Kill)
	}
	return nil
}

// procs returns every JVM of the backbone, Kafka's first.
func (b *backbone) procs() []load.Process { return slices.Concat(b.kafka, b.cassandra) }

// stop kills every JVM: their data is thrown away, so there is nothing to
// flush. It is safe to call on a backbone that started only in part, and
// twice.
func (b *backbone) stop() error {
	var errs []error
	if b.killKafka != nil {
		if err := b.killKafka(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, kill := range b.killCQL {
		if err := kill(); err != nil {
			errs = append(errs, err)
		}
	}
	b.killKafka, b.killCQL = nil, nil
	for _, f := range b.logs {
		if err := f.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close kafka log: %w", err))
		}
	}
	b.logs = nil
	return errors.Join(errs...)
}

// replicationArgs are the flags that give Shoal's topics and keyspace a
// replica on every node of a backbone of several: production's settings
// (topics of 3 replicas get min.insync.replicas 2 from Shoal).
func (b *backbone) replicationArgs() []string {
	if b.nodes == 1 {
		return nil // the configuration's, which fits one node
	}
	n := strconv.Itoa(b.nodes)
	return []string{"--kafka-replication-factor", n, "--cql-replication-factor", n}
}

// proc is one Shoal process.
type proc struct {
	name string
	http string // /readyz, /debug/pprof/
	mqtt string // gateways only
	log  string
	cmd  *exec.Cmd
	done chan struct{} // closed when it has exited
	err  error         // cmd.Wait's result, set before done is closed
}

// shoalArgs are what every Shoal process is started with.
type shoalArgs struct {
	bin, config string
	brokers     []string
	cqlHosts    []string
	partitions  int
	pprof       bool
	logDir      string
	extra       []string // appended to every role's flags
}

// startShoal starts `shoal role` as name; a gateway gets an MQTT listener
// and takes a free slot under its name.
func startShoal(a shoalArgs, role, name string) (*proc, error) {
	p := &proc{name: name, done: make(chan struct{})}
	var err error
	if p.http, err = serverproc.FreeAddr(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	args := []string{role, "--config", a.config,
		"--kafka-brokers", strings.Join(a.brokers, ","), "--kafka-partitions", strconv.Itoa(a.partitions),
		"--cql-hosts", strings.Join(a.cqlHosts, ","), "--cql-keyspace", keyspace,
		"--http-listen", p.http, "--pprof", strconv.FormatBool(a.pprof)}
	args = append(args, a.extra...)
	if role == "gateway" {
		if p.mqtt, err = serverproc.FreeAddr(); err != nil {
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
		args = append(args, "--mqtt-listen", p.mqtt, "--ws-listen", "", "--gateway-id", name, "--gateway-slot", "-1")
	}
	p.log = filepath.Join(a.logDir, name+".log")
	f, err := os.Create(p.log) // one process per name and topology per run
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	defer func() { _ = f.Close() }() // the child has its own descriptor
	p.cmd = exec.Command(a.bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	// SIGKILL from the kernel if this command dies without stopping it.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// pid returns the process id.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// waitReady polls /readyz until it answers 200, the process exits, ctx
// ends or readyTimeout passes.
func (p *proc) waitReady(ctx context.Context) error { return waitReadyWithin(ctx, p, readyTimeout) }

// stop sends SIGTERM, then SIGKILL after stopTimeout, and waits. It
// reports a process that had exited on its own or had to be killed.
func (p *proc) stop() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s had exited on its own: %w%s", p.name, p.err, p.tail())
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop %s: %w", p.name, err)
	}
	t := time.NewTimer(stopTimeout)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
	}
	_ = p.cmd.Process.Kill() // it may just have exited
	<-p.done
	return fmt.Errorf("stop %s: still running %s after SIGTERM, killed", p.name, stopTimeout)
}

// alive reports an error if the process has exited.
func (p *proc) alive() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited: %w%s", p.name, p.err, p.tail())
	default:
		return nil
	}
}

// tail returns the end of the process's log, for errors.
func (p *proc) tail() string {
	b, err := os.ReadFile(p.log)
	if err != nil || len(b) == 0 {
		return ""
	}
	if len(b) > tailBytes {
		b = b[len(b)-tailBytes:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return "\n--- end of " + p.log + " ---\n" + string(b)
}

// profile writes a CPU profile of the process over d to path.
func (p *proc) profile(ctx context.Context, d time.Duration, path string) error {
	secs := max(int(d.Round(time.Second)/time.Second), 1)
	ctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
	defer cancel()
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", p.http, secs)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("profile %s: %w", p.name, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("profile %s: %w", p.name, err)
	}
	defer func() { _ = resp.Body.Close() }() // read to the end below
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile %s: %s", p.name, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("profile %s: %w", p.name, err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close() // the copy's error is the one to report
		return fmt.Errorf("profile %s: %w", p.name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("profile %s: %w", p.name, err)
	}
	return nil
}

// buildShoal builds cmd/shoal into dir.
func buildShoal(ctx context.Context, dir string) (string, error) {
	path := filepath.Join(dir, "shoal")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", path, "github.com/shoal-mqtt/shoal/cmd/shoal")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build shoal: %w\n%s", err, out)
	}
	return path, nil
}
