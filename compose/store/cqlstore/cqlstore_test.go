package cqlstore

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/kafka"
	routersvc "github.com/shoal-mqtt/shoal/router-svc"
	"github.com/shoal-mqtt/shoal/router-svc/storetest"
	"github.com/shoal-mqtt/shoal/schemas/cql"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
	sessionsvc "github.com/shoal-mqtt/shoal/session-svc"
)

// These tests need no server; integration/cql_test.go runs the store
// against a real Cassandra.

func validConfig() Config {
	c := DefaultConfig()
	c.Hosts = []string{"10.0.0.1", "10.0.0.2:9042", "[::1]:9042"}
	return c
}

func TestConfigValidate(t *testing.T) {
	if err := validConfig().Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for _, tc := range []struct {
		key    string
		modify func(c *Config)
	}{
		{"cql.hosts", func(c *Config) { c.Hosts = nil }},
		{"cql.hosts[1]", func(c *Config) { c.Hosts = []string{"a:9042", "b:9043"} }},
		{"cql.hosts[0]", func(c *Config) { c.Hosts = []string{":9042"} }},
		{"cql.hosts[0]", func(c *Config) { c.Hosts = []string{"a:port"} }},
		{"cql.hosts[0]", func(c *Config) { c.Hosts = []string{"a:70000"} }},
		{"cql.hosts[0]", func(c *Config) { c.Hosts = []string{"::1"} }},
		{"cql.keyspace", func(c *Config) { c.Keyspace = "" }},
		{"cql.keyspace", func(c *Config) { c.Keyspace = "1abc" }},
		{"cql.keyspace", func(c *Config) { c.Keyspace = "a-b" }},
		{"cql.keyspace", func(c *Config) { c.Keyspace = "shoal; DROP KEYSPACE x" }},
		{"cql.keyspace", func(c *Config) { c.Keyspace = strings.Repeat("k", 49) }},
		{"cql.replication_factor", func(c *Config) { c.ReplicationFactor = 0 }},
		{"cql.consistency", func(c *Config) { c.Consistency = "any" }},
		{"cql.consistency", func(c *Config) { c.Consistency = "QUORUM" }},
		{"cql.timeout", func(c *Config) { c.Timeout = 0 }},
		{"cql.connect_timeout", func(c *Config) { c.ConnectTimeout = -time.Second }},
		{"cql.max_batch_bytes", func(c *Config) { c.MaxBatchBytes = 100 }},
		{"cql.max_batch_bytes", func(c *Config) { c.MaxBatchBytes = 16 << 20 }},
		{"cql.password", func(c *Config) { c.Password = "secret" }},
		{"cql.password_file", func(c *Config) { c.PasswordFile = "/run/secret" }},
		{"cql.password_file", func(c *Config) { c.Username, c.Password, c.PasswordFile = "u", "secret", "/run/secret" }},
	} {
		c := validConfig()
		tc.modify(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.key+":") {
			t.Errorf("%+v: got %v, want an error naming %s", c, err, tc.key)
		}
	}
	c := validConfig()
	c.Keyspace, c.Consistency, c.Timeout = "", "", 0
	if err := c.Validate(); err == nil || strings.Count(err.Error(), "cql.") != 3 {
		t.Errorf("three bad keys: got %v, want three errors", err)
	}
	for _, ks := range []string{"shoal", "Shoal_2", strings.Repeat("k", 48)} {
		c := validConfig()
		c.Keyspace = ks
		if err := c.Validate(); err != nil {
			t.Errorf("keyspace %q: %v", ks, err)
		}
	}
	if p, err := hostsPort([]string{"a", "b:9142", "c:9142"}); err != nil || p != 9142 {
		t.Errorf("hostsPort: %d, %v", p, err)
	}
	if p, err := hostsPort([]string{"a", "b"}); err != nil || p != 0 {
		t.Errorf("hostsPort without ports: %d, %v", p, err)
	}
}

// TestPasswordFile: the password comes from cql.password_file without
// its trailing line break, or from cql.password; a missing file is an
// error naming the key.
func TestPasswordFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(path, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := validConfig()
	c.Username, c.PasswordFile = "shoal", path
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if p, err := c.password(); err != nil || p != "s3cret" {
		t.Fatalf("password() = %q, %v; want s3cret", p, err)
	}
	c.PasswordFile, c.Password = "", "inline"
	if p, err := c.password(); err != nil || p != "inline" {
		t.Fatalf("password() = %q, %v; want inline", p, err)
	}
	c.Password, c.PasswordFile = "", filepath.Join(t.TempDir(), "missing")
	if _, err := c.password(); err == nil || !strings.Contains(err.Error(), "cql.password_file:") {
		t.Fatalf("password() of a missing file: %v, want an error naming cql.password_file", err)
	}
}

