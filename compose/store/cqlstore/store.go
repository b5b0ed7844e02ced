package cqlstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocql/gocql"

	"github.com/shoal-mqtt/shoal/schemas/cql"
)

// Store is an open CQL view store: it implements routersvc.Store
// (router.go), sessionsvc.Store (session.go) and the gateway slot leases
// (lease.go). It is safe for concurrent use.
type Store struct {
	cfg     Config
	log     *slog.Logger
	session *gocql.Session
	q       statements
	stamps  stamps
	// schemaHost is the host id schema changes go to (pickSchemaHost).
	schemaHost string

	shardBatches atomic.Uint64
	shardSplits  atomic.Uint64

	closeOnce sync.Once
}

// Stats are counters of what the store wrote since Open.
type Stats struct {
	// ShardBatches counts the unlogged batches ApplyShard wrote.
	ShardBatches uint64
	// ShardSplits counts the ApplyShard calls written as more than one
	// batch (bigger than cql.max_batch_bytes).
	ShardSplits uint64
}

// Open connects to the cluster, creates the keyspace when it is missing
// (SimpleStrategy, cfg.ReplicationFactor), applies the migrations of
// schemas/cql that it lacks and returns the store. ctx bounds all of it.
func Open(ctx context.Context, cfg Config, log *slog.Logger) (*Store, error) {
	return open(ctx, cfg, false, log)
}

// ErrNoKeyspace is wrapped by OpenExisting's error when the keyspace does
// not exist.
var ErrNoKeyspace = errors.New("keyspace does not exist")

// OpenExisting is Open for a keyspace that must exist already (a tool
// reading the live views, `shoal views rebuild --verify`): it does not
// create a missing keyspace but fails with ErrNoKeyspace.
func OpenExisting(ctx context.Context, cfg Config, log *slog.Logger) (*Store, error) {
	return open(ctx, cfg, true, log)
}

func open(ctx context.Context, cfg Config, mustExist bool, log *slog.Logger) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("open cql store: %w", err)
	}
	port, _ := hostsPort(cfg.Hosts) // checked by Validate
	if port == 0 {
		port = 9042
	}
	cluster := gocql.NewCluster(cfg.Hosts...)
	cluster.Port = port
	// Version 4: spoken by Cassandra 3 to 5 and by every ScyllaDB.
	cluster.ProtoVersion = 4
	cluster.Consistency, _ = consistency(cfg.Consistency) // checked by Validate
	cluster.SerialConsistency = cfg.serial()
	cluster.Timeout = cfg.Timeout
	cluster.WriteTimeout = cfg.Timeout
	cluster.ReadTimeout = cfg.Timeout
	cluster.ConnectTimeout = cfg.ConnectTimeout
	cluster.Logger = driverLogger{log: log}
	cluster.QueryObserver = slowLogger{log: log}
	cluster.BatchObserver = slowLogger{log: log}
	if cfg.LocalDC != "" {
		cluster.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(gocql.DCAwareRoundRobinPolicy(cfg.LocalDC))
	} else {
		cluster.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(gocql.RoundRobinHostPolicy())
	}
	if cfg.Username != "" {
		password, err := cfg.password()
		if err != nil {
			return nil, err
		}
		cluster.Authenticator = gocql.PasswordAuthenticator{Username: cfg.Username, Password: password}
	}
	session, err := connect(ctx, cluster)
	if err != nil {
		return nil, fmt.Errorf("open cql store %v: %w", cfg.Hosts, err)
	}
	s := &Store{
		cfg:     cfg,
		log:     log,
		session: session,
		q:       newStatements(cfg.Keyspace),
		stamps:  stamps{now: time.Now, last: make(map[stampKey]int64)},
	}
	if mustExist {
		if err := s.keyspaceExists(ctx); err != nil {
			session.Close()
			return nil, fmt.Errorf("open cql store %v: keyspace %s: %w", cfg.Hosts, cfg.Keyspace, err)
		}
	}
	if err := s.migrate(ctx); err != nil {
		session.Close()
		return nil, fmt.Errorf("open cql store %v: keyspace %s: %w", cfg.Hosts, cfg.Keyspace, err)
	}
	log.Info("cql store open", "hosts", cfg.Hosts, "keyspace", cfg.Keyspace, "consistency", cfg.Consistency)
	return s, nil
}

