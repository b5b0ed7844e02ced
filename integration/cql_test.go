//go:build integration

package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"github.com/shoal-mqtt/shoal/compose/store/cqlstore"
	"github.com/shoal-mqtt/shoal/gateway"
	"github.com/shoal-mqtt/shoal/integration/servers"
	"github.com/shoal-mqtt/shoal/internal/localserver/realcql"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
	"github.com/shoal-mqtt/shoal/internal/testutil/testlog"
	routersvc "github.com/shoal-mqtt/shoal/router-svc"
	routerstoretest "github.com/shoal-mqtt/shoal/router-svc/storetest"
	"github.com/shoal-mqtt/shoal/schemas/cql"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
	sessionsvc "github.com/shoal-mqtt/shoal/session-svc"
	sessionstoretest "github.com/shoal-mqtt/shoal/session-svc/storetest"
)

// These tests run the CQL view store (compose/store/cqlstore) against a
// real Apache Cassandra 5 node (realcql), one per test binary, each test
// in a keyspace of its own: the conformance suites of the router's and the
// session service's stores, the batch size limits, the gateway slot leases
// and the migrations.

// Bounds of the waits.
const (
	// cqlStartTimeout bounds starting the node, including fetching the
	// jars on a machine that has none cached.
	cqlStartTimeout = 5 * time.Minute
	// cqlTestTimeout bounds each test's own waits.
	cqlTestTimeout = 2 * time.Minute
	// cqlSplitBytes is cql.max_batch_bytes for the conformance suites: the
	// LargeBatch subtest (5000 subscriptions, about 500 kB) is then
	// written as several batches.
	cqlSplitBytes = 64 << 10
)

// cqlServer is a running one-node CQL database: Cassandra as a local
// process (*realcql.Node) or ScyllaDB in a container
// (*servers.ScyllaContainer).
type cqlServer interface {
	Hosts() []string
	Stop() error
}

// sharedCQL is the node the tests of this binary share, started on first
// use and stopped after the last test (atExit).
var sharedCQL struct {
	once sync.Once
	node cqlServer
	err  error
	// keyspaces numbers the tests' keyspaces.
	keyspaces atomic.Int64
}

// cqlNode returns the shared node, starting it on first use.
func cqlNode(t *testing.T) cqlServer {
	t.Helper()
	mode := serverMode(t)
	sharedCQL.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cqlStartTimeout)
		defer cancel()
		if mode == servers.Containers {
			image := imageFrom("SHOAL_IT_SCYLLA_IMAGE", servers.ScyllaImage)
			began := time.Now()
			node, err := servers.StartScylla(ctx, image)
			if err != nil {
				sharedCQL.err = err
				return
			}
			fmt.Fprintf(os.Stderr, "integration: scylladb container %s at %v answered CQL after %s\n",
				image, node.Hosts(), time.Since(began).Round(time.Millisecond))
			sharedCQL.node = node
			atExit(func() {
				if err := node.Stop(); err != nil {
					fmt.Fprintf(os.Stderr, "stop the shared scylladb: %v\n", err)
				}
			})
			return
		}
		dir, err := os.MkdirTemp("", "shoal-it-cql-")
		if err != nil {
			sharedCQL.err = err
			return
		}
		var logw io.Writer // the node's own output.log in dir is enough …
		if os.Getenv("SHOAL_TEST_DEBUG") != "" {
			logw = os.Stderr // … unless asked for
		}
		node, err := realcql.Start(ctx, dir, logw)
		if err != nil {
			sharedCQL.err = errors.Join(err, os.RemoveAll(dir))
			return
		}
		fmt.Fprintf(os.Stderr, "integration: cassandra %s at %v answered CQL after %s\n",
			node.ReleaseVersion(), node.Hosts(), node.StartupTime().Round(time.Millisecond))
		sharedCQL.node = node
		atExit(func() {
			if err := errors.Join(node.Stop(), os.RemoveAll(dir)); err != nil {
				fmt.Fprintf(os.Stderr, "stop the shared cassandra: %v\n", err)
			}
		})
	})
	if sharedCQL.err != nil {
		t.Fatalf("start the shared cql database: %v", sharedCQL.err)
	}
	return sharedCQL.node
}