func TestConsistencies(t *testing.T) {
	for cons, want := range map[string][2]string{
		"quorum":       {"QUORUM", "SERIAL"},
		"one":          {"ONE", "SERIAL"},
		"two":          {"TWO", "SERIAL"},
		"three":        {"THREE", "SERIAL"},
		"all":          {"ALL", "SERIAL"},
		"local_quorum": {"LOCAL_QUORUM", "LOCAL_SERIAL"},
		"local_one":    {"LOCAL_ONE", "LOCAL_SERIAL"},
	} {
		c := validConfig()
		c.Consistency = cons
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", cons, err)
		}
		level, ok := consistency(cons)
		if !ok || level.String() != want[0] || c.serial().String() != want[1] {
			t.Errorf("%s: level %v (%v), serial %v; want %s, %s", cons, level, ok, c.serial(), want[0], want[1])
		}
	}
}

func TestStatementsRendered(t *testing.T) {
	q := newStatements("ks_1")
	all := []string{
		q.shardSelect, q.shardStamp, q.shardUpsert, q.shardDelete, q.shardOffset,
		q.sessSelect, q.sessGet, q.sessStamp, q.sessUpsert, q.sessOffset,
		q.slotsSelect, q.slotRead, q.slotClaim, q.slotClaimRecord, q.slotRenew, q.slotRelease,
		q.createKeyspace, q.migrationsSelect, q.migrationInsert, q.lockTake, q.lockRelease,
	}
	for _, s := range all {
		if s == "" || strings.Contains(s, "${") || !strings.Contains(s, "ks_1") {
			t.Errorf("statement not rendered for ks_1: %q", s)
		}
	}
	if got := fmt.Sprintf(q.createKeyspace, 3); !strings.Contains(got, "'replication_factor': 3") || !strings.HasPrefix(got, "CREATE KEYSPACE IF NOT EXISTS ks_1 ") {
		t.Errorf("create keyspace: %q", got)
	}
}

func TestRouterKeys(t *testing.T) {
	sub := storetest.Sub("tenant", "client/1", "group", "a/+/#", 2, 7)
	k := subscriptionKey(&sub.SubscriptionKey)
	if k != (shardKey{kind: kindSubscription, tenant: "tenant", k1: "client/1", k2: "group", k3: "a/+/#"}) {
		t.Fatalf("subscription key %+v", k)
	}
	env := subscriptionValue(&sub)
	b, err := env.MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeSubscription(k, b)
	if err != nil {
		t.Fatal(err)
	}
	if got.SubscriptionKey != sub.SubscriptionKey || !got.Options.EqualVT(sub.Options) || !got.Route.EqualVT(sub.Route) {
		t.Fatalf("decoded %+v, want %+v", got, sub)
	}
	// The value is what pebblestore stores: the ADD that makes the
	// subscription, readable without its key.
	if env.Tenant != "tenant" || env.ClientId != "client/1" || env.GetSubscriptionChange().GetOp() != eventspb.SubscriptionChange_OP_ADD ||
		env.GetSubscriptionChange().GetFilter() != "a/+/#" || env.GetSubscriptionChange().GetShareGroup() != "group" {
		t.Fatalf("value %v", env)
	}
	if _, err := decodeSubscription(k, []byte{0xff}); err == nil {
		t.Error("decoding garbage: no error")
	}
	ret, err := storetest.Retained("t", "x/y", "p").MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeSubscription(k, ret); err == nil {
		t.Error("decoding a retained envelope as a subscription: no error")
	}
	rk := retainedKey(&routersvc.RetainedKey{Tenant: "t", Topic: "x/y"})
	if rk != (shardKey{kind: kindRetained, tenant: "t", k1: "x/y"}) {
		t.Fatalf("retained key %+v", rk)
	}
	bad := shardKey{kind: kindSubscription, tenant: "t", k1: "c", k3: "a/\xff"}
	if err := bad.validUTF8(); err == nil || !strings.Contains(err.Error(), "k3") {
		t.Errorf("invalid UTF-8 in k3: got %v", err)
	}
}

