//go:build unix

package realcql

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

// Version is the Apache Cassandra release the node runs (the one
// scripts/fetch-cassandra.sh fetches).
const Version = "5.0.9"

// Bounds of the waits.
const (
	// ReadyTimeout bounds the wait for a started node to answer CQL
	// (8–20 s on a busy 2-core machine).
	ReadyTimeout = 150 * time.Second
	// StopTimeout is how long Stop waits after SIGTERM before SIGKILL (a
	// test node drains in a few seconds).
	StopTimeout = 60 * time.Second
	// killTimeout bounds the wait for the process to exit after SIGKILL.
	killTimeout = 30 * time.Second
	// fetchTimeout bounds the download of the jars (about 70 MB, once).
	fetchTimeout = 10 * time.Minute
	// bindAttempts is how many times Start picks new ports when another
	// process took a picked one before the node bound it.
	bindAttempts = 3
	// probeInterval is the pause between readiness probes.
	probeInterval = 250 * time.Millisecond
	// tailBytes is how much of the node's latest output errors quote.
	tailBytes = 4 << 10
)

// jvm17Flags are the module flags of Cassandra 5.0's conf/jvm17-server.options
// (the JVM otherwise refuses Cassandra's reflective access) and its Netty
// settings.
var jvm17Flags = [...]string{
	"-Djdk.attach.allowAttachSelf=true",
	"--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED",
	"--add-exports", "java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED",
	"--add-exports", "java.rmi/sun.rmi.registry=ALL-UNNAMED",
	"--add-exports", "java.rmi/sun.rmi.server=ALL-UNNAMED",
	"--add-exports", "java.sql/java.sql=ALL-UNNAMED",
	"--add-exports", "java.base/java.lang.ref=ALL-UNNAMED",
	"--add-exports", "jdk.unsupported/sun.misc=ALL-UNNAMED",
	"--add-exports", "jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED",
	"--add-exports", "jdk.attach/sun.tools.attach=ALL-UNNAMED",
	"--add-opens", "java.base/java.lang.module=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.loader=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.reflect=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.math=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.module=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.util.jar=ALL-UNNAMED",
	"--add-opens", "jdk.management/com.sun.management.internal=ALL-UNNAMED",
	"--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
	"--add-opens", "java.base/java.io=ALL-UNNAMED",
	"--add-opens", "java.base/java.lang.reflect=ALL-UNNAMED",
	"--add-opens", "jdk.compiler/com.sun.tools.javac=ALL-UNNAMED",
	"--add-opens", "java.base/java.lang=ALL-UNNAMED",
	"--add-opens", "java.base/java.util=ALL-UNNAMED",
	"-Dio.netty.tryReflectionSetAccessible=true",
	"-Dio.netty.allocator.useCacheForAllThreads=true",
	"-Dio.netty.allocator.maxOrder=11",
}

// Node is one Cassandra node running as a local process, with its
// configuration and data in a directory. Its methods are safe for
// concurrent use.
type Node struct {
	dir     string
	lib     string
	logw    io.Writer
	out     *output
	host    string     // the node's loopback address, 127.0.0.1 unless in a ring
	ring    *placement // nil: a node alone
	heapMiB int
	ports   ports
	version string
	began   time.Time
	ready   time.Duration
	fullJIT bool

	mu   sync.Mutex
	proc *serverproc.Process // nil once stopped or killed
}

// ports are the node's loopback ports.
type ports struct {
	native, storage, ssl int
}

// Start starts a one-node Cassandra with its configuration, logs and data
// under dir (created if missing) and returns once it answers a CQL query,
// or fails within [ReadyTimeout]. The node's output goes to logw (nil:
// only to output.log in dir). ctx bounds fetching the jars and the wait for
// readiness; the node itself runs until Stop or Kill (or the end of the
// test binary), whatever happens to ctx. On error no process is left
// running.
func Start(ctx context.Context, dir string, logw io.Writer) (*Node, error) {
	return StartWith(ctx, dir, logw, Options{})
}

// Options change how Start runs the node.
type Options struct {
	// FullJIT runs the JVM with both of its compilers (C1 and C2), as a
	// production node runs, instead of C1 only: it starts more slowly
	// and costs more CPU while it compiles, then runs faster. For
	// benchmarks; tests want the fast start.
	FullJIT bool
	// MaxHeapMiB is the JVM's -Xmx in MiB (0: 1024). A ring of three on
	// a test machine runs at 512.
	MaxHeapMiB int
}

// heap returns the -Xmx of opts.
func (o Options) heap() int {
	if o.MaxHeapMiB > 0 {
		return o.MaxHeapMiB
	}
	return 1024
}

