package serverproc

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Process is a started server process.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // cmd.Wait's result, set before done is closed
}

// Start starts cmd in a process group of its own (SysProcAttr), which the
// test binary's death kills on Linux, and waits for it in the background.
// cmd.WaitDelay should bound the wait for its output after it exits.
func Start(cmd *exec.Cmd) (*Process, error) {
	cmd.SysProcAttr = SysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	p := &Process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is how the process ended (cmd.Wait's result); valid once Done is
// closed.
func (p *Process) Err() error {
	<-p.done
	return p.err
}

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// PID is the process id (and process group id).
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Signal sends sig to the process group; a group already gone is no
// error.
func (p *Process) Signal(sig syscall.Signal) error {
	if err := syscall.Kill(-p.PID(), sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal %v to process group %d: %w", sig, p.PID(), err)
	}
	return nil
}

// Kill sends SIGKILL to the process group and waits at most timeout for
// the process to exit.
func (p *Process) Kill(timeout time.Duration) error {
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
		return fmt.Errorf("pid %d still running %s after SIGKILL", p.PID(), timeout)
	}
}

// FreeAddr returns a loopback address ("127.0.0.1:port") that was free a
// moment ago.
func FreeAddr() (string, error) {
	ps, err := FreePorts(1)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(ps[0])), nil
}

// FreePorts returns n distinct loopback ports that were free a moment ago
// and that it never returned before in this process.
func FreePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			_ = l.Close() // only held to keep the ports distinct
		}
	}()
	ps := make([]int, 0, n)
	for attempt := 0; len(ps) < n; attempt++ {
		if attempt == n+maxPortRepeats {
			return nil, fmt.Errorf("pick a free port: %d picks gave ports handed out already", attempt)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick a free port: %w", err)
		}
		ls = append(ls, l) // held, a repeat too: the next pick differs
		addr, ok := l.Addr().(*net.TCPAddr)
		if !ok {
			return nil, fmt.Errorf("pick a free port: listener address %v is not TCP", l.Addr())
		}
		if handed.claim(addr.Port) {
			ps = append(ps, addr.Port)
		}
	}
	return ps, nil
}

// maxPortRepeats bounds the picks FreePorts makes beyond the n it needs.
const maxPortRepeats = 100

// handed holds the ports FreePorts returned in this process. A port picked
// is closed again before its user binds it, so the kernel may give it to
// the very next pick: two listeners of one test were handed the same port
// (the integration suite's flakes of 2026-11-27). It is the one piece of
// process-wide state here, and only ever grows, by the few hundred ports
// a test binary uses.
var handed portSet

type portSet struct {
	mu    sync.Mutex
	ports map[int]bool
}

// claim records port and reports whether it was not recorded before.
func (s *portSet) claim(port int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ports[port] {
		return false
	}
	if s.ports == nil {
		s.ports = make(map[int]bool)
	}
	s.ports[port] = true
	return true
}

// JavaPath finds java: $JAVA_HOME/bin/java, else the PATH's. need says
// what needs it, for the error ("Kafka needs Java 17 or newer").
func JavaPath(need string) (string, error) {
	if home := os.Getenv("JAVA_HOME"); home != "" {
		p := filepath.Join(home, "bin", "java")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("java")
	if err != nil {
		return "", fmt.Errorf("find java (%s; Debian: apt-get install openjdk-17-jre-headless): %w", need, err)
	}
	return p, nil
}

// FindScript finds rel (scripts/fetch-kafka.sh) in the first directory
// at or above the working directory that holds a go.mod and rel: the
// repository root, also from the integration module below it.
func FindScript(rel string) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find %s: %w", rel, err)
	}
	for d := wd; ; {
		p := filepath.Join(d, rel)
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("find %s: not in any directory above %s", rel, wd)
		}
		d = parent
	}
}