// connect creates the driver's session, giving up when ctx ends (a
// session created after that is closed).
func connect(ctx context.Context, cluster *gocql.ClusterConfig) (*gocql.Session, error) {
	type result struct {
		s   *gocql.Session
		err error
	}
	ch := make(chan result, 1)
	go func() {
		s, err := cluster.CreateSession()
		ch <- result{s, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("connect: %w", r.err)
		}
		return r.s, nil
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.s != nil {
				r.s.Close()
			}
		}()
		return nil, fmt.Errorf("connect: %w", ctx.Err())
	}
}

// Close closes the connections. The store must not be used after Close;
// later calls do nothing.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.session.Close()
		s.log.Info("cql store closed", "keyspace", s.cfg.Keyspace)
	})
	return nil
}

// Keyspace returns the keyspace the store uses.
func (s *Store) Keyspace() string { return s.cfg.Keyspace }

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	return Stats{ShardBatches: s.shardBatches.Load(), ShardSplits: s.shardSplits.Load()}
}

// statements are the store's CQL, rendered for its keyspace once.
type statements struct {
	shardSelect, shardStamp, shardUpsert, shardDelete, shardOffset string
	sessSelect, sessGet, sessStamp, sessUpsert, sessOffset         string
	slotsSelect, slotRead, slotClaim, slotClaimRecord              string
	slotRenew, slotRelease                                         string
	clockNow                                                       string
	createKeyspace, migrationsSelect, migrationInsert              string
	lockTake, lockRelease                                          string
}

func newStatements(keyspace string) statements {
	r := func(s string) string { return cqlschema.Render(s, keyspace) }
	return statements{
		shardSelect: r(`SELECT kind, tenant, k1, k2, k3, value, applied_offset, writetime(value), writetime(applied_offset)
			FROM ${keyspace}.router_shard WHERE partition = ?`),
		shardStamp:  r(`SELECT writetime(applied_offset) FROM ${keyspace}.router_shard WHERE partition = ? LIMIT 1`),
		shardUpsert: r(`INSERT INTO ${keyspace}.router_shard (partition, kind, tenant, k1, k2, k3, value) VALUES (?, ?, ?, ?, ?, ?, ?)`),
		shardDelete: r(`DELETE FROM ${keyspace}.router_shard WHERE partition = ? AND kind = ? AND tenant = ? AND k1 = ? AND k2 = ? AND k3 = ?`),
		shardOffset: r(`UPDATE ${keyspace}.router_shard SET applied_offset = ? WHERE partition = ?`),

		sessSelect: r(`SELECT tenant, client_id, row, committed_offset, writetime(row), writetime(committed_offset)
			FROM ${keyspace}.sessions WHERE partition = ?`),
		sessGet:    r(`SELECT row FROM ${keyspace}.sessions WHERE partition = ? AND tenant = ? AND client_id = ?`),
		sessStamp:  r(`SELECT writetime(committed_offset) FROM ${keyspace}.sessions WHERE partition = ? LIMIT 1`),
		sessUpsert: r(`INSERT INTO ${keyspace}.sessions (partition, tenant, client_id, row, generation, online) VALUES (?, ?, ?, ?, ?, ?)`),
		sessOffset: r(`UPDATE ${keyspace}.sessions SET committed_offset = ? WHERE partition = ?`),

		slotsSelect:     r(`SELECT slot, owner, last_owner FROM ${keyspace}.gateway_slots`),
		slotRead:        r(`SELECT owner, last_owner FROM ${keyspace}.gateway_slots WHERE slot = ?`),
		slotClaim:       r(`UPDATE ${keyspace}.gateway_slots USING TTL ? SET owner = ? WHERE slot = ? IF owner = null`),
		slotClaimRecord: r(`UPDATE ${keyspace}.gateway_slots SET last_owner = ?, claimed_at = ? WHERE slot = ?`),
		slotRenew:       r(`UPDATE ${keyspace}.gateway_slots USING TTL ? SET owner = ? WHERE slot = ? IF owner = ?`),
		slotRelease:     r(`DELETE owner FROM ${keyspace}.gateway_slots WHERE slot = ? IF owner = ?`),
		clockNow:        `SELECT toUnixTimestamp(now()) FROM system.local`,

		createKeyspace:   `CREATE KEYSPACE IF NOT EXISTS ` + keyspace + ` WITH replication = {'class': 'SimpleStrategy', 'replication_factor': %d}`,
		migrationsSelect: r(`SELECT version, name, checksum, applied_at FROM ${keyspace}.schema_migrations`),
		migrationInsert:  r(`INSERT INTO ${keyspace}.schema_migrations (version, name, checksum, applied_at) VALUES (?, ?, ?, ?)`),
		lockTake:         r(`INSERT INTO ${keyspace}.schema_migration_lock (name, owner) VALUES ('migrations', ?) IF NOT EXISTS USING TTL ?`),
		lockRelease:      r(`DELETE FROM ${keyspace}.schema_migration_lock WHERE name = 'migrations' IF owner = ?`),
	}
}