// cqlConfig returns a store configuration for a new keyspace named after
// the test.
func cqlConfig(t *testing.T) cqlstore.Config {
	t.Helper()
	cfg := cqlstore.DefaultConfig()
	cfg.Hosts = cqlNode(t).Hosts()
	cfg.Keyspace = testKeyspace(t)
	cfg.ReplicationFactor = 1
	cfg.Timeout = 20 * time.Second
	return cfg
}

// testKeyspace returns a new keyspace name, made of the test's name.
func testKeyspace(t *testing.T) string {
	var b strings.Builder
	for _, r := range strings.ToLower(t.Name()) {
		if r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)) && b.Len() < 36 {
			b.WriteRune(r)
		}
	}
	return fmt.Sprintf("t%s_%d", b.String(), sharedCQL.keyspaces.Add(1))
}

// openCQL opens a store on cfg, closed when the test ends.
func openCQL(t *testing.T, cfg cqlstore.Config) *cqlstore.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), cqlTestTimeout)
	defer cancel()
	s, err := cqlstore.Open(ctx, cfg, testlog.New(t))
	if err != nil {
		t.Fatalf("open the cql store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() }) // Close has no error to report
	return s
}

// reopenCQL closes s and opens its keyspace again, as a restart would.
func reopenCQL(t *testing.T, s *cqlstore.Store, cfg cqlstore.Config) *cqlstore.Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return openCQL(t, cfg)
}

// storeRecorder keeps the stores a conformance suite opened, by subtest.
type storeRecorder struct {
	mu     sync.Mutex
	stores map[string][]*cqlstore.Store
	cfgs   map[*cqlstore.Store]cqlstore.Config
}

func (r *storeRecorder) open(t *testing.T, cfg cqlstore.Config) *cqlstore.Store {
	s := openCQL(t, cfg)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stores == nil {
		r.stores = make(map[string][]*cqlstore.Store)
		r.cfgs = make(map[*cqlstore.Store]cqlstore.Config)
	}
	r.stores[t.Name()] = append(r.stores[t.Name()], s)
	r.cfgs[s] = cfg
	return s
}

func (r *storeRecorder) reopen(t *testing.T, s *cqlstore.Store) *cqlstore.Store {
	r.mu.Lock()
	cfg, ok := r.cfgs[s]
	r.mu.Unlock()
	if !ok {
		t.Fatalf("reopen: a store this harness did not open")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return r.open(t, cfg)
}

func (r *storeRecorder) stats(name string) cqlstore.Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	var sum cqlstore.Stats
	for _, s := range r.stores[name] {
		st := s.Stats()
		sum.ShardBatches += st.ShardBatches
		sum.ShardSplits += st.ShardSplits
	}
	return sum
}

func TestCQLRouterStoreConformance(t *testing.T) {
	var rec storeRecorder
	routerstoretest.Run(t, routerstoretest.Harness{
		Open: func(t *testing.T) routersvc.Store {
			cfg := cqlConfig(t)
			cfg.MaxBatchBytes = cqlSplitBytes
			return rec.open(t, cfg)
		},
		Reopen: func(t *testing.T, s routersvc.Store) routersvc.Store {
			cs, ok := s.(*cqlstore.Store)
			if !ok {
				t.Fatalf("store is a %T", s)
			}
			return rec.reopen(t, cs)
		},
	})
	// LargeBatch went through the split path: several batches, the offset
	// in the last.
	st := rec.stats(t.Name() + "/LargeBatch")
	if st.ShardSplits != 1 || st.ShardBatches < 2 {
		t.Errorf("LargeBatch: %d split applies in %d batches, want 1 split into several batches", st.ShardSplits, st.ShardBatches)
	}
	if st := rec.stats(t.Name() + "/RoundTrip"); st.ShardSplits != 0 || st.ShardBatches != 1 {
		t.Errorf("RoundTrip: %d split applies in %d batches, want one batch", st.ShardSplits, st.ShardBatches)
	}
}

func TestCQLSessionStoreConformance(t *testing.T) {
	var rec storeRecorder
	sessionstoretest.Run(t, sessionstoretest.Harness{
		Open: func(t *testing.T) sessionsvc.Store { return rec.open(t, cqlConfig(t)) },
		Reopen: func(t *testing.T, s sessionsvc.Store) sessionsvc.Store {
			cs, ok := s.(*cqlstore.Store)
			if !ok {
				t.Fatalf("store is a %T", s)
			}
			return rec.reopen(t, cs)
		},
	})
}

