package sessionsvc

import "context"

// Store is the view store the session service needs: the sessions of each
// partition of shoal.sessions and the offset of the last record applied to
// them. Adapters: pebblestore (embedded) and cqlstore (ScyllaDB or
// Cassandra); both store a session as its row (AppendSessionRow,
// DecodeSessionRow) and pass the conformance suite in session-svc/storetest,
// the CQL one in the integration tests.
//
// The service calls the methods of one partition from one goroutine at a
// time; different partitions may be used concurrently. LoadClients is the
// exception: it may also be called from other goroutines, concurrently
// with the partition's other calls.
//
// The service holds in memory only the sessions that may still change by
// themselves or hold something (Session.dormant): an ended session lives in
// the store alone, and is read again (LoadClients) when an event of its
// client comes. So a store keeps every client that was ever seen, and the
// service's memory only the clients with a session.
type Store interface {
	// LoadSessions calls fn with every session stored for partition (in no
	// particular order; fn owns the *Session) and returns the offset
	// committed with them, or -1 when nothing was ever committed there. An
	// error from fn stops the load and is returned.
	LoadSessions(ctx context.Context, partition int32, fn func(*Session) error) (offset int64, err error)
	// LoadClients calls fn, from one goroutine at a time, with the stored
	// session of each of clients that has one (fn owns it; the state of the
	// last CommitSessions that stored it), in no particular order, and
	// returns fn's first error, which stops it. A client without a stored
	// session is left out.
	LoadClients(ctx context.Context, partition int32, clients []Client, fn func(*Session) error) error
	// CommitSessions stores the sessions, each replacing any stored session
	// of the same tenant and client id, and offset as the partition's last
	// applied offset, all or nothing and durably before it returns, unless
	// the adapter was opened to trade that for speed (pebblestore's
	// Options.NoSync, which `shoal all` sets when its embedded log does not
	// sync either): then a crash may lose the latest commits, each whole,
	// and the service consumes their records again from the stored offset.
	// It does not keep the sessions after it returns.
	CommitSessions(ctx context.Context, partition int32, offset int64, sessions []*Session) error
}

// Client names a client of a tenant, for Store.LoadClients.
type Client struct {
	Tenant, ID string
}

// LoadClient returns the session store holds for one client of partition,
// nil when it holds none (Store.LoadClients for one client).
func LoadClient(ctx context.Context, store Store, partition int32, tenant, client string) (*Session, error) {
	var found *Session
	err := store.LoadClients(ctx, partition, []Client{{Tenant: tenant, ID: client}}, func(s *Session) error {
		found = s
		return nil
	})
	return found, err
}

// localStore is implemented by a store whose reads are local and take
// microseconds (the embedded one): the service then keeps no ended
// session in memory unless session.ended_cache says so.
type localStore interface {
	LocalReads() bool
}

// endedCache resolves session.ended_cache for store: -1 is 0 for a local
// store, DefaultEndedCache for any other.
func endedCache(cfg Config, store Store) int {
	if cfg.EndedCache >= 0 {
		return cfg.EndedCache
	}
	if localReads(store) {
		return 0
	}
	return DefaultEndedCache
}

// localReads reports whether store's reads are local (localStore).
func localReads(store Store) bool {
	l, ok := store.(localStore)
	return ok && l.LocalReads()
}
