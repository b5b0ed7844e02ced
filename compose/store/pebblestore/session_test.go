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

func TestSessionKeyParse(t *testing.T) {
	for _, id := range [][2]string{{"", ""}, {"a/b", "c"}, {"a", "b/c"}, {"日本", "\x00\xff"}} {
		key := sessionKey(nil, 1<<20, id[0], id[1])
		tenant, client, err := parseSessionKey(key)
		if err != nil || tenant != id[0] || client != id[1] {
			t.Errorf("parse(%q) = %q, %q, %v", id, tenant, client, err)
		}
	}
	for _, bad := range [][]byte{{'s', 'c', 0, 0}, append(sessionTablePrefix(nil, tableSessionClients, 0), 5, 'a')} {
		if _, _, err := parseSessionKey(bad); err == nil {
			t.Errorf("parse(%x): no error", bad)
		}
	}
}