// StartWith is Start with options.
func StartWith(ctx context.Context, dir string, logw io.Writer, opts Options) (*Node, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("start cassandra: %w", err)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("start cassandra: %w", err)
	}
	out, err := newOutput(filepath.Join(dir, "output.log"), logw)
	if err != nil {
		return nil, fmt.Errorf("start cassandra: %w", err)
	}
	lib, err := fetch(ctx, out)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("start cassandra: %w", err), out.close())
	}
	var errs []error
	for attempt := 1; attempt <= bindAttempts; attempt++ {
		p, err := serverproc.FreePorts(3)
		if err != nil {
			errs = append(errs, err)
			break
		}
		n := &Node{dir: dir, lib: lib, logw: logw, out: out, host: loopback, heapMiB: opts.heap(),
			ports: ports{native: p[0], storage: p[1], ssl: p[2]}, fullJIT: opts.FullJIT}
		err = n.run(ctx)
		if err == nil {
			return n, nil
		}
		errs = append(errs, fmt.Errorf("attempt %d: %w", attempt, err))
		if !errors.Is(err, errPortTaken) || ctx.Err() != nil {
			break
		}
	}
	errs = append(errs, out.close())
	return nil, fmt.Errorf("start cassandra in %s: %w", dir, errors.Join(errs...))
}

// loopback is the address of a node alone.
const loopback = "127.0.0.1"

// Hosts returns the node's CQL address, "127.0.0.1:port" (in a ring,
// 127.0.0.i).
func (n *Node) Hosts() []string {
	return []string{n.Addr()}
}

// Addr returns the node's CQL address.
func (n *Node) Addr() string {
	return net.JoinHostPort(n.host, strconv.Itoa(n.ports.native))
}

// Restart starts a stopped or killed node again, on its directory, data
// and ports, and returns once it answers CQL (in a ring: once it sees its
// peers), or fails within [ReadyTimeout]. Restarting a running node is an
// error.
func (n *Node) Restart(ctx context.Context) error {
	n.mu.Lock()
	running := n.proc != nil
	n.mu.Unlock()
	if running {
		return fmt.Errorf("restart cassandra at %s: it is running", n.Addr())
	}
	out, err := newOutput(n.path("output.log"), n.logw)
	if err != nil {
		return fmt.Errorf("restart cassandra: %w", err)
	}
	n.out = out
	if err := n.run(ctx); err != nil {
		return errors.Join(fmt.Errorf("restart cassandra at %s: %w", n.Addr(), err), out.close())
	}
	return nil
}

// Dir returns the node's directory.
func (n *Node) Dir() string { return n.dir }

// PID returns the process id of the running node's JVM, 0 when it is
// stopped (for reading its CPU and memory from /proc).
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil {
		return 0
	}
	return n.proc.PID()
}

// ReleaseVersion returns the release_version the node reported.
func (n *Node) ReleaseVersion() string { return n.version }

// StartupTime returns how long the node took from launch to answering CQL.
func (n *Node) StartupTime() time.Duration { return n.ready }

// Stop stops the node: SIGTERM (Cassandra drains: it flushes its memtables
// and stops accepting requests), SIGKILL if it is still running after
// [StopTimeout], and waits until it has exited. It returns an error if the
// node had to be killed or had exited on its own before. Stopping a stopped
// node does nothing.
func (n *Node) Stop() error {
	p := n.take()
	if p == nil {
		return nil
	}
	defer n.out.close() //nolint:errcheck // the log file is for people; its close error changes nothing
	if p.Exited() {
		return fmt.Errorf("stop cassandra: it had exited on its own: %w%s", p.Err(), n.out.tailSuffix())
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return errors.Join(fmt.Errorf("stop cassandra: %w", err), p.Kill(killTimeout))
	}
	t := time.NewTimer(StopTimeout)
	defer t.Stop()
	select {
	case <-p.Done():
		return nil
	case <-t.C:
	}
	if err := p.Kill(killTimeout); err != nil {
		return fmt.Errorf("stop cassandra: still running %s after SIGTERM: %w", StopTimeout, err)
	}
	return fmt.Errorf("stop cassandra: still running %s after SIGTERM, killed", StopTimeout)
}

// Kill kills the node with SIGKILL, as a crash would, and waits until it
// has exited. Killing a stopped node does nothing.
func (n *Node) Kill() error {
	p := n.take()
	if p == nil {
		return nil
	}
	defer n.out.close() //nolint:errcheck // the log file is for people; its close error changes nothing
	if p.Exited() {
		return fmt.Errorf("kill cassandra: it had exited on its own: %w%s", p.Err(), n.out.tailSuffix())
	}
	if err := p.Kill(killTimeout); err != nil {
		return fmt.Errorf("kill cassandra: %w", err)
	}
	return nil
}

// take returns the running process and forgets it.
func (n *Node) take() *serverproc.Process {
	n.mu.Lock()
	defer n.mu.Unlock()
	p := n.proc
	n.proc = nil
	return p
}