// TestCQLStoreBatchAboveServerLimit writes, with the default
// configuration, one router batch of 20 MiB: above what Cassandra accepts
// in one request or mutation (16 MiB by default). The store splits it and
// everything is stored.
func TestCQLStoreBatchAboveServerLimit(t *testing.T) {
	cfg := cqlConfig(t)
	s := openCQL(t, cfg)
	payload := strings.Repeat("p", 1<<20)
	m := &routersvc.Mutations{Offset: 77}
	var rets []*eventspb.Envelope
	for i := range 20 {
		r := routerstoretest.Retained("t", fmt.Sprintf("big/%d", i), payload)
		rets = append(rets, r)
		m.Retained = append(m.Retained, routersvc.RetainedMutation{Key: routersvc.RetainedKey{Tenant: "t", Topic: r.GetPublish().GetMessage().GetTopic()}, Publish: r})
	}
	sub := routerstoretest.Sub("t", "c", "", "big/#", 1, 1)
	m.Subscriptions = append(m.Subscriptions, routersvc.SubscriptionMutation{Subscription: sub})
	if err := s.ApplyShard(t.Context(), 3, m); err != nil {
		t.Fatalf("ApplyShard of 20 MiB: %v", err)
	}
	st := s.Stats()
	if st.ShardSplits != 1 || st.ShardBatches < 5 {
		t.Errorf("%d split applies in %d batches, want 1 split into at least 5 (20 MiB / 4 MiB)", st.ShardSplits, st.ShardBatches)
	}
	s = reopenCQL(t, s, cfg)
	snap, err := routerstoretest.Load(t.Context(), s, 3)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Offset != 77 || len(snap.Subscriptions) != 1 || len(snap.Retained) != len(rets) {
		t.Fatalf("loaded offset %d, %d subscriptions, %d retained; want 77, 1, %d", snap.Offset, len(snap.Subscriptions), len(snap.Retained), len(rets))
	}
	for _, r := range snap.Retained {
		if got := r.GetPublish().GetMessage().GetPayload(); len(got) != len(payload) {
			t.Fatalf("retained %q: payload of %d bytes, want %d", r.GetPublish().GetMessage().GetTopic(), len(got), len(payload))
		}
	}
}

