package realkafka

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shoal-mqtt/shoal/internal/localserver/serverproc"
)

// Version is the Apache Kafka release the cluster runs (the one
// scripts/fetch-kafka.sh fetches).
const Version = "4.3.1"

// Bounds of the waits.
const (
	// readyTimeout bounds the wait for a started broker to accept an
	// acks=all produce (6–13 s on a busy 2-core machine).
	readyTimeout = 120 * time.Second
	// stopTimeout is how long Stop waits after SIGTERM before SIGKILL
	// (a controlled shutdown of one node takes about 2.5 s).
	stopTimeout = 30 * time.Second
	// killTimeout bounds the wait for the process to exit after SIGKILL.
	killTimeout = 30 * time.Second
	// bindAttempts is how many times Start picks new ports when another
	// process took a picked one before the broker bound it.
	bindAttempts = 3
	// tailBytes is how much of the broker's latest output errors quote.
	tailBytes = 4 << 10
)

// jvmFlags are the JVM's flags: a small heap, and (unless fullJIT) the C1
// compiler only, which halves the CPU the broker needs to start.
func jvmFlags(fullJIT bool) []string {
	if fullJIT {
		return []string{"-Xmx512m", "-XX:+UseG1GC"}
	}
	return []string{"-Xmx512m", "-XX:+UseG1GC", "-XX:TieredStopAtLevel=1"}
}

// Options change how Start runs the broker.
type Options struct {
	// FullJIT runs the JVM with both of its compilers (C1 and C2), as a
	// production broker runs, instead of C1 only: it starts more slowly
	// and costs more CPU while it compiles, then runs faster. For
	// benchmarks; tests want the fast start.
	FullJIT bool
	// Properties are more lines of server.properties (key=value), after
	// the harness's own: a later line of a key overrides an earlier one.
	// For benchmarks that measure a broker setting.
	Properties []string
}

// Cluster is one Kafka broker (and KRaft controller) running as a local
// process, with its configuration and data in a directory. Its methods are
// safe for concurrent use.
type Cluster struct {
	dir        string
	lib        string
	out        *output
	brokerPort int
	ctlPort    int
	fullJIT    bool
	props      []string // Options.Properties
	// Of a node of several (multi.go); zero for a one-node cluster.
	nodeID int
	multi  *Nodes

	op   sync.Mutex          // held by Stop, Kill and Restart: one at a time
	mu   sync.Mutex          // guards proc
	proc *serverproc.Process // the running (or exited on its own) JVM; nil when stopped
}

// Start starts a new, empty one-node Kafka cluster with its configuration
// and data under dir (created if missing; data from an earlier cluster in
// dir/data is removed) and returns once it accepts an acks=all produce, or
// fails within about two minutes. The broker's output
// goes to logw (nil discards it). ctx bounds fetching the jars, formatting
// and the wait for readiness; the broker itself runs until Stop or Kill
// (or the end of the test binary), whatever happens to ctx.
func Start(ctx context.Context, dir string, logw io.Writer) (*Cluster, error) {
	return StartWith(ctx, dir, logw, Options{})
}

// StartWith is Start with options.
func StartWith(ctx context.Context, dir string, logw io.Writer, opts Options) (*Cluster, error) {
	if logw == nil {
		logw = io.Discard
	}
	out := &output{w: logw}
	lib, err := fetch(ctx, out)
	if err != nil {
		return nil, fmt.Errorf("start kafka: %w", err)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("start kafka: %w", err)
	}
	c, err := withFreshPorts(ctx, func() (*Cluster, error) {
		ports, err := serverproc.FreePorts(2)
		if err != nil {
			return nil, err
		}
		c := &Cluster{dir: dir, lib: lib, out: out, brokerPort: ports[0], ctlPort: ports[1], fullJIT: opts.FullJIT, props: opts.Properties}
		// The storage is formatted for the controller's address: new
		// ports need a new format.
		if err := os.RemoveAll(c.dataDir()); err != nil {
			return nil, err
		}
		if err := c.writeProperties(); err != nil {
			return nil, err
		}
		if err := c.format(ctx); err != nil {
			return nil, err
		}
		return c, c.run(ctx)
	})
	if err != nil {
		return nil, fmt.Errorf("start kafka in %s: %w", dir, err)
	}
	return c, nil
}

