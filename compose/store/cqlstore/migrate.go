package cqlstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/gocql/gocql"

	"github.com/shoal-mqtt/shoal/schemas/cql"
)

// Bounds of the migration lock.
const (
	// lockTTL frees the lock of a process that died while migrating.
	lockTTL = 2 * time.Minute
	// lockPoll is the pause between two looks at the lock and the
	// applied migrations while another process holds the lock.
	lockPoll = 250 * time.Millisecond
	// lockWait bounds the wait for another process's migrations.
	lockWait = 3 * time.Minute
)

// AppliedMigration is one row of schema_migrations.
type AppliedMigration struct {
	Version   int
	Name      string
	Checksum  string
	AppliedAt time.Time
}

// migrate creates the keyspace and the bootstrap tables when they are
// missing and applies the migrations not recorded in schema_migrations,
// holding the migration lock meanwhile:
//
//  1. A missing keyspace is created (CREATE KEYSPACE IF NOT EXISTS) if
//     the cluster has at least cql.replication_factor nodes, refused
//     otherwise (ensureKeyspace); then bootstrap.cql (CREATE TABLE IF NOT
//     EXISTS): harmless when several processes do it at once.
//  2. Read schema_migrations; a recorded migration whose checksum differs
//     from the embedded one is an error (an applied migration was edited).
//     Nothing pending: done, without taking the lock.
//  3. Take the lock (INSERT … IF NOT EXISTS USING TTL, a lightweight
//     transaction). Taken by another process: wait for it, reading
//     schema_migrations again, until nothing is pending or the lock is
//     free (its holder finished or died and the TTL expired).
//  4. Holding the lock, read schema_migrations again and apply what is
//     still pending in version order, recording each migration after its
//     statements succeeded (the driver waits for schema agreement after
//     each schema change). Release the lock.
//
// Every schema change goes to one coordinator, the same for every process
// (pickSchemaHost): concurrent schema changes on different coordinators,
// which Cassandra before 5.1 resolves into two versions of a table, do not
// happen, not even for the bootstrap tables, which are created before
// there is a lock. After the bootstrap statements, and when another
// process applied the migrations, it waits for schema agreement before
// reading the tables. Only one process migrates at a time; and since every
// statement is idempotent, a process that dies halfway is harmless: the
// next one runs the unrecorded migration again.
func (s *Store) migrate(ctx context.Context) error {
	s.schemaHost = s.pickSchemaHost()
	if err := s.ensureKeyspace(ctx); err != nil {
		return err
	}
	boot, err := cqlschema.Bootstrap()
	if err != nil {
		return err
	}
	for _, stmt := range boot {
		if err := s.exec(ctx, cqlschema.Render(stmt, s.cfg.Keyspace)); err != nil {
			return fmt.Errorf("bootstrap: %w", err)
		}
	}
	// A CREATE … IF NOT EXISTS that found the table changed nothing, so
	// the driver did not wait for the other nodes to know the table;
	// reading it at QUORUM before they do fails (INCOMPATIBLE_SCHEMA).
	if err := s.awaitSchema(ctx); err != nil {
		return err
	}
	known, err := cqlschema.Migrations()
	if err != nil {
		return err
	}
	pending, err := s.pending(ctx, known)
	if err != nil || len(pending) == 0 {
		return err
	}

	owner, err := lockOwner()
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, lockWait)
	defer cancel()
	for {
		took, holder, err := s.takeLock(wctx, owner)
		if err != nil {
			return fmt.Errorf("take the migration lock: %w", err)
		}
		if took {
			break
		}
		s.log.Info("waiting for another process's schema migrations", "keyspace", s.cfg.Keyspace, "holder", holder)
		if err := sleep(wctx, lockPoll); err != nil {
			return fmt.Errorf("wait for the migrations of %s: %w", holder, err)
		}
		if pending, err = s.pending(wctx, known); err != nil {
			return err
		}
		if len(pending) == 0 {
			return s.awaitSchema(wctx)
		}
	}
	err = s.applyPending(ctx, known)
	// Released even when ctx has ended: the lock would block others for
	// its TTL.
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.Timeout)
	defer rcancel()
	return errors.Join(err, s.releaseLock(rctx, owner))
}