func TestShardWrites(t *testing.T) {
	m := &routersvc.Mutations{Offset: 9}
	a, b := storetest.Sub("t", "c", "", "a", 1, 1), storetest.Sub("t", "c", "g", "b", 0, 2)
	r := storetest.Retained("t", "a", "payload")
	m.Subscriptions = append(m.Subscriptions,
		routersvc.SubscriptionMutation{Subscription: a},
		routersvc.SubscriptionMutation{Subscription: routersvc.Subscription{SubscriptionKey: b.SubscriptionKey}, Delete: true})
	m.Retained = append(m.Retained,
		routersvc.RetainedMutation{Key: routersvc.RetainedKey{Tenant: "t", Topic: "a"}, Publish: r},
		routersvc.RetainedMutation{Key: routersvc.RetainedKey{Tenant: "t", Topic: "gone"}})
	ws, err := shardWrites(m)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 4 {
		t.Fatalf("%d writes, want 4", len(ws))
	}
	if ws[1].value != nil || ws[3].value != nil {
		t.Errorf("deletes carry values: %v, %v", ws[1].value, ws[3].value)
	}
	got, err := decodeSubscription(ws[0].key, ws[0].value)
	if err != nil || got.SubscriptionKey != a.SubscriptionKey {
		t.Errorf("subscription write decodes to %+v, %v", got, err)
	}
	env := &eventspb.Envelope{}
	if err := env.UnmarshalVT(ws[2].value); err != nil || !env.EqualVT(r) {
		t.Errorf("retained write decodes to %v, %v", env, err)
	}
	// The values do not share memory with each other (one buffer, cut
	// with full slice expressions).
	ws[0].value = append(ws[0].value, 1, 2, 3)
	if env := (&eventspb.Envelope{}); env.UnmarshalVT(ws[2].value) != nil || !env.EqualVT(r) {
		t.Error("appending to one value changed the next")
	}

	m.Subscriptions = append(m.Subscriptions, routersvc.SubscriptionMutation{Subscription: storetest.Sub("t\xff", "c", "", "x", 1, 1)})
	if _, err := shardWrites(m); err == nil {
		t.Error("a tenant that is not UTF-8: no error")
	}
}

func TestChunks(t *testing.T) {
	w := func(n int) rowWrite { return rowWrite{key: shardKey{k1: "k"}, value: make([]byte, n)} }
	w100 := w(100)
	size := w100.size()
	sizes := func(runs [][]rowWrite) []int {
		var out []int
		for _, r := range runs {
			out = append(out, len(r))
		}
		return out
	}
	for _, tc := range []struct {
		name            string
		writes          []rowWrite
		maxBytes, stmts int
		want            []int
	}{
		{"none", nil, 1000, 100, []int{0}},
		{"fits", []rowWrite{w(100), w(100)}, 1000, 100, []int{2}},
		{"exactly", []rowWrite{w(100), w(100)}, 2 * size, 100, []int{2}},
		{"by bytes", []rowWrite{w(100), w(100), w(100)}, 2*size + 1, 100, []int{2, 1}},
		{"oversized alone", []rowWrite{w(100), w(5000), w(100)}, 2 * size, 100, []int{1, 1, 1}},
		{"by statements", []rowWrite{w(1), w(1), w(1), w(1), w(1)}, 1 << 20, 3, []int{2, 2, 1}},
	} {
		runs := chunks(tc.writes, tc.maxBytes, tc.stmts)
		if got := sizes(runs); !slices.Equal(got, tc.want) {
			t.Errorf("%s: runs of %v, want %v", tc.name, got, tc.want)
		}
		var all []rowWrite
		for _, r := range runs {
			all = append(all, r...)
		}
		if len(all) != len(tc.writes) {
			t.Errorf("%s: %d writes in the runs, want %d, in order", tc.name, len(all), len(tc.writes))
		}
	}
}