// withFreshPorts calls start, which picks ports of its own, again (up to
// bindAttempts times in all) while it fails because another process took
// a picked port before the broker bound it, and returns every failure.
func withFreshPorts[T any](ctx context.Context, start func() (T, error)) (T, error) {
	var errs []error
	for range bindAttempts {
		v, err := start()
		if err == nil {
			return v, nil
		}
		errs = append(errs, err)
		if !errors.Is(err, errPortTaken) || ctx.Err() != nil {
			break
		}
	}
	var zero T
	return zero, errors.Join(errs...)
}

// Brokers returns the seed brokers, host:port; they stay the same across
// restarts.
func (c *Cluster) Brokers() []string {
	return []string{net.JoinHostPort("127.0.0.1", strconv.Itoa(c.brokerPort))}
}

// Dir returns the cluster's directory.
func (c *Cluster) Dir() string { return c.dir }

// PID returns the process id of the running broker's JVM, 0 when it is
// stopped (for reading its CPU and memory from /proc).
func (c *Cluster) PID() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc == nil {
		return 0
	}
	return c.proc.PID()
}

// Stop stops the broker: SIGTERM (a controlled shutdown), SIGKILL if it is
// still running after 30 s, and waits until it has exited. It returns an
// error if the broker had to be killed or had exited on its own before
// Stop. Stopping a stopped cluster does nothing.
func (c *Cluster) Stop() error {
	killed, err := c.stopWithin(stopTimeout)
	if err == nil && killed {
		err = fmt.Errorf("stop kafka: still running %s after SIGTERM, killed", stopTimeout)
	}
	return err
}

// stopWithin is Stop waiting d for the controlled shutdown; killed says
// that it did not end in time and the broker was killed.
func (c *Cluster) stopWithin(d time.Duration) (killed bool, err error) {
	c.op.Lock()
	defer c.op.Unlock()
	p := c.take()
	if p == nil {
		return false, nil
	}
	if p.Exited() {
		return false, fmt.Errorf("stop kafka: it had exited on its own: %w%s", p.Err(), c.out.tailSuffix())
	}
	// A paused node (Pause) must run again to shut down.
	if err := errors.Join(p.Signal(syscall.SIGCONT), p.Signal(syscall.SIGTERM)); err != nil {
		return false, errors.Join(fmt.Errorf("stop kafka: %w", err), p.Kill(killTimeout))
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.Done():
		return false, nil
	case <-t.C:
	}
	if err := p.Kill(killTimeout); err != nil {
		return true, fmt.Errorf("stop kafka: still running %s after SIGTERM: %w", d, err)
	}
	return true, nil
}

// Kill kills the broker with SIGKILL, as a crash would, and waits until it
// has exited. What it acknowledged is in the page cache and survives, as
// after a crash of the process (not of the machine). Killing a stopped
// cluster does nothing.
func (c *Cluster) Kill() error {
	c.op.Lock()
	defer c.op.Unlock()
	p := c.take()
	if p == nil {
		return nil
	}
	if p.Exited() {
		return fmt.Errorf("kill kafka: it had exited on its own: %w%s", p.Err(), c.out.tailSuffix())
	}
	if err := p.Kill(killTimeout); err != nil {
		return fmt.Errorf("kill kafka: %w", err)
	}
	return nil
}

// Restart starts the stopped (or killed) broker again on the same ports
// and data, and waits until it accepts an acks=all produce. The cluster
// must have been stopped or killed first.
func (c *Cluster) Restart(ctx context.Context) error {
	c.op.Lock()
	defer c.op.Unlock()
	c.mu.Lock()
	running := c.proc != nil
	c.mu.Unlock()
	if running {
		return errors.New("restart kafka: it is running: Stop or Kill it first")
	}
	if err := c.run(ctx); err != nil {
		return fmt.Errorf("restart kafka: %w", err)
	}
	return nil
}

// take returns the current process and forgets it.
func (c *Cluster) take() *serverproc.Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.proc
	c.proc = nil
	return p
}

func (c *Cluster) dataDir() string        { return filepath.Join(c.dir, "data") }
func (c *Cluster) propertiesPath() string { return filepath.Join(c.dir, "server.properties") }

