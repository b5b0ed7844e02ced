package pebblestore

import (
	"io"
	"log/slog"
	"testing"

	routersvc "github.com/shoal-mqtt/shoal/router-svc"
	"github.com/shoal-mqtt/shoal/router-svc/storetest"
)

func testLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func open(t *testing.T, dir string) *DB {
	t.Helper()
	db, err := Open(dir, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func TestRouterStoreConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T) routersvc.Store { return open(t, t.TempDir()) },
		Reopen: func(t *testing.T, s routersvc.Store) routersvc.Store {
			db, ok := s.(*DB)
			if !ok {
				t.Fatalf("store is a %T", s)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			return open(t, db.dir)
		},
	})
}