func TestStamps(t *testing.T) {
	now := time.UnixMicro(1_000_000)
	s := stamps{now: func() time.Time { return now }, last: make(map[stampKey]int64)}
	r0, r1, s0 := stampKey{'r', 0}, stampKey{'r', 1}, stampKey{'s', 0}
	if s.known(r0) {
		t.Fatal("known before anything was observed")
	}
	// The clock stands still: timestamps still increase.
	a, b, c := s.next(r0), s.next(r0), s.next(r0)
	if a != 1_000_000 || b != a+1 || c != b+1 {
		t.Errorf("timestamps %d, %d, %d with a stopped clock", a, b, c)
	}
	// Other partitions and tables have their own sequence.
	if got := s.next(r1); got != 1_000_000 {
		t.Errorf("other partition: %d", got)
	}
	if got := s.next(s0); got != 1_000_000 {
		t.Errorf("other table: %d", got)
	}
	// A write read from the database that is ahead of the clock: the
	// next timestamp follows it.
	s.observe(r1, 5_000_000)
	if got := s.next(r1); got != 5_000_001 {
		t.Errorf("after observing a later write: %d, want 5000001", got)
	}
	// Observing an older one changes nothing; the clock going back
	// neither.
	s.observe(r1, 10)
	now = time.UnixMicro(3)
	if got := s.next(r1); got != 5_000_002 {
		t.Errorf("after the clock went back: %d", got)
	}
	// The clock ahead wins.
	now = time.UnixMicro(9_000_000)
	if got := s.next(r1); got != 9_000_000 {
		t.Errorf("clock ahead: %d", got)
	}
	if !s.known(r1) {
		t.Error("not known after writes")
	}
}

func TestSessionRows(t *testing.T) {
	in := []*sessionsvc.Session{
		{Tenant: "t", ClientID: "zero"}, // encodes to nothing: still not null
		{Tenant: "t", ClientID: "a", Generation: 3, Online: true, Route: &eventspb.Route{Slot: 2, Generation: 3}},
		{Tenant: "", ClientID: "b", Generation: 1, ExpiryS: kafka.SessionExpiryNever},
	}
	rows, size := encodeSessions(in)
	if len(rows) != len(in) {
		t.Fatalf("%d rows", len(rows))
	}
	total := 0
	for i, row := range rows {
		if row == nil {
			t.Errorf("row %d is nil (a null)", i)
		}
		total += len(row)
		got := &sessionsvc.Session{Tenant: in[i].Tenant, ClientID: in[i].ClientID}
		if err := sessionsvc.DecodeSessionRow(row, got); err != nil || !got.Equal(in[i]) {
			t.Errorf("row %d decodes to %+v, %v; want %+v", i, got, err, in[i])
		}
		if cap(row) != len(row) {
			t.Errorf("row %d: capacity %d beyond its length %d (appending would overwrite the next)", i, cap(row), len(row))
		}
	}
	if size != total {
		t.Errorf("size %d, rows add up to %d", size, total)
	}
}

func TestCandidates(t *testing.T) {
	st := func(slot int32, owner, last string) slotState { return slotState{slot: slot, owner: owner, last: last} }
	states := []slotState{
		st(0, "other", "other"), // held by another: never a candidate
		st(1, "", "other"),      // expired or released by another
		st(2, "", ""),           // never claimed
		st(3, "", "me"),         // mine before
		st(4, "me", "me"),       // mine now
		st(5, "", ""),           // never claimed
		st(6, "", "third"),      // expired or released by another
	}
	got := candidates(states, "me")
	var order []int32
	for _, c := range got {
		order = append(order, c.slot)
	}
	if len(order) != 6 || order[0] != 4 || order[1] != 3 {
		t.Fatalf("order %v: want 4 (held), 3 (held before) first, and 0 left out", order)
	}
	if !slices.Contains(order[2:4], 2) || !slices.Contains(order[2:4], 5) {
		t.Errorf("order %v: never-claimed slots 2 and 5 should come third and fourth", order)
	}
	if !slices.Contains(order[4:], 1) || !slices.Contains(order[4:], 6) {
		t.Errorf("order %v: others' free slots 1 and 6 should come last", order)
	}
	if got := candidates([]slotState{st(0, "a", "a"), st(1, "b", "b")}, "me"); len(got) != 0 {
		t.Errorf("all held by others: candidates %v", got)
	}
	// Different owners start the never-claimed slots at different places.
	free := make([]slotState, 64)
	for i := range free {
		free[i].slot = int32(i)
	}
	firsts := make(map[int32]bool)
	for i := range 8 {
		firsts[candidates(free, fmt.Sprintf("gateway-%d", i))[0].slot] = true
	}
	if len(firsts) < 4 {
		t.Errorf("8 owners start at only %d distinct slots of 64", len(firsts))
	}
}