// ensureKeyspace creates the keyspace (SimpleStrategy,
// cql.replication_factor) when it is missing, unless the factor exceeds
// the nodes of the cluster: such a keyspace could never serve a QUORUM
// read or write, nor a lightweight transaction (they need a majority of
// replicas that do not exist), and Shoal never alters a keyspace once it
// exists. An existing keyspace is used as it is; one whose SimpleStrategy
// factor exceeds the nodes is reported, with the statement that fixes it.
func (s *Store) ensureKeyspace(ctx context.Context) error {
	nodes := s.ringSize()
	var replication map[string]string
	err := s.session.Query(`SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = ?`, s.cfg.Keyspace).
		WithContext(ctx).Scan(&replication)
	switch {
	case err == nil:
		if rf, ok := simpleFactor(replication); ok && nodes > 0 && rf > nodes {
			s.log.Warn("the keyspace has more replicas than the cluster has nodes; shoal does not alter an existing keyspace",
				"keyspace", s.cfg.Keyspace, "replication_factor", rf, "nodes", nodes,
				"fix", fmt.Sprintf("ALTER KEYSPACE %s WITH replication = {'class': 'SimpleStrategy', 'replication_factor': %d}", s.cfg.Keyspace, nodes))
		}
		return nil
	case !errors.Is(err, gocql.ErrNotFound):
		return fmt.Errorf("look the keyspace up: %w", err)
	}
	if err := checkReplication(s.cfg.ReplicationFactor, nodes); err != nil {
		return fmt.Errorf("create keyspace: %w", err)
	}
	if err := s.exec(ctx, fmt.Sprintf(s.q.createKeyspace, s.cfg.ReplicationFactor)); err != nil {
		return fmt.Errorf("create keyspace: %w", err)
	}
	s.log.Info("keyspace created", "keyspace", s.cfg.Keyspace, "replication_factor", s.cfg.ReplicationFactor, "nodes", nodes)
	return nil
}

// ringSize returns how many nodes the driver knows in the cluster's ring:
// system.local and system.peers of the node it connected to, kept up to
// date by the cluster's events. Nodes that are down count: a keyspace of
// three replicas on three nodes, one of them down for now, is right.
func (s *Store) ringSize() int {
	return len(s.session.GetHosts())
}

