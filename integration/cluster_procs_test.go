//go:build integration

package integration

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/internal/localserver/serverproc"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
)

// proc is one shoal process of the cluster.
type proc struct {
	c          *cluster
	name, role string
	args       []string
	mqtt, http string
	mqtts      string        // a gateway's TLS listener, when it has one
	ws, wss    string        // a gateway's WebSocket listeners, when it has them
	admin      string        // the admin API's listener, when it has one
	netns      *netNamespace // runs inside it, listening on its address (nil: the host's loopback)
	cmd        *exec.Cmd
	done       chan struct{}
	waitErr    error
	log        string
}

// start starts a role; gateways get an MQTT listener and lease a free slot
// under their name.
func (c *cluster) start(role, name string) *proc {
	c.t.Helper()
	return c.startSlot(role, name, -1)
}

// startSlot starts a role; a gateway leases slot (-1: a free one).
func (c *cluster) startSlot(role, name string, slot int) *proc {
	c.t.Helper()
	p := &proc{c: c, name: name, role: role, http: freeAddr(c.t)}
	p.args = []string{role, "--config", c.cfgPath, "--kafka-brokers", strings.Join(c.kafka.Brokers(), ","),
		"--http-listen", p.http}
	if role == "gateway" {
		p.mqtt = freeAddr(c.t)
		p.args = append(p.args, "--mqtt-listen", p.mqtt, "--ws-listen", "", "--gateway-id", name, "--gateway-slot", strconv.Itoa(slot))
	}
	p.launch()
	return p
}

// slot returns the slot a gateway leased, from its log.
func (p *proc) slot() int {
	t := p.c.t
	t.Helper()
	b, err := os.ReadFile(p.log)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`msg="slot leased".* slot=(\d+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s: no \"slot leased\" in its log", p.name)
	}
	n, err := strconv.Atoi(string(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// signal sends sig to the process.
func (p *proc) signal(sig syscall.Signal) {
	p.c.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.c.t.Fatalf("%s: %v", p.name, err)
	}
}

// goroutines has the process write its goroutines' stacks to its log
// (SIGQUIT, which ends it), for a test that found it stuck.
func (p *proc) goroutines(t *testing.T) {
	t.Helper()
	p.signal(syscall.SIGQUIT)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Logf("%s: no exit 10 s after SIGQUIT", p.name)
	}
	b, _ := os.ReadFile(p.log)
	before, stacks := b, []byte(nil)
	if i := bytes.LastIndex(b, []byte("SIGQUIT: quit")); i >= 0 {
		before, stacks = b[:i], b[i:]
	}
	if len(before) > 32<<10 {
		before = before[len(before)-32<<10:]
	}
	t.Logf("%s's log before (last 32 KiB):\n%s\n%s's goroutines:\n%s", p.name, before, p.name, stacks)
}

// launch starts the process with p's arguments.
func (p *proc) launch() {
	t := p.c.t
	t.Helper()
	p.log = filepath.Join(p.c.dir, fmt.Sprintf("%s-%d.log", p.name, time.Now().UnixNano()))
	f, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(p.c.bin, p.args...)
	if p.netns != nil {
		p.cmd = exec.Command("ip", append([]string{"netns", "exec", p.netns.name, p.c.bin}, p.args...)...)
	}
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	p.done = make(chan struct{})
	cmd, done := p.cmd, p.done
	go func() { p.waitErr = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	dumpOnFailure(t, p.log)
}

// waitReady polls /readyz until it answers 200, from this process: a
// port picked free may have been bound by another test's process since,
// which would answer for it (servesHTTP).
func (p *proc) waitReady() {
	t := p.c.t
	t.Helper()
	relaunches := 0
	eventually.OK(t, clusterWait, func() string {
		resp, err := http.Get("http://" + p.http + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK && servesHTTP(p.log) {
				return ""
			}
		}
		select {
		case <-p.done:
			// Its ports were free when picked, but another process (an
			// outgoing connection's ephemeral port) may have taken one
			// since: start again on new ones, a few times.
			if b, _ := os.ReadFile(p.log); strings.Contains(string(b), "address already in use") && relaunches < 3 {
				relaunches++
				t.Logf("%s: a port was taken before it bound it; starting it again on new ports", p.name)
				p.repick()
				p.launch()
				return p.name + " started again"
			}
			t.Fatalf("%s exited before it was ready: %v", p.name, p.waitErr)
		default:
		}
		return p.name + " not ready"
	})
}

// servesHTTP says whether the process logging to path has bound its
// HTTP listener ("http listening", in the text and the JSON log formats).
func servesHTTP(path string) bool {
	b, _ := os.ReadFile(path)
	return strings.Contains(string(b), "http listening")
}

// repick gives the process new free addresses for the listeners it has.
func (p *proc) repick() {
	t := p.c.t
	t.Helper()
	freeAddr := freeAddr
	if p.netns != nil {
		freeAddr = func(t *testing.T) string { return freeAddrOn(t, p.netns.addr) }
	}
	for i := 0; i+1 < len(p.args); i++ {
		if p.args[i+1] == "" {
			continue // a listener turned off
		}
		switch p.args[i] {
		case "--http-listen":
			p.http = freeAddr(t)
			p.args[i+1] = p.http
		case "--mqtt-listen":
			p.mqtt = freeAddr(t)
			p.args[i+1] = p.mqtt
		case "--mqtts-listen":
			p.mqtts = freeAddr(t)
			p.args[i+1] = p.mqtts
		case "--ws-listen":
			p.ws = freeAddr(t)
			p.args[i+1] = p.ws
		case "--wss-listen":
			p.wss = freeAddr(t)
			p.args[i+1] = p.wss
		case "--admin-listen":
			p.admin = freeAddr(t)
			p.args[i+1] = p.admin
		}
	}
}

// kill ends the process with SIGKILL.
func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// stop ends the process with SIGTERM, as an orchestrator does, and waits
// for it to exit (within clusterWait).
func (p *proc) stop(t *testing.T) {
	t.Helper()
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(clusterWait):
		t.Fatalf("%s: no exit %s after SIGTERM", p.name, clusterWait)
	}
}

// restart starts the process again with the same arguments.
func (p *proc) restart() {
	p.c.t.Helper()
	p.launch()
	p.waitReady()
}

// dumpOnFailure logs a process's log when the test fails, and keeps it
// whole in the directory $SHOAL_KEEP_LOGS (made if missing), failed or not.
func dumpOnFailure(t *testing.T, path string) {
	t.Cleanup(func() {
		dir := os.Getenv("SHOAL_KEEP_LOGS")
		if !t.Failed() && dir == "" {
			return
		}
		b, _ := os.ReadFile(path)
		if dir != "" {
			err := os.MkdirAll(dir, 0o755)
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, filepath.Base(path)), b, 0o644)
			}
			if err != nil {
				t.Logf("keep %s: %v", path, err)
			}
		}
		if !t.Failed() {
			return
		}
		if len(b) > 64<<10 {
			b = b[len(b)-64<<10:]
		}
		t.Logf("%s (last 64 KiB):\n%s", filepath.Base(path), b)
	})
}

func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := serverproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}
