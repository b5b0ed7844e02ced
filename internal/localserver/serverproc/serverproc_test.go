package serverproc

import (
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestFreePortsDistinct(t *testing.T) {
	ports, err := FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 2 || ports[0] == ports[1] || ports[0] <= 0 || ports[1] <= 0 {
		t.Fatalf("FreePorts(2) = %v", ports)
	}
}

// TestFreeAddrNeverRepeats: FreeAddr never returns a port it returned
// before, although each one is free again as soon as it is returned (the
// kernel handed one port to two listeners of one test before), and a port
// already handed out is never given again.
func TestFreeAddrNeverRepeats(t *testing.T) {
	seen := map[string]bool{}
	for range 500 {
		a, err := FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		if seen[a] {
			t.Fatalf("FreeAddr returned %s twice", a)
		}
		seen[a] = true
	}
	var s portSet
	if !s.claim(4242) || s.claim(4242) || !s.claim(4243) {
		t.Fatal("portSet.claim: want true, false, true")
	}
}

// A started process and the child it starts are one group: Signal and
// Kill reach both, and Done closes with the exit.
func TestStartSignalKill(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Start(exec.Command(sh, "-c", "sleep 30 & wait"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Exited() {
		t.Fatal("exited at once")
	}
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := p.Kill(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if !p.Exited() || p.Err() == nil {
		t.Fatalf("after Kill: exited %v, err %v", p.Exited(), p.Err())
	}
	// The group is gone: signalling it again is no error.
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("signal to a group that is gone: %v", err)
	}
}

func TestFindScript(t *testing.T) {
	p, err := FindScript("scripts/fetch-kafka.sh")
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(p) != "fetch-kafka.sh" {
		t.Fatalf("FindScript = %s", p)
	}
	if _, err := FindScript("scripts/no-such-script.sh"); err == nil {
		t.Fatal("FindScript found a script that does not exist")
	}
}
