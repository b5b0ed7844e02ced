//go:build integration

package integration

import (
	"context"
	"io"
	"os"
	"sync"
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
	return beginCQLRing(t, n)()
}

// beginCQLRing is startCQLRing in the background, so that the ring's
// start overlaps another server's: the function it returns waits for the
// ring (and fails t if it did not start).
func beginCQLRing(t *testing.T, n int) func() *realcql.Ring {
	t.Helper()
	skipWithContainers(t)
	dir := t.TempDir()
	began := time.Now()
	var (
		r    *realcql.Ring
		err  error
		took time.Duration
		done = make(chan struct{})
	)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), cqlStartTimeout)
	go func() {
		defer close(done)
		defer cancel()
		r, err = realcql.StartRing(ctx, dir, n, func(int) io.Writer {
			if os.Getenv("SHOAL_TEST_DEBUG") != "" {
				return os.Stderr
			}
			return nil
		}, realcql.Options{MaxHeapMiB: ringHeapMiB})
		took = time.Since(began)
	}()
	t.Cleanup(func() {
		<-done
		if r != nil {
			if err := r.Stop(); err != nil {
				t.Errorf("stop the cassandra ring: %v", err)
			}
		}
	})
	return func() *realcql.Ring {
		t.Helper()
		<-done
		if err != nil {
			t.Fatalf("start a cassandra ring of %d: %v", n, err)
		}
		t.Logf("cassandra ring of %d at %v ready after %s", n, r.Hosts(), took.Round(time.Millisecond))
		return r
	}
}

// TestCassandraRing opens stores of one new keyspace from several
// processes' worth of sessions at once, each first given another node (as
// the roles of a cluster starting together do), then runs the gateway slot
// leases (lightweight transactions at SERIAL, writes and reads at QUORUM)
// on the keyspace of three replicas while one node is killed, restarted,
// then stopped: every operation succeeds with one node of three down.
func TestCassandraRing(t *testing.T) {
	r := startCQLRing(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	const opening = 6
	stores := make([]*cqlstore.Store, opening)
	errs := make([]error, opening)
	var wg sync.WaitGroup
	for i := range opening {
		cfg := cqlstore.DefaultConfig()
		hosts := r.Hosts()
		cfg.Hosts = append(hosts[i%len(hosts):], hosts[:i%len(hosts)]...)
		cfg.Keyspace = "ring_leases"
		cfg.ReplicationFactor = 3
		cfg.Timeout = 10 * time.Second
		wg.Go(func() {
			stores[i], errs[i] = cqlstore.Open(ctx, cfg, testlog.New(t))
			if errs[i] == nil {
				_, errs[i] = stores[i].AppliedMigrations(ctx)
			}
		})
	}
	wg.Wait()
	for i, st := range stores {
		if st != nil {
			defer st.Close() //nolint:errcheck // Close has no error to report
		}
		if errs[i] != nil {
			t.Errorf("store %d (first host %s), opened with %d others at once: %v", i, r.Hosts()[i%r.Len()], opening-1, errs[i])
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	s := stores[0]
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
	// A request the driver had sent the dead node waits out its timeout:
	// a gateway retries as this does.
	began := time.Now()
	eventually.OK(t, 60*time.Second, func() string {
		got, err := s.AcquireSlot(ctx, 4, "gw-b", time.Minute)
		switch {
		case err != nil:
			return err.Error()
		case got == slot:
			t.Fatalf("node 3 killed: gw-b was given gw-a's slot %d", slot)
		}
		return ""
	})
	t.Logf("node 3 killed: another owner's slot acquired after %s", time.Since(began).Round(time.Millisecond))
	began = time.Now()
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