func TestCheckLease(t *testing.T) {
	for _, tc := range []struct {
		owner string
		ttl   time.Duration
		want  int
	}{{"gw", time.Second, 1}, {"gw", 1500 * time.Millisecond, 2}, {"gw", 10 * time.Second, 10}} {
		got, err := checkLease(tc.owner, tc.ttl)
		if err != nil || got != tc.want {
			t.Errorf("checkLease(%q, %s) = %d, %v; want %d", tc.owner, tc.ttl, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		owner string
		ttl   time.Duration
	}{{"", time.Second}, {"\xff", time.Second}, {"gw", 999 * time.Millisecond}, {"gw", 0}, {"gw", maxLeaseTTL + time.Second}} {
		if _, err := checkLease(tc.owner, tc.ttl); err == nil {
			t.Errorf("checkLease(%q, %s): no error", tc.owner, tc.ttl)
		}
	}
}

func TestPendingMigrations(t *testing.T) {
	known, err := cqlschema.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(known) < 3 {
		t.Fatalf("%d migrations embedded", len(known))
	}
	rec := func(m cqlschema.Migration) AppliedMigration {
		return AppliedMigration{Version: m.Version, Name: m.Name, Checksum: m.Checksum, AppliedAt: time.Unix(1, 0)}
	}
	p, err := pendingMigrations(known, nil)
	if err != nil || len(p) != len(known) {
		t.Fatalf("fresh keyspace: %d pending, %v", len(p), err)
	}
	p, err = pendingMigrations(known, []AppliedMigration{rec(known[0])})
	if err != nil || len(p) != len(known)-1 || p[0].Version != 2 {
		t.Fatalf("first applied: pending %v, %v", p, err)
	}
	var all []AppliedMigration
	for _, m := range known {
		all = append(all, rec(m))
	}
	// A newer binary's migration is left alone.
	all = append(all, AppliedMigration{Version: 999, Name: "0999_future", Checksum: "x"})
	if p, err := pendingMigrations(known, all); err != nil || len(p) != 0 {
		t.Fatalf("all applied: pending %v, %v", p, err)
	}
	all[0].Checksum = "edited"
	if _, err := pendingMigrations(known, all); err == nil || !strings.Contains(err.Error(), known[0].Name) {
		t.Fatalf("edited migration: got %v, want an error naming %s", err, known[0].Name)
	}
}

// TestCheckReplication: a keyspace with more replicas than the cluster has
// nodes is refused, with the key, both numbers and the fix named; one that
// fits is created.
func TestCheckReplication(t *testing.T) {
	for _, tc := range []struct {
		rf, nodes int
		refused   bool
	}{
		{1, 1, false}, {3, 3, false}, {3, 5, false}, {1, 3, false},
		{DefaultReplicationFactor, 1, true}, {3, 2, true}, {2, 1, true}, {5, 4, true},
		{3, 0, false}, // the driver knows no node: nothing to judge by
	} {
		err := checkReplication(tc.rf, tc.nodes)
		if !tc.refused {
			if err != nil {
				t.Errorf("rf %d on %d nodes: %v, want it created", tc.rf, tc.nodes, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("rf %d on %d nodes: created, want it refused", tc.rf, tc.nodes)
			continue
		}
		msg := err.Error()
		nodes := fmt.Sprintf("the cluster has %d node", tc.nodes)
		for _, want := range []string{"cql.replication_factor is " + fmt.Sprint(tc.rf), nodes, fmt.Sprintf("to at most %d", tc.nodes)} {
			if !strings.Contains(msg, want) {
				t.Errorf("rf %d on %d nodes: %q does not say %q", tc.rf, tc.nodes, msg, want)
			}
		}
	}
	if msg := checkReplication(3, 1).Error(); !strings.Contains(msg, "1 node:") || !strings.Contains(msg, "1 for a single node") {
		t.Errorf("one node: %q", msg)
	}
}

func TestSimpleFactor(t *testing.T) {
	for _, tc := range []struct {
		replication map[string]string
		rf          int
		ok          bool
	}{
		{map[string]string{"class": "org.apache.cassandra.locator.SimpleStrategy", "replication_factor": "3"}, 3, true},
		{map[string]string{"class": "SimpleStrategy", "replication_factor": "1"}, 1, true},
		{map[string]string{"class": "org.apache.cassandra.locator.NetworkTopologyStrategy", "dc1": "3"}, 0, false},
		{map[string]string{"class": "org.apache.cassandra.locator.SimpleStrategy"}, 0, false},
		{nil, 0, false},
	} {
		rf, ok := simpleFactor(tc.replication)
		if rf != tc.rf || ok != tc.ok {
			t.Errorf("simpleFactor(%v) = %d, %v; want %d, %v", tc.replication, rf, ok, tc.rf, tc.ok)
		}
	}
}