func (n *Node) path(elem ...string) string {
	return filepath.Join(append([]string{n.dir}, elem...)...)
}

// errPortTaken marks a start that failed because a picked port was taken.
var errPortTaken = errors.New("a port is taken")

// run writes the configuration, starts the JVM and waits until the node
// answers CQL; on failure it kills the JVM and returns why.
func (n *Node) run(ctx context.Context) error {
	if err := n.writeConfig(); err != nil {
		return err
	}
	java, err := serverproc.JavaPath("Cassandra 5 needs Java 17")
	if err != nil {
		return err
	}
	argv, err := n.args()
	if err != nil {
		return err
	}
	// Not CommandContext: the node outlives ctx, which bounds only the
	// wait for readiness.
	cmd := exec.Command(java, argv...)
	cmd.Dir = n.dir
	cmd.Stdout = n.out
	cmd.Stderr = n.out
	cmd.WaitDelay = killTimeout
	n.out.mark()
	n.began = time.Now()
	p, err := serverproc.Start(cmd)
	if err != nil {
		return err
	}

	rctx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	defer cancel()
	version, err := waitReady(rctx, n.Addr(), p.Done())
	if err == nil && n.ring != nil {
		err = waitPeers(rctx, n.Addr(), n.ring.size-1, p.Done())
	}
	if err == nil {
		n.version = version
		n.ready = time.Since(n.began)
		n.mu.Lock()
		n.proc = p
		n.mu.Unlock()
		fmt.Fprintf(n.out, "realcql: cassandra %s at %s answers CQL after %s (pid %d)\n",
			version, n.Addr(), n.ready.Round(time.Millisecond), cmd.Process.Pid)
		return nil
	}
	if p.Exited() {
		err = fmt.Errorf("cassandra exited while starting: %w", p.Err())
		if n.out.sinceMark("Address already in use", "Unable to bind", "BindException") {
			err = fmt.Errorf("%w: %w", errPortTaken, err)
		}
	} else {
		err = errors.Join(fmt.Errorf("cassandra not answering CQL after %s: %w", time.Since(n.began).Round(time.Millisecond), err), p.Kill(killTimeout))
	}
	return fmt.Errorf("%w%s", err, n.out.tailSuffix())
}

// args returns the JVM's command line after the java binary.
func (n *Node) args() ([]string, error) {
	jamm, err := filepath.Glob(filepath.Join(n.lib, "jamm-*.jar"))
	if err != nil {
		return nil, fmt.Errorf("find the jamm agent in %s: %w", n.lib, err)
	}
	if len(jamm) != 1 {
		return nil, fmt.Errorf("find the jamm agent in %s: %d jars match jamm-*.jar, want 1", n.lib, len(jamm))
	}
	tmp := n.path("tmp")
	argv := []string{fmt.Sprintf("-Xmx%dm", n.heapMiB), "-Xss256k", "-XX:+UseG1GC"}
	if !n.fullJIT {
		// C1 only: about twice as fast to start; enough for tests.
		argv = append(argv, "-XX:TieredStopAtLevel=1")
	}
	argv = append(argv,
		"-XX:+PerfDisableSharedMem",
		"-XX:+ExitOnOutOfMemoryError",
		"-Djava.net.preferIPv4Stack=true",
		"-javaagent:"+jamm[0],
	)
	argv = append(argv, jvm17Flags[:]...)
	argv = append(argv,
		"-Dcassandra-foreground=yes",
		"-Dcassandra.config=file://"+n.path("cassandra.yaml"),
		"-Dlogback.configurationFile="+n.path("logback.xml"),
		"-Dcassandra.logdir="+n.path("logs"),
		"-Dcassandra.storagedir="+n.path("data"),
		"-Dcassandra.triggers_dir="+n.path("triggers"),
		"-Dcassandra.superuser_setup_delay_ms=0",
		// The per-row overhead of a memtable that Cassandra otherwise
		// measures at every start, by building rows for seconds of CPU
		// (10 s on an idle 2-core machine, 30 s on a loaded one); 180
		// bytes is what it measured on Java 17.
		"-Dcassandra.memtable.row_overhead_size=180",
	)
	if n.ring == nil {
		argv = append(argv,
			// One node: nothing to wait for.
			"-Dcassandra.skip_wait_for_gossip_to_settle=0",
			"-Dcassandra.ring_delay_ms=100",
			// Schema changes do not fsync the system tables: every
			// test creates a keyspace.
			"-Dcassandra.unsafesystem=true",
		)
	} else {
		argv = append(argv, ringFlags[:]...)
	}
	argv = append(argv,
		"-Djava.io.tmpdir="+tmp,
		"-Djna.tmpdir="+tmp,
		"-cp", filepath.Join(n.lib, "*"),
		"org.apache.cassandra.service.CassandraDaemon",
	)
	return argv, nil
}

