//go:build integration

package integration

import (
	"context"
	"io"
	"os"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/compose/store/cqlstore"
	"github.com/shoal-mqtt/shoal/internal/localserver/realcql"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
	"github.com/shoal-mqtt/shoal/internal/testutil/testlog"
)

// ringHeapMiB is the heap of each node of a test ring: three nodes beside
// three Kafka brokers and the Shoal roles on a 2-core, 24 GiB machine.
const ringHeapMiB = 512

// startCQLRing starts a Cassandra ring of n nodes on 127.0.0.1 to
// 127.0.0.n, stopped when the test ends. Its nodes' output goes to their
// output.log files in the test's directory (and to stderr with
// SHOAL_TEST_DEBUG).
func startCQLRing(t *testing.T, n int) *realcql.Ring {
	t.Helper()
	skipWithContainers(t)
	ctx, cancel := context.WithTimeout(t.Context(), cqlStartTimeout)
	defer cancel()
	dir := t.TempDir()
	began := time.Now()
	r, err := realcql.StartRing(ctx, dir, n, func(int) io.Writer {
		if os.Getenv("SHOAL_TEST_DEBUG") != "" {
			return os.Stderr
		}
		return nil
	}, realcql.Options{MaxHeapMiB: ringHeapMiB})
	if err != nil {
		t.Fatalf("start a cassandra ring of %d: %v", n, err)
	}
	t.Cleanup(func() {
		if err := r.Stop(); err != nil {
			t.Errorf("stop the cassandra ring: %v", err)
		}
	})
	t.Logf("cassandra ring of %d at %v ready after %s", n, r.Hosts(), time.Since(began).Round(time.Millisecond))
	return r
}

// TestCassandraRing runs the gateway slot leases (lightweight transactions
// at SERIAL, writes and reads at QUORUM) on a ring of three with a
// keyspace of three replicas while one node is killed, restarted, then
// stopped: every operation succeeds with one node of three down.
func TestCassandraRing(t *testing.T) {
	r := startCQLRing(t, 3)
	cfg := cqlstore.DefaultConfig()
	cfg.Hosts = r.Hosts()
	cfg.Keyspace = "ring_leases"
	cfg.ReplicationFactor = 3
	cfg.Timeout = 10 * time.Second
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	s, err := cqlstore.Open(ctx, cfg, testlog.New(t))
	if err != nil {
		t.Fatalf("open the store on the ring: %v", err)
	}
	defer s.Close() //nolint:errcheck // Close has no error to report
	slot, err := s.AcquireSlot(ctx, 4, "gw-a", time.Minute)
	if err != nil {
		t.Fatalf("acquire a slot: %v", err)
	}
	// renewed renews the slot until it succeeds (the driver notices a
	// node gone within a request or two) and says how long it took.
	renewed := func(what string) {
		t.Helper()
		began := time.Now()
		eventually.OK(t, 60*time.Second, func() string {
			rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
			defer rcancel()
			if err := s.RenewSlot(rctx, slot, "gw-a", time.Minute); err != nil {
				return err.Error()
			}
			return ""
		})
		if h, err := s.SlotHolder(ctx, slot); err != nil || h != "gw-a" {
			t.Fatalf("%s: slot %d held by %q (%v), want gw-a", what, slot, h, err)
		}
		t.Logf("%s: lease renewed after %s", what, time.Since(began).Round(time.Millisecond))
	}
	renewed("all three up")

	n3 := r.Node(2)
	if err := n3.Kill(); err != nil {
		t.Fatal(err)
	}
	renewed("node 3 killed")
	if got, err := s.AcquireSlot(ctx, 4, "gw-b", time.Minute); err != nil || got == slot {
		t.Fatalf("node 3 killed: another owner's slot: %d, %v", got, err)
	}
	began := time.Now()
	if err := n3.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("node 3 back after %s", time.Since(began).Round(time.Millisecond))
	renewed("node 3 restarted")

	n1 := r.Node(0)
	if err := n1.Stop(); err != nil {
		t.Fatal(err)
	}
	renewed("node 1 stopped")
	if err := n1.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	renewed("node 1 restarted")
}