// Write timestamps. Cassandra and ScyllaDB resolve concurrent writes of a
// cell by their timestamps (the newest wins; on a tie a deletion wins).
// Every batch of one view partition carries an explicit timestamp that is
// greater than any the store wrote or read there before, whatever the
// clock does: the current time in microseconds, or the last timestamp + 1
// when the clock is behind it. The last timestamp of a partition is
// learned from what a load reads (the writetime of every row and of the
// offset), or from the offset's writetime before the first write to a
// partition not loaded; so a later write wins over an earlier one even if
// the previous owner's clock ran ahead of ours.

// stampKey identifies one view partition: the table and the partition.
type stampKey struct {
	table     byte // 'r' router_shard, 's' sessions
	partition int32
}

// stamps hands out strictly increasing write timestamps per view
// partition.
type stamps struct {
	now  func() time.Time
	mu   sync.Mutex
	last map[stampKey]int64
}

// known reports whether k's last timestamp has been learned.
func (s *stamps) known(k stampKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.last[k]
	return ok
}

// observe records that k holds a write with timestamp ts.
func (s *stamps) observe(k stampKey, ts int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if last, ok := s.last[k]; !ok || ts > last {
		s.last[k] = ts
	}
}

// next returns a timestamp for a new write to k, greater than every one
// observed or handed out for k.
func (s *stamps) next(k stampKey) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := s.now().UnixMicro()
	if last, ok := s.last[k]; ok && ts <= last {
		ts = last + 1
	}
	s.last[k] = ts
	return ts
}

// learnStamp reads the writetime of k's offset when k's last timestamp is
// not known yet (the partition was not loaded by this store).
func (s *Store) learnStamp(ctx context.Context, k stampKey) error {
	if s.stamps.known(k) {
		return nil
	}
	stmt := s.q.shardStamp
	if k.table == 's' {
		stmt = s.q.sessStamp
	}
	var ts *int64
	err := s.session.Query(stmt, k.partition).WithContext(ctx).Scan(&ts)
	switch {
	case errors.Is(err, gocql.ErrNotFound):
		s.stamps.observe(k, 0)
	case err != nil:
		return fmt.Errorf("read the last write time: %w", err)
	case ts != nil:
		s.stamps.observe(k, *ts)
	default:
		s.stamps.observe(k, 0)
	}
	return nil
}

// driverLogger sends the driver's log lines to slog as warnings: it logs
// connection trouble and server warnings.
type driverLogger struct {
	log *slog.Logger
}

func (l driverLogger) Print(v ...any) {
	l.log.Warn(strings.TrimSpace(fmt.Sprint(v...)), "component", "gocql")
}

func (l driverLogger) Printf(format string, v ...any) {
	l.log.Warn(strings.TrimSpace(fmt.Sprintf(format, v...)), "component", "gocql")
}

func (l driverLogger) Println(v ...any) {
	l.log.Warn(strings.TrimSpace(fmt.Sprintln(v...)), "component", "gocql")
}

// slowRequest is the latency from which a request is logged, with the
// node that served it: one slow node among several is otherwise invisible
// (the driver retries elsewhere or the caller times out).
const slowRequest = 2 * time.Second

// slowLogger logs the requests (queries and batches, each attempt) that
// took slowRequest or longer, with their node and error.
type slowLogger struct {
	log *slog.Logger
}

func (l slowLogger) ObserveQuery(_ context.Context, q gocql.ObservedQuery) {
	l.observe("query", q.Statement, q.Host, q.Attempt, q.End.Sub(q.Start), q.Err)
}

func (l slowLogger) ObserveBatch(_ context.Context, b gocql.ObservedBatch) {
	stmt := ""
	if len(b.Statements) > 0 {
		stmt = b.Statements[0]
	}
	l.observe("batch", stmt, b.Host, b.Attempt, b.End.Sub(b.Start), b.Err)
}

func (l slowLogger) observe(kind, stmt string, host *gocql.HostInfo, attempt int, took time.Duration, err error) {
	if took < slowRequest {
		return
	}
	addr := ""
	if host != nil {
		addr = host.ConnectAddressAndPort()
	}
	if len(stmt) > 60 {
		stmt = stmt[:60] + "…"
	}
	l.log.Warn("slow cql request", "kind", kind, "statement", stmt, "host", addr, "attempt", attempt,
		"took", took.Round(time.Millisecond), "err", err)
}
