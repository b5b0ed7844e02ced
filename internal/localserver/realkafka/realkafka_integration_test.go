//go:build integration

package realkafka

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The broker keeps its data across Stop+Restart and Kill+Restart, on the
// same address, and no JVM outlives Stop or Kill.
func TestLifecycle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	logf, err := os.Create(filepath.Join(dir, "kafka.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = logf.Close() }()
	began := time.Now()
	c, err := Start(ctx, filepath.Join(dir, "cluster"), logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	t.Logf("started in %s on %v", time.Since(began).Round(time.Millisecond), c.Brokers())
	brokers := c.Brokers()

	if err := c.Restart(ctx); err == nil || !strings.Contains(err.Error(), "running") {
		t.Errorf("Restart of a running broker: %v", err)
	}
	endOffset := func() int64 {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers()...))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		offs, err := kadm.NewClient(cl).ListEndOffsets(ctx, ProbeTopic)
		if err != nil {
			t.Fatal(err)
		}
		o, ok := offs.Lookup(ProbeTopic, 0)
		if !ok || o.Err != nil {
			t.Fatalf("end offset of %s: %+v", ProbeTopic, o)
		}
		return o.Offset
	}
	if got := endOffset(); got != 1 {
		t.Fatalf("after start, %s holds %d records, want the probe's 1", ProbeTopic, got)
	}
	for i, stop := range []struct {
		name string
		fn   func() error
	}{{"Stop", c.Stop}, {"Kill", c.Kill}} {
		pid := c.pid()
		if err := stop.fn(); err != nil {
			t.Fatalf("%s: %v", stop.name, err)
		}
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Fatalf("after %s, pid %d: %v (want it gone)", stop.name, pid, err)
		}
		if err := stop.fn(); err != nil {
			t.Errorf("second %s: %v", stop.name, err)
		}
		began = time.Now()
		if err := c.Restart(ctx); err != nil {
			t.Fatalf("Restart after %s: %v", stop.name, err)
		}
		t.Logf("restarted after %s in %s", stop.name, time.Since(began).Round(time.Millisecond))
		if got := c.Brokers(); got[0] != brokers[0] {
			t.Errorf("brokers %v after restart, were %v", got, brokers)
		}
		// Each start's probe wrote one record; the earlier ones survived.
		if got, want := endOffset(), int64(i+2); got != want {
			t.Errorf("after %s and Restart, %s holds %d records, want %d", stop.name, ProbeTopic, got, want)
		}
	}
}

// pid returns the running JVM's pid (0 when stopped).
func (c *Cluster) pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc == nil {
		return 0
	}
	return c.proc.PID()
}
