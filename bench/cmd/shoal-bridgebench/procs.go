package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/shoal-mqtt/shoal/internal/localserver/serverproc"
)

// Bounds of the waits for processes.
const (
	// readyTimeout bounds a broker's start until it answers.
	readyTimeout = 2 * time.Minute
	// stopTimeout is how long a process gets after SIGTERM before SIGKILL.
	stopTimeout = 20 * time.Second
	// tailBytes is how much of a failing process's log an error quotes.
	tailBytes = 2 << 10
)

// harness starts the processes of the benchmark: the brokers, the bridge
// and the stock clients, each logging into logDir.
type harness struct {
	shoal, mosquitto, kcat, mosquittoSub string // paths
	work, logDir, outDir                 string
	stderr                               io.Writer // progress
}

// proc is one process started by the harness.
type proc struct {
	name string
	log  string // its output (the clients': their stderr)
	p    *serverproc.Process
}

// start starts bin with args as name, its output (stderr only when
// stdout is given) into name.log.
func (h *harness) start(name string, stdout io.Writer, stdin io.Reader, bin string, args ...string) (*proc, error) {
	pr := &proc{name: name, log: filepath.Join(h.logDir, name+".log")}
	f, err := os.OpenFile(pr.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644) // a restarted process appends
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	defer func() { _ = f.Close() }() // the child has its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr, cmd.Stdin = f, f, stdin
	if stdout != nil {
		cmd.Stdout = stdout
	}
	cmd.WaitDelay = time.Second
	if pr.p, err = serverproc.Start(cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return pr, nil
}

// pid returns the process id.
func (p *proc) pid() int { return p.p.PID() }

// stop sends SIGTERM, then SIGKILL after stopTimeout, and waits. It
// reports a process that had exited on its own or had to be killed.
func (p *proc) stop() error {
	if p.p.Exited() {
		return fmt.Errorf("%s had exited on its own: %w%s", p.name, p.p.Err(), p.tail())
	}
	if err := p.p.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("stop %s: %w", p.name, err)
	}
	t := time.NewTimer(stopTimeout)
	defer t.Stop()
	select {
	case <-p.p.Done():
		return nil
	case <-t.C:
	}
	if err := p.p.Kill(10 * time.Second); err != nil {
		return fmt.Errorf("stop %s: %w", p.name, err)
	}
	return fmt.Errorf("stop %s: still running %s after SIGTERM, killed", p.name, stopTimeout)
}