// writeProperties writes the broker's configuration (see the package
// documentation for the settings that differ from Kafka's defaults).
func (c *Cluster) writeProperties() error {
	broker := net.JoinHostPort("127.0.0.1", strconv.Itoa(c.brokerPort))
	ctl := net.JoinHostPort("127.0.0.1", strconv.Itoa(c.ctlPort))
	id, quorum, rf, isr := "1", "controller.quorum.bootstrap.servers="+ctl, "1", "1"
	session, beat := "4000", "1000"
	if c.multi != nil {
		id, quorum, rf, isr = strconv.Itoa(c.nodeID), "controller.quorum.voters="+c.multi.voters(), strconv.Itoa(len(c.multi.nodes)), "2"
		session, beat = multiSession, multiHeartbeat
	}
	props := []string{
		"process.roles=broker,controller",
		"node.id=" + id,
		quorum,
		"listeners=PLAINTEXT://" + broker + ",CONTROLLER://" + ctl,
		"advertised.listeners=PLAINTEXT://" + broker,
		"controller.listener.names=CONTROLLER",
		"inter.broker.listener.name=PLAINTEXT",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"log.dirs=" + c.dataDir(),
		"offsets.topic.replication.factor=" + rf,
		"offsets.topic.num.partitions=4",
		"transaction.state.log.replication.factor=" + rf,
		"transaction.state.log.min.isr=" + isr,
		"transaction.state.log.num.partitions=4",
		"share.coordinator.state.topic.replication.factor=" + rf,
		"share.coordinator.state.topic.min.isr=" + isr,
		"share.coordinator.state.topic.num.partitions=4",
		"default.replication.factor=" + rf,
		"min.insync.replicas=" + isr,
		"group.initial.rebalance.delay.ms=0",
		// After a SIGKILL the restarted broker cannot register until
		// the dead incarnation's session expires (9 s by default); in a
		// cluster of several nodes that expiry is also when the
		// controller fences a dead or frozen broker and moves its
		// leaders, the pause its partitions see (multiSession).
		"broker.session.timeout.ms=" + session,
		"broker.heartbeat.interval.ms=" + beat,
		// A quorum that lost its active controller elects another
		// within about these (2 s and 1 s by default).
		"controller.quorum.fetch.timeout.ms=1000",
		"controller.quorum.election.timeout.ms=500",
	}
	props = append(props, c.props...)
	data := []byte("# Written by internal/localserver/realkafka.\n" + strings.Join(props, "\n") + "\n")
	if err := os.WriteFile(c.propertiesPath(), data, 0o600); err != nil {
		return fmt.Errorf("write server.properties: %w", err)
	}
	return nil
}

// multiSession and multiHeartbeat are a node's broker session timeout and
// heartbeat interval in a cluster of several: the controller fences a
// broker that missed its heartbeats this long and elects new leaders for
// its partitions, so a killed leader's partitions pause about this long
// (docs/faults.md). The Helm chart's KRaft cluster sets the same.
const (
	multiSession   = "2000"
	multiHeartbeat = "500"
)

// format formats the storage for a new cluster id, once: a formatted data
// directory (meta.properties) is left alone.
func (c *Cluster) format(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(c.dataDir(), "meta.properties")); err == nil {
		return nil
	}
	if c.multi != nil {
		// Every node of the quorum formats for the same cluster id, and
		// the static voters of server.properties.
		if err := c.tool(ctx, c.out, "format", "-t", c.multi.clusterID, "-c", c.propertiesPath()); err != nil {
			return fmt.Errorf("format storage: %w", err)
		}
		return nil
	}
	var uuid bytes.Buffer
	if err := c.tool(ctx, &uuid, "random-uuid"); err != nil {
		return fmt.Errorf("format storage: %w", err)
	}
	id := strings.TrimSpace(uuid.String())
	if id == "" || strings.ContainsAny(id, " \n") {
		return fmt.Errorf("format storage: random-uuid printed %q", uuid.String())
	}
	if err := c.tool(ctx, c.out, "format", "--standalone", "-t", id, "-c", c.propertiesPath()); err != nil {
		return fmt.Errorf("format storage: %w", err)
	}
	return nil
}

// tool runs kafka.tools.StorageTool with args, its stdout to stdout and its
// stderr (logs) to the cluster's output.
func (c *Cluster) tool(ctx context.Context, stdout io.Writer, args ...string) error {
	java, err := serverproc.JavaPath("Kafka needs Java 17 or newer")
	if err != nil {
		return err
	}
	argv := append(append(jvmFlags(false), "-cp", c.classpath(), "kafka.tools.StorageTool"), args...)
	cmd := exec.CommandContext(ctx, java, argv...)
	cmd.Dir = c.dir
	cmd.Stdout = stdout
	cmd.Stderr = c.out
	cmd.SysProcAttr = serverproc.SysProcAttr()
	cmd.WaitDelay = killTimeout
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("StorageTool %s: %w%s", args[0], err, c.out.tailSuffix())
	}
	return nil
}