// TestCQLStoreSessionCommitAboveServerLimit commits sessions whose rows
// add up to more than the server accepts in one request: the commit is
// never split (that would break its atomicity), so it fails, and nothing
// of it is stored.
func TestCQLStoreSessionCommitAboveServerLimit(t *testing.T) {
	s := openCQL(t, cqlConfig(t))
	before := &sessionsvc.Session{Tenant: "t", ClientID: "c0", Generation: 1}
	if err := s.CommitSessions(t.Context(), 0, 10, []*sessionsvc.Session{before}); err != nil {
		t.Fatal(err)
	}
	var big []*sessionsvc.Session
	for i := range 20 {
		sess := &sessionsvc.Session{Tenant: "t", ClientID: fmt.Sprintf("c%d", i), Generation: 2, ExpiryS: 60}
		sess.Inbox = append(sess.Inbox, &eventspb.InboxAppend{Message: &eventspb.Message{Topic: "q", Payload: make([]byte, 1<<20), Qos: 1}})
		big = append(big, sess)
	}
	err := s.CommitSessions(t.Context(), 0, 11, big)
	if err == nil {
		t.Fatal("CommitSessions of 20 MiB succeeded; want the server's refusal")
	}
	t.Logf("CommitSessions of 20 MiB: %v", err)
	var got []*sessionsvc.Session
	off, err := s.LoadSessions(t.Context(), 0, func(s *sessionsvc.Session) error { got = append(got, s); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if off != 10 || len(got) != 1 || !got[0].Equal(before) {
		t.Fatalf("after the refused commit: offset %d, sessions %+v; want 10 and only %+v", off, got, before)
	}
}

// TestCQLStoreTimestampsAfterReopen: writes in quick succession, and the
// first write of a new store (which did not load the shard), each win
// over the writes before them: the store's write timestamps keep
// increasing per partition, after those it reads from the database.
func TestCQLStoreTimestampsAfterReopen(t *testing.T) {
	cfg := cqlConfig(t)
	s := openCQL(t, cfg)
	a := routerstoretest.Sub("t", "c", "", "a", 1, 1)
	m := &routersvc.Mutations{Offset: 1}
	m.Subscriptions = append(m.Subscriptions, routersvc.SubscriptionMutation{Subscription: a})
	// Many applies in a row: each needs a timestamp above the last, even
	// within one microsecond.
	for off := range int64(50) {
		m.Offset = off
		m.Subscriptions[0].Delete = off%2 == 1
		if err := s.ApplyShard(t.Context(), 0, m); err != nil {
			t.Fatal(err)
		}
	}
	// Written without loading first, by a new store.
	s = reopenCQL(t, s, cfg)
	m.Offset, m.Subscriptions[0].Delete = 50, false
	if err := s.ApplyShard(t.Context(), 0, m); err != nil {
		t.Fatal(err)
	}
	snap, err := routerstoretest.Load(t.Context(), s, 0)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Offset != 50 || len(snap.Subscriptions) != 1 {
		t.Fatalf("offset %d, %d subscriptions; want 50 and the subscription", snap.Offset, len(snap.Subscriptions))
	}
}

// TestCQLMigrationsConcurrentAndTwice opens several stores on one new
// keyspace at once, then once more: each migration is applied and recorded
// exactly once, and the tables work.
func TestCQLMigrationsConcurrentAndTwice(t *testing.T) {
	cfg := cqlConfig(t)
	const n = 4
	var wg sync.WaitGroup
	stores := make([]*cqlstore.Store, n)
	errs := make([]error, n)
	ctx, cancel := context.WithTimeout(t.Context(), cqlTestTimeout)
	defer cancel()
	for i := range n {
		wg.Go(func() {
			stores[i], errs[i] = cqlstore.Open(ctx, cfg, testlog.New(t))
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Errorf("concurrent Open %d: %v", i, errs[i])
			continue
		}
		t.Cleanup(func() { _ = stores[i].Close() }) // Close has no error to report
	}
	if t.Failed() {
		t.FailNow()
	}
	known, err := cqlschema.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	applied, err := stores[0].AppliedMigrations(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	check := func(applied []cqlstore.AppliedMigration) {
		t.Helper()
		if len(applied) != len(known) {
			t.Fatalf("%d migrations recorded, want %d: %+v", len(applied), len(known), applied)
		}
		for i, m := range known {
			if a := applied[i]; a.Version != m.Version || a.Name != m.Name || a.Checksum != m.Checksum {
				t.Errorf("recorded %+v, want version %d %s checksum %s", a, m.Version, m.Name, m.Checksum)
			}
		}
	}
	check(applied)

	// Applied twice: nothing is applied again (applied_at unchanged).
	again := openCQL(t, cfg)
	applied2, err := again.AppliedMigrations(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	check(applied2)
	if !slices.EqualFunc(applied, applied2, func(a, b cqlstore.AppliedMigration) bool { return a.AppliedAt.Equal(b.AppliedAt) }) {
		t.Errorf("migrations applied again: %+v, then %+v", applied, applied2)
	}

	// The tables of every migration work, through every store.
	for i, s := range append(stores, again) {
		m := &routersvc.Mutations{Offset: int64(i)}
		m.Subscriptions = append(m.Subscriptions, routersvc.SubscriptionMutation{Subscription: routerstoretest.Sub("t", "c", "", "f", 1, 1)})
		if err := s.ApplyShard(t.Context(), int32(i), m); err != nil {
			t.Fatalf("store %d: ApplyShard: %v", i, err)
		}
		if err := s.CommitSessions(t.Context(), int32(i), int64(i), []*sessionsvc.Session{{Tenant: "t", ClientID: "c", Generation: 1}}); err != nil {
			t.Fatalf("store %d: CommitSessions: %v", i, err)
		}
		slot, err := s.AcquireSlot(t.Context(), n+1, fmt.Sprintf("gw-%d", i), time.Minute)
		if err != nil {
			t.Fatalf("store %d: AcquireSlot: %v", i, err)
		}
		if slot < 0 || slot > n {
			t.Fatalf("store %d: slot %d", i, slot)
		}
	}
}

// TestCQLKeyspaceReplicationFitsTheCluster: on the one-node cluster a
// keyspace of three replicas is not created (every QUORUM request on it
// would fail: "Cannot achieve consistency level QUORUM"): Open
// is refused, naming cql.replication_factor and the node count. The same
// keyspace then opens with a factor of 1 and serves QUORUM reads and
// writes, so the refused Open left nothing behind.
func TestCQLKeyspaceReplicationFitsTheCluster(t *testing.T) {
	cfg := cqlConfig(t)
	cfg.ReplicationFactor = 3
	ctx, cancel := context.WithTimeout(t.Context(), cqlTestTimeout)
	defer cancel()
	s, err := cqlstore.Open(ctx, cfg, testlog.New(t))
	if err == nil {
		_ = s.Close() // Close has no error to report
		t.Fatal("a keyspace of 3 replicas was created on a cluster of one node")
	}
	t.Logf("refused: %v", err)
	for _, want := range []string{"cql.replication_factor is 3", "the cluster has 1 node", "1 for a single node"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}

	cfg.ReplicationFactor = 1
	s = openCQL(t, cfg)
	sess := &sessionsvc.Session{Tenant: "t", ClientID: "c", Generation: 7}
	if err := s.CommitSessions(ctx, 0, 41, []*sessionsvc.Session{sess}); err != nil {
		t.Fatalf("CommitSessions: %v", err)
	}
	var loaded []*sessionsvc.Session
	off, err := s.LoadSessions(ctx, 0, func(s *sessionsvc.Session) error { loaded = append(loaded, s); return nil })
	if err != nil {
		t.Fatalf("LoadSessions: %v", err)
	}
	if off != 41 || len(loaded) != 1 || loaded[0].Generation != 7 {
		t.Fatalf("loaded offset %d, %d sessions, want offset 41 and the session of generation 7", off, len(loaded))
	}
}

// The store is the gateway's slot leaser.
var _ gateway.SlotLeaser = (*cqlstore.Store)(nil)

// leaseTTL is the lease of the tests that do not wait for one to expire.
const leaseTTL = time.Minute

func TestCQLLeaseContention(t *testing.T) {
	for _, tc := range []struct {
		name          string
		slots, owners int32
	}{{"OneSlot", 1, 6}, {"ThreeSlots", 3, 8}} {
		t.Run(tc.name, func(t *testing.T) {
			// Owners race through three stores (connection pools) on one
			// keyspace, as gateways in separate processes would.
			cfg := cqlConfig(t)
			stores := []*cqlstore.Store{openCQL(t, cfg), openCQL(t, cfg), openCQL(t, cfg)}
			type result struct {
				owner string
				slot  int32
				err   error
			}
			results := make([]result, tc.owners)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range tc.owners {
				wg.Go(func() {
					<-start
					owner := fmt.Sprintf("gw-%d", i)
					slot, err := stores[int(i)%len(stores)].AcquireSlot(t.Context(), tc.slots, owner, leaseTTL)
					results[i] = result{owner, slot, err}
				})
			}
			close(start)
			wg.Wait()
			holders := make(map[int32]string)
			for _, r := range results {
				switch {
				case r.err == nil:
					if prev, dup := holders[r.slot]; dup {
						t.Errorf("slot %d acquired by %s and %s", r.slot, prev, r.owner)
					}
					holders[r.slot] = r.owner
				case errors.Is(r.err, cqlstore.ErrNoFreeSlot):
				default:
					t.Errorf("%s: %v", r.owner, r.err)
				}
			}
			if len(holders) != int(tc.slots) {
				t.Fatalf("%d owners hold slots (%v), want every one of the %d slots held once", len(holders), holders, tc.slots)
			}
			// The database agrees, and only the holders can renew.
			for slot, owner := range holders {
				got, err := stores[1].SlotHolder(t.Context(), slot)
				if err != nil {
					t.Fatal(err)
				}
				if got != owner {
					t.Errorf("slot %d: serial read says %q, the winner was %q", slot, got, owner)
				}
			}
			for _, r := range results {
				for slot := range tc.slots {
					err := stores[0].RenewSlot(t.Context(), slot, r.owner, leaseTTL)
					if holders[slot] == r.owner && err != nil {
						t.Errorf("%s renews its slot %d: %v", r.owner, slot, err)
					}
					if holders[slot] != r.owner && !errors.Is(err, cqlstore.ErrSlotLost) {
						t.Errorf("%s renews slot %d of %s: got %v, want ErrSlotLost", r.owner, slot, holders[slot], err)
					}
				}
			}
		})
	}
}

func TestCQLLeaseRenewReleaseLost(t *testing.T) {
	s := openCQL(t, cqlConfig(t))
	ctx := t.Context()
	slot, err := s.AcquireSlot(ctx, 1, "a", leaseTTL)
	if err != nil || slot != 0 {
		t.Fatalf("a acquires: slot %d, %v", slot, err)
	}
	if err := s.RenewSlot(ctx, 0, "a", leaseTTL); err != nil {
		t.Fatalf("a renews: %v", err)
	}
	if _, err := s.AcquireSlot(ctx, 1, "b", leaseTTL); !errors.Is(err, cqlstore.ErrNoFreeSlot) {
		t.Fatalf("b acquires the held slot: got %v, want ErrNoFreeSlot", err)
	}
	if err := s.RenewSlot(ctx, 0, "b", leaseTTL); !errors.Is(err, cqlstore.ErrSlotLost) {
		t.Fatalf("b renews a's slot: got %v, want ErrSlotLost", err)
	}
	if err := s.ReleaseSlot(ctx, 0, "b"); !errors.Is(err, cqlstore.ErrSlotLost) {
		t.Fatalf("b releases a's slot: got %v, want ErrSlotLost", err)
	}
	if err := s.ReleaseSlot(ctx, 0, "a"); err != nil {
		t.Fatalf("a releases: %v", err)
	}
	if h, err := s.SlotHolder(ctx, 0); err != nil || h != "" {
		t.Fatalf("after the release: holder %q, %v", h, err)
	}
	if err := s.ReleaseSlot(ctx, 0, "a"); err != nil {
		t.Fatalf("a releases again: %v", err)
	}
	if slot, err := s.AcquireSlot(ctx, 1, "b", leaseTTL); err != nil || slot != 0 {
		t.Fatalf("b acquires the released slot: slot %d, %v", slot, err)
	}
	if err := s.RenewSlot(ctx, 0, "a", leaseTTL); !errors.Is(err, cqlstore.ErrSlotLost) {
		t.Fatalf("a renews after b took the slot: got %v, want ErrSlotLost", err)
	}
	if h, err := s.SlotHolder(ctx, 0); err != nil || h != "b" {
		t.Fatalf("holder %q, %v; want b", h, err)
	}

	// A gateway with a fixed slot takes it with RenewSlot: a never-claimed
	// slot is claimed; while its lease lasts nobody else gets it, after
	// the release the next one does.
	if err := s.RenewSlot(ctx, 5, "fixed", leaseTTL); err != nil {
		t.Fatalf("fixed renews never-claimed slot 5: %v", err)
	}
	if err := s.RenewSlot(ctx, 5, "other", leaseTTL); !errors.Is(err, cqlstore.ErrSlotLost) {
		t.Fatalf("other renews slot 5 of fixed: got %v, want ErrSlotLost", err)
	}
	if err := s.RenewSlot(ctx, 5, "fixed", leaseTTL); err != nil {
		t.Fatalf("fixed renews slot 5: %v", err)
	}
	if err := s.ReleaseSlot(ctx, 5, "fixed"); err != nil {
		t.Fatal(err)
	}
	if err := s.RenewSlot(ctx, 5, "other", leaseTTL); err != nil {
		t.Fatalf("other renews released slot 5: %v", err)
	}
	if h, err := s.SlotHolder(ctx, 5); err != nil || h != "other" {
		t.Fatalf("slot 5 holder %q, %v; want other", h, err)
	}
}

// TestCQLLeaseTakeBack: a restarted gateway gets the slot it held, within
// its lease or after it; a new one prefers a never-claimed slot over one
// another gateway held last.
func TestCQLLeaseTakeBack(t *testing.T) {
	cfg := cqlConfig(t)
	s := openCQL(t, cfg)
	ctx := t.Context()
	const slots = 4
	held := make(map[string]int32)
	for _, owner := range []string{"a", "b", "c"} {
		slot, err := s.AcquireSlot(ctx, slots, owner, leaseTTL)
		if err != nil {
			t.Fatalf("%s acquires: %v", owner, err)
		}
		held[owner] = slot
	}
	// a restarts (a new process, a new store) within its lease.
	s = reopenCQL(t, s, cfg)
	if slot, err := s.AcquireSlot(ctx, slots, "a", leaseTTL); err != nil || slot != held["a"] {
		t.Fatalf("a acquires again within its lease: slot %d, %v; want %d", slot, err, held["a"])
	}
	// b stops cleanly; d comes: it takes the never-claimed slot, not b's.
	if err := s.ReleaseSlot(ctx, held["b"], "b"); err != nil {
		t.Fatal(err)
	}
	d, err := s.AcquireSlot(ctx, slots, "d", leaseTTL)
	if err != nil {
		t.Fatalf("d acquires: %v", err)
	}
	if d == held["a"] || d == held["b"] || d == held["c"] {
		t.Fatalf("d got slot %d; want the one never claimed (held: %v)", d, held)
	}
	// b comes back: its slot is free again and it gets it.
	if slot, err := s.AcquireSlot(ctx, slots, "b", leaseTTL); err != nil || slot != held["b"] {
		t.Fatalf("b acquires again: slot %d, %v; want %d", slot, err, held["b"])
	}
	// Now all are held.
	if _, err := s.AcquireSlot(ctx, slots, "e", leaseTTL); !errors.Is(err, cqlstore.ErrNoFreeSlot) {
		t.Fatalf("e acquires: got %v, want ErrNoFreeSlot", err)
	}
}

// TestCQLLeaseExpired: an expired lease is taken by another owner, and
// the former holder's renewal then fails; an expired lease that nobody
// took is claimed again by the renewal.
func TestCQLLeaseExpired(t *testing.T) {
	s := openCQL(t, cqlConfig(t))
	ctx, cancel := context.WithTimeout(t.Context(), cqlTestTimeout)
	defer cancel()
	const ttl = 2 * time.Second

	// Expired, nobody took it: the holder's renewal takes it again.
	if _, err := s.AcquireSlot(ctx, 1, "a", ttl); err != nil {
		t.Fatal(err)
	}
	waitFree(t, s, 0, ttl)
	if err := s.RenewSlot(ctx, 0, "a", ttl); err != nil {
		t.Fatalf("a renews its expired, untaken lease: %v", err)
	}

	// Expired, b takes it.
	took := time.Now()
	if err := s.RenewSlot(ctx, 0, "a", ttl); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireSlot(ctx, 1, "b", ttl); !errors.Is(err, cqlstore.ErrNoFreeSlot) {
		t.Fatalf("b acquires during a's lease: got %v, want ErrNoFreeSlot", err)
	}
	var slot int32
	eventually.Before(t, ctx, "b to get the slot of a's expired lease", func() bool {
		var err error
		slot, err = s.AcquireSlot(ctx, 1, "b", leaseTTL)
		if err != nil && !errors.Is(err, cqlstore.ErrNoFreeSlot) {
			t.Fatal(err)
		}
		return err == nil
	})
	// The server counts TTLs in whole seconds from the second of the
	// write: a lease lasts between ttl-1s and ttl.
	if waited := time.Since(took); slot != 0 || waited < ttl-time.Second {
		t.Fatalf("b got slot %d after %s; want slot 0 after at least %s", slot, waited, ttl-time.Second)
	}
	if err := s.RenewSlot(ctx, 0, "a", ttl); !errors.Is(err, cqlstore.ErrSlotLost) {
		t.Fatalf("a renews after its lease expired and b took it: got %v, want ErrSlotLost", err)
	}
	if h, err := s.SlotHolder(ctx, 0); err != nil || h != "b" {
		t.Fatalf("holder %q, %v; want b", h, err)
	}
}

// waitFree polls until slot has no holder, at most 3*ttl.
func waitFree(t *testing.T, s *cqlstore.Store, slot int32, ttl time.Duration) {
	t.Helper()
	eventually.OK(t, 3*ttl, func() string {
		h, err := s.SlotHolder(t.Context(), slot)
		if err != nil {
			t.Fatal(err)
		}
		if h == "" {
			return ""
		}
		return fmt.Sprintf("slot %d still held by %q after a lease of %s", slot, h, ttl)
	})
}
