package pebblestore

import (
	"io"
	"log/slog"
	"testing"

	sessionsvc "github.com/shoal-mqtt/shoal/session-svc"
	"github.com/shoal-mqtt/shoal/session-svc/storetest"
)

// sessionTestDB is a DB that the test's cleanup closes unless the test did.
type sessionTestDB struct {
	*DB
	closed bool
}

func openSessionDB(t *testing.T, dir string) *sessionTestDB {
	t.Helper()
	db, err := Open(dir, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	s := &sessionTestDB{DB: db}
	t.Cleanup(func() {
		if !s.closed {
			_ = s.Close()
		}
	})
	return s
}

func reopenSessionDB(t *testing.T, s sessionsvc.Store) sessionsvc.Store {
	t.Helper()
	db, ok := s.(*sessionTestDB)
	if !ok {
		t.Fatalf("store is %T, want *sessionTestDB", s)
	}
	db.closed = true
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return openSessionDB(t, db.dir)
}

func TestSessionStoreConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Open:   func(t *testing.T) sessionsvc.Store { return openSessionDB(t, t.TempDir()) },
		Reopen: reopenSessionDB,
	})
}