func (c *Cluster) classpath() string { return filepath.Join(c.lib, "*") }

// errPortTaken marks a start that failed because a port was taken.
var errPortTaken = errors.New("a port is taken")

// run starts the JVM and waits until the broker is ready; on failure it
// kills the JVM and returns why.
func (c *Cluster) run(ctx context.Context) error {
	java, err := serverproc.JavaPath("Kafka needs Java 17 or newer")
	if err != nil {
		return err
	}
	argv := append(jvmFlags(c.fullJIT),
		"-Dorg.slf4j.simpleLogger.showDateTime=true",
		"-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
		"-cp", c.classpath(), "kafka.Kafka", c.propertiesPath())
	// Not CommandContext: the broker outlives ctx, which bounds only the
	// wait for readiness.
	cmd := exec.Command(java, argv...)
	cmd.Dir = c.dir
	cmd.Stdout = c.out
	cmd.Stderr = c.out
	// serverproc.Start: a process group of its own (signals reach the JVM
	// and anything it starts), and SIGKILL when the test binary dies.
	cmd.WaitDelay = killTimeout
	c.out.mark()
	began := time.Now()
	p, err := serverproc.Start(cmd)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.proc = p
	c.mu.Unlock()

	rctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if c.multi != nil {
		err = waitRegistered(rctx, c.multi.Brokers(), int32(c.nodeID), p.Done())
	} else {
		err = waitReady(rctx, c.Brokers(), p.Done())
	}
	if err == nil {
		fmt.Fprintf(c.out, "realkafka: broker %s ready after %s (pid %d)\n", c.Brokers()[0], time.Since(began).Round(time.Millisecond), cmd.Process.Pid)
		return nil
	}
	c.mu.Lock()
	c.proc = nil
	c.mu.Unlock()
	if p.Exited() {
		err = fmt.Errorf("kafka exited while starting: %w", p.Err())
		if c.out.sinceMark("Address already in use") {
			err = fmt.Errorf("%w: %w", errPortTaken, err)
		}
	} else {
		err = errors.Join(fmt.Errorf("kafka not ready after %s: %w", time.Since(began).Round(time.Millisecond), err), p.Kill(killTimeout))
	}
	return fmt.Errorf("%w%s", err, c.out.tailSuffix())
}

// fetch runs scripts/fetch-kafka.sh, which downloads the jars unless they
// are cached, and returns the directory holding them.
func fetch(ctx context.Context, out io.Writer) (string, error) {
	script, err := serverproc.FindScript("scripts/fetch-kafka.sh")
	if err != nil {
		return "", err
	}
	var stdout bytes.Buffer
	cmd := exec.CommandContext(ctx, script)
	cmd.Stdout = &stdout
	cmd.Stderr = out
	cmd.WaitDelay = killTimeout
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("fetch kafka jars with %s: %w", script, err)
	}
	lib := strings.TrimSpace(stdout.String())
	if _, err := os.Stat(filepath.Join(lib, "kafka_2.13-"+Version+".jar")); err != nil {
		return "", fmt.Errorf("fetch kafka jars with %s: it printed %q: %w", script, lib, err)
	}
	return lib, nil
}

// output forwards the broker's output to the writer given to Start and
// keeps its latest bytes for error messages.
type output struct {
	mu    sync.Mutex
	w     io.Writer
	tail  []byte // at most tailBytes
	since []byte // everything since mark, up to 1 MiB
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.tail = append(o.tail, p...)
	if len(o.tail) > tailBytes {
		o.tail = append(o.tail[:0], o.tail[len(o.tail)-tailBytes:]...)
	}
	if len(o.since) < 1<<20 {
		o.since = append(o.since, p...)
	}
	// The broker's output must not block or fail because of the writer.
	_, _ = o.w.Write(p)
	return len(p), nil
}

// mark starts a new run: sinceMark looks at the output from here on.
func (o *output) mark() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.since = o.since[:0]
}

func (o *output) sinceMark(s string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return bytes.Contains(o.since, []byte(s))
}

// tailSuffix returns the latest lines of output, formatted to end an error
// message.
func (o *output) tailSuffix() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	t := o.tail
	if i := bytes.IndexByte(t, '\n'); len(t) == tailBytes && i >= 0 {
		t = t[i+1:] // drop the partial first line
	}
	if len(bytes.TrimSpace(t)) == 0 {
		return ""
	}
	return "\nlast output of kafka:\n" + string(bytes.TrimRight(t, "\n"))
}