// alive reports an error if the process has exited.
func (p *proc) alive() error {
	if p.p.Exited() {
		return fmt.Errorf("%s exited: %w%s", p.name, p.p.Err(), p.tail())
	}
	return nil
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

// waitHTTP polls url until it answers 200, the process exits, ctx ends or
// readyTimeout passes.
func (p *proc) waitHTTP(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		if resp, err := client.Do(req); err == nil {
			_ = resp.Body.Close() // only the status matters
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if err := p.pause(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// waitTCP waits until addr accepts connections.
func (p *proc) waitTCP(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	var d net.Dialer
	for {
		if c, err := d.DialContext(ctx, "tcp", addr); err == nil {
			return c.Close()
		}
		if err := p.pause(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// pause waits d, failing when the process exits or ctx ends first.
func (p *proc) pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.p.Done():
		return fmt.Errorf("%s exited before it was ready: %w%s", p.name, p.p.Err(), p.tail())
	case <-ctx.Done():
		return fmt.Errorf("%s not ready: %w%s", p.name, ctx.Err(), p.tail())
	case <-t.C:
		return nil
	}
}

// broker is an MQTT broker the harness started: Mosquitto or `shoal all`.
type broker struct {
	*proc
	mqtt string
	http string // shoal only: /metrics, /readyz
	// The embedded backbone's TCP listener and the properties file stock
	// clients read (shoal only).
	kafka, props string
}

// metricsURL returns the broker's /metrics.
func (b *broker) metricsURL() string { return "http://" + b.http + "/metrics" }

// startMosquitto starts Mosquitto as scripts/bench-compare.sh does:
// persistence off, queues that do not drop, TCP_NODELAY.
func (h *harness) startMosquitto(ctx context.Context, name string) (*broker, error) {
	addr, err := serverproc.FreeAddr()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	_, port, _ := net.SplitHostPort(addr)
	conf := filepath.Join(h.work, name+".conf")
	text := "listener " + port + " 127.0.0.1\nallow_anonymous true\npersistence false\n" +
		"max_queued_messages 1000000\nmax_queued_bytes 0\nmax_inflight_messages 0\nset_tcp_nodelay true\n" +
		"log_dest stdout\nlog_type error\nlog_type warning\n"
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil { // mosquitto may read it as its own user
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p, err := h.start(name, nil, nil, h.mosquitto, "-c", conf)
	if err != nil {
		return nil, err
	}
	b := &broker{proc: p, mqtt: addr}
	if err := p.waitTCP(ctx, addr); err != nil {
		return nil, errors.Join(err, p.stop())
	}
	return b, nil
}

// startShoalAll starts `shoal all` as name on a new data directory, with
// the YAML configuration yaml (mappings, or none) and the embedded
// backbone on a TCP listener of its own.
func (h *harness) startShoalAll(ctx context.Context, name, yaml string) (*broker, error) {
	dir := filepath.Join(h.work, name)
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	cfg := filepath.Join(dir, "shoal.yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	var addrs [3]string
	for i := range addrs {
		a, err := serverproc.FreeAddr()
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
		addrs[i] = a
	}
	data := filepath.Join(dir, "data")
	p, err := h.start(name, nil, nil, h.shoal, "all", "--config", cfg, "--data-dir", data,
		"--mqtt-listen", addrs[0], "--http-listen", addrs[1], "--kafka-embedded-addr", addrs[2],
		"--ws-listen", "", "--admin-listen", "")
	if err != nil {
		return nil, err
	}
	b := &broker{proc: p, mqtt: addrs[0], http: addrs[1], kafka: addrs[2],
		props: filepath.Join(data, "kafka", "client.properties")}
	if err := p.waitHTTP(ctx, "http://"+b.http+"/readyz"); err != nil {
		return nil, errors.Join(err, p.stop())
	}
	return b, nil
}

// bridgeProc is a `shoal bridge` process on a `shoal all`'s embedded
// backbone, restartable with the same settings.
type bridgeProc struct {
	*proc
	args []string
	http string
}

// startBridge starts `shoal bridge` as name with the mappings of yaml,
// on all's embedded backbone: its TCP listener, the SASL credentials of
// its client.properties and the partition count of its topics.
func (h *harness) startBridge(ctx context.Context, name, yaml string, all *broker) (*bridgeProc, error) {
	props, err := os.ReadFile(all.props)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	kv := parseProperties(props)
	if kv["sasl.mechanisms"] == "" || kv["sasl.username"] == "" {
		return nil, fmt.Errorf("start %s: %s has no SASL credentials", name, all.props)
	}
	pw := filepath.Join(h.work, name+".password")
	if err := os.WriteFile(pw, []byte(kv["sasl.password"]), 0o600); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	parts, err := h.partitions(ctx, all, "shoal.messages")
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	cfg := filepath.Join(h.work, name+".yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	addr, err := serverproc.FreeAddr()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	b := &bridgeProc{http: addr, args: []string{"bridge", "--config", cfg,
		"--kafka-brokers", all.kafka, "--kafka-partitions", strconv.Itoa(parts),
		"--kafka-sasl-mechanism", kv["sasl.mechanisms"], "--kafka-sasl-user", kv["sasl.username"],
		"--kafka-sasl-password-file", pw, "--http-listen", addr, "--admin-listen", ""}}
	b.proc = &proc{name: name}
	if err := h.restartBridge(ctx, b); err != nil {
		return nil, err
	}
	return b, nil
}

// restartBridge starts b's process (again) and waits until it is ready.
func (h *harness) restartBridge(ctx context.Context, b *bridgeProc) error {
	p, err := h.start(b.name, nil, nil, h.shoal, b.args...)
	if err != nil {
		return err
	}
	b.proc = p
	if err := p.waitHTTP(ctx, "http://"+b.http+"/readyz"); err != nil {
		return errors.Join(err, p.stop())
	}
	return nil
}

// parseProperties reads a Java properties file of key=value lines.
func parseProperties(b []byte) map[string]string {
	kv := map[string]string{}
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if ok {
			kv[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return kv
}

// kcatArgs are the arguments every kcat of b's backbone starts with: the
// embedded backbone's properties file (SASL), none for a Kafka without.
func (b *broker) kcatArgs(extra ...string) []string {
	args := []string{"-b", b.kafka, "-q"}
	if b.props != "" {
		args = append([]string{"-F", b.props}, args...)
	}
	return append(args, extra...)
}

var partitionsLine = regexp.MustCompile(`topic "([^"]+)" with (\d+) partitions`)

// partitions returns the partition count of topic on b's backbone (kcat's
// metadata listing).
func (h *harness) partitions(ctx context.Context, b *broker, topic string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, h.kcat, b.kcatArgs("-L", "-t", topic)...).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("kcat -L -t %s: %w\n%s", topic, err, out)
	}
	for _, m := range partitionsLine.FindAllSubmatch(out, -1) {
		if string(m[1]) == topic {
			return strconv.Atoi(string(m[2]))
		}
	}
	return 0, fmt.Errorf("kcat -L -t %s: no partition count in %q", topic, out)
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

// lookTool finds a tool on the PATH or in the directories of Debian's
// packages that the PATH of a plain user lacks.
func lookTool(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/usr/bin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found: run scripts/test-deps.sh (make deps)", name)
}
