package cqlstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/gocql/gocql"
)

// keyspaceExists returns ErrNoKeyspace when the store's keyspace is
// missing.
func (s *Store) keyspaceExists(ctx context.Context) error {
	var name string
	err := s.session.Query(`SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = ?`, s.cfg.Keyspace).
		WithContext(ctx).Scan(&name)
	switch {
	case errors.Is(err, gocql.ErrNotFound):
		return ErrNoKeyspace
	case err != nil:
		return fmt.Errorf("look the keyspace up: %w", err)
	}
	return nil
}

// TruncateViews empties the router's and the session service's views of
// the keyspace (router_shard, sessions; not the slot leases nor the
// migrations), for `shoal views rebuild`: the keyspace it rebuilds into
// starts empty, and --swap replaces the live views' rows. Every node must
// be up (TRUNCATE). The store forgets nothing it learned of write times,
// so later writes still get later timestamps.
func (s *Store) TruncateViews(ctx context.Context) error {
	for _, table := range []string{"router_shard", "sessions"} {
		if err := s.exec(ctx, fmt.Sprintf("TRUNCATE %s.%s", s.cfg.Keyspace, table)); err != nil {
			return fmt.Errorf("truncate %s.%s: %w", s.cfg.Keyspace, table, err)
		}
	}
	return nil
}