// checkReplication refuses a keyspace of rf replicas on a cluster of
// nodes nodes (0: unknown, allowed), naming the key and what to set.
func checkReplication(rf, nodes int) error {
	if nodes < 1 || rf <= nodes {
		return nil
	}
	return fmt.Errorf("cql.replication_factor is %d, but the cluster has %d %s: a keyspace with more replicas than nodes "+
		"cannot serve QUORUM reads and writes or lightweight transactions, and shoal never alters a keyspace once it exists; "+
		"set cql.replication_factor (--cql-replication-factor) to at most %d (1 for a single node), or start shoal once the cluster has %d nodes",
		rf, nodes, plural(nodes, "node", "nodes"), nodes, rf)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// simpleFactor returns the replication factor of a SimpleStrategy
// keyspace's replication map (system_schema.keyspaces.replication), and
// false for any other strategy.
func simpleFactor(replication map[string]string) (int, bool) {
	if c := replication["class"]; c != "SimpleStrategy" && c != "org.apache.cassandra.locator.SimpleStrategy" {
		return 0, false
	}
	rf, err := strconv.Atoi(replication["replication_factor"])
	if err != nil {
		return 0, false
	}
	return rf, true
}

// applyPending applies the migrations still pending; the caller holds the
// lock.
func (s *Store) applyPending(ctx context.Context, known []cqlschema.Migration) error {
	pending, err := s.pending(ctx, known)
	if err != nil {
		return err
	}
	for _, m := range pending {
		began := time.Now()
		for i, stmt := range m.Statements {
			if err := s.exec(ctx, cqlschema.Render(stmt, s.cfg.Keyspace)); err != nil {
				return fmt.Errorf("migration %s, statement %d: %w", m.Name, i+1, err)
			}
		}
		err := s.session.Query(s.q.migrationInsert, m.Version, m.Name, m.Checksum, time.Now()).WithContext(ctx).Exec()
		if err != nil {
			return fmt.Errorf("migration %s: record it: %w", m.Name, err)
		}
		s.log.Info("schema migration applied", "keyspace", s.cfg.Keyspace, "migration", m.Name,
			"took", time.Since(began).Round(time.Millisecond))
	}
	return nil
}

// pending returns the migrations of known not recorded as applied.
func (s *Store) pending(ctx context.Context, known []cqlschema.Migration) ([]cqlschema.Migration, error) {
	applied, err := s.AppliedMigrations(ctx)
	if err != nil {
		return nil, err
	}
	return pendingMigrations(known, applied)
}

// pendingMigrations compares the embedded migrations with the recorded
// ones: it returns those not applied, or an error if a recorded one was
// changed since. Migrations recorded but unknown (written by a newer
// version of Shoal) are left alone.
func pendingMigrations(known []cqlschema.Migration, applied []AppliedMigration) ([]cqlschema.Migration, error) {
	done := make(map[int]AppliedMigration, len(applied))
	for _, a := range applied {
		done[a.Version] = a
	}
	var pending []cqlschema.Migration
	for _, m := range known {
		a, ok := done[m.Version]
		if !ok {
			pending = append(pending, m)
			continue
		}
		if a.Checksum != m.Checksum {
			return nil, fmt.Errorf("migration %s was applied (as %s, %s) with checksum %.12s…, but its statements now have checksum %.12s…: an applied migration must not change; write a new one",
				m.Name, a.Name, a.AppliedAt.UTC().Format(time.RFC3339), a.Checksum, m.Checksum)
		}
	}
	return pending, nil
}

// AppliedMigrations returns the rows of schema_migrations in version
// order.
func (s *Store) AppliedMigrations(ctx context.Context) ([]AppliedMigration, error) {
	iter := s.session.Query(s.q.migrationsSelect).WithContext(ctx).Iter()
	var (
		out []AppliedMigration
		a   AppliedMigration
	)
	for iter.Scan(&a.Version, &a.Name, &a.Checksum, &a.AppliedAt) {
		out = append(out, a)
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", err)
	}
	slices.SortFunc(out, func(a, b AppliedMigration) int { return a.Version - b.Version })
	return out, nil
}

// takeLock tries to take the migration lock for owner. It reports whether
// it did and, if not, who holds it.
func (s *Store) takeLock(ctx context.Context, owner string) (bool, string, error) {
	q := s.session.Query(s.q.lockTake, owner, int(lockTTL/time.Second)).WithContext(ctx)
	m := make(map[string]any)
	applied, err := q.MapScanCAS(m)
	if err != nil {
		// The outcome of a lightweight transaction that timed out is
		// unknown: read the lock serially to learn it.
		holder, rerr := s.lockHolder(ctx)
		if rerr != nil {
			return false, "", errors.Join(err, rerr)
		}
		return holder == owner, holder, nil
	}
	holder, _ := m["owner"].(string)
	return applied, holder, nil
}

// lockHolder reads the lock's owner with SERIAL consistency ("" when free).
func (s *Store) lockHolder(ctx context.Context) (string, error) {
	var holder string
	stmt := cqlschema.Render(`SELECT owner FROM ${keyspace}.schema_migration_lock WHERE name = 'migrations'`, s.cfg.Keyspace)
	err := s.session.Query(stmt).Consistency(s.cfg.serial()).WithContext(ctx).Scan(&holder)
	if errors.Is(err, gocql.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the migration lock: %w", err)
	}
	return holder, nil
}

// releaseLock releases the lock if owner holds it.
func (s *Store) releaseLock(ctx context.Context, owner string) error {
	if _, err := s.session.Query(s.q.lockRelease, owner).WithContext(ctx).MapScanCAS(make(map[string]any)); err != nil {
		return fmt.Errorf("release the migration lock (it expires in %s): %w", lockTTL, err)
	}
	return nil
}

// exec runs one schema change on the schema host (the driver waits for
// schema agreement after a statement that changed the schema).
func (s *Store) exec(ctx context.Context, stmt string) error {
	if err := s.session.Query(stmt).SetHostID(s.schemaHost).WithContext(ctx).Exec(); err != nil {
		return fmt.Errorf("%.60s… (on host %s): %w", stmt, s.schemaHost, err)
	}
	return nil
}

// pickSchemaHost returns the host every process sends its schema changes
// to: the live host with the lowest host id ("" when the driver knows
// none: the driver's own choice). Cassandra before 5.1 orders no schema
// changes across nodes: two processes starting together that create one
// table on two coordinators create two tables of that name with two
// different ids, and the nodes refuse each other's reads and writes of it
// (INCOMPATIBLE_SCHEMA). On one coordinator, the second CREATE … IF NOT
// EXISTS sees the first. (ScyllaDB orders schema changes through Raft
// since 5.2; one coordinator costs it nothing.)
func (s *Store) pickSchemaHost() string {
	best := ""
	for _, h := range s.session.GetHosts() {
		if id := h.HostID(); id != "" && h.IsUp() && (best == "" || id < best) {
			best = id
		}
	}
	return best
}

// awaitSchema waits until the live nodes agree on the schema.
func (s *Store) awaitSchema(ctx context.Context) error {
	if err := s.session.AwaitSchemaAgreement(ctx); err != nil {
		return fmt.Errorf("wait for the nodes to agree on the schema: %w", err)
	}
	return nil
}

// lockOwner returns a name for this process in the migration lock: host,
// pid and a random part (two stores of one process are two owners).
func lockOwner() (string, error) {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("lock owner: %w", err)
	}
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:])), nil
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
