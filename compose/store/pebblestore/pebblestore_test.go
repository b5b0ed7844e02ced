package pebblestore

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

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

// TestNoSyncCommitReachesTheDisk: a NoSync commit is in the files within
// moments, not only once Pebble's 32 KiB log block fills. A copy of the
// open database's files (what a crash of the process leaves) has it.
func TestNoSyncCommitReachesTheDisk(t *testing.T) {
	dir := t.TempDir()
	db, err := OpenWith(dir, Options{NoSync: true}, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := db.ApplyShard(t.Context(), 2, &routersvc.Mutations{Offset: 41}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for attempt := 1; ; attempt++ {
		time.Sleep(walFlushInterval)
		crash := filepath.Join(t.TempDir(), "crash")
		if err := os.CopyFS(crash, os.DirFS(dir)); err != nil {
			t.Fatal(err)
		}
		img, err := Open(crash, testLogger())
		if err != nil {
			t.Fatal(err)
		}
		snap, err := storetest.Load(t.Context(), img, 2)
		_ = img.Close()
		if err != nil {
			t.Fatal(err)
		}
		if snap.Offset == 41 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d copies: the crash image has offset %d, want 41", attempt, snap.Offset)
		}
	}
}