// writeConfig writes cassandra.yaml and logback.xml and creates the
// directories they name.
func (n *Node) writeConfig() error {
	for _, d := range []string{"data", "commitlog", "hints", "saved_caches", "cdc_raw", "logs", "triggers", "tmp"} {
		if err := os.MkdirAll(n.path(d), 0o750); err != nil {
			return fmt.Errorf("write config: %w", err)
		}
	}
	if err := os.WriteFile(n.path("cassandra.yaml"), n.yaml(), 0o600); err != nil {
		return fmt.Errorf("write cassandra.yaml: %w", err)
	}
	if err := os.WriteFile(n.path("logback.xml"), []byte(logbackXML), 0o600); err != nil {
		return fmt.Errorf("write logback.xml: %w", err)
	}
	return nil
}

// yaml returns the node's cassandra.yaml (see the package documentation).
func (n *Node) yaml() []byte {
	q := strconv.Quote // a Go-quoted path is a valid YAML double-quoted scalar
	var b bytes.Buffer
	token, seeds, bootstrap := "0", net.JoinHostPort(loopback, strconv.Itoa(n.ports.storage)), ""
	if n.ring != nil {
		token, seeds, bootstrap = n.ring.token, n.ring.seeds, "auto_bootstrap: false\n"
	}
	fmt.Fprintf(&b, `# Written by internal/localserver/realcql: a node on loopback for tests.
cluster_name: shoal-test
num_tokens: 1
initial_token: %s
%spartitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: %s
listen_address: %s
rpc_address: %s
storage_port: %d
ssl_storage_port: %d
native_transport_port: %d
start_native_transport: true
data_file_directories:
  - %s
commitlog_directory: %s
hints_directory: %s
saved_caches_directory: %s
cdc_raw_directory: %s
cdc_enabled: false
commitlog_sync: periodic
commitlog_sync_period: 10000ms
auto_snapshot: false
authenticator: AllowAllAuthenticator
authorizer: AllowAllAuthorizer
role_manager: CassandraRoleManager
network_authorizer: AllowAllNetworkAuthorizer
`, token, bootstrap, q(seeds), n.host, n.host, n.ports.storage, n.ports.ssl, n.ports.native,
		q(n.path("data")), q(n.path("commitlog")), q(n.path("hints")), q(n.path("saved_caches")), q(n.path("cdc_raw")))
	return b.Bytes()
}

// logbackXML sends INFO and above to stdout, which Start copies to its
// writer.
const logbackXML = `<configuration scan="false">
  <!-- Written by internal/localserver/realcql. -->
  <appender name="STDOUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%-5level %date{HH:mm:ss.SSS} [%thread] %logger{0}:%line - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="STDOUT"/></root>
</configuration>
`

// waitReady probes addr until a probe succeeds, ctx ends or exited is
// closed (the node died), and returns the node's release_version.
func waitReady(ctx context.Context, addr string, exited <-chan struct{}) (string, error) {
	for attempt := 1; ; attempt++ {
		version, err := probe(ctx, addr)
		if err == nil {
			return version, nil
		}
		t := time.NewTimer(probeInterval)
		select {
		case <-exited:
			t.Stop()
			return "", fmt.Errorf("probe %d: %w", attempt, err)
		case <-ctx.Done():
			t.Stop()
			return "", fmt.Errorf("probe %d: %w", attempt, errors.Join(ctx.Err(), err))
		case <-t.C:
		}
	}
}

// fetch returns the directory of Cassandra's jars: $SHOAL_CASSANDRA_LIB, or
// what scripts/fetch-cassandra.sh prints (it downloads the jars unless they
// are cached, which it checks in a few milliseconds).
func fetch(ctx context.Context, out io.Writer) (string, error) {
	if lib := os.Getenv("SHOAL_CASSANDRA_LIB"); lib != "" {
		if _, err := os.Stat(filepath.Join(lib, "cassandra-all-"+Version+".jar")); err != nil {
			return "", fmt.Errorf("SHOAL_CASSANDRA_LIB: %w", err)
		}
		return lib, nil
	}
	script, err := serverproc.FindScript("scripts/fetch-cassandra.sh")
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	var stdout bytes.Buffer
	cmd := exec.CommandContext(ctx, script)
	cmd.Stdout = &stdout
	cmd.Stderr = out
	cmd.Env = append(os.Environ(), "CASSANDRA_VERSION="+Version)
	cmd.WaitDelay = killTimeout
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("fetch cassandra jars with %s: %w", script, err)
	}
	lib := strings.TrimSpace(stdout.String())
	if _, err := os.Stat(filepath.Join(lib, "cassandra-all-"+Version+".jar")); err != nil {
		return "", fmt.Errorf("fetch cassandra jars with %s: printed %q: %w", script, lib, err)
	}
	return lib, nil
}
