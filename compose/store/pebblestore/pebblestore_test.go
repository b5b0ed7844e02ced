package pebblestore

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
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
// walFlushInterval, not only once Pebble's 32 KiB log block fills. A copy
// of the open database's files (what a crash of the process leaves) has
// it. It runs in a synctest bubble: the flush ticks on the bubble's clock.
func TestNoSyncCommitReachesTheDisk(t *testing.T) { synctest.Test(t, testNoSyncCommitReachesTheDisk) }

func testNoSyncCommitReachesTheDisk(t *testing.T) {
	dir := t.TempDir()
	db, err := OpenWith(dir, Options{NoSync: true}, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := db.ApplyShard(t.Context(), 2, &routersvc.Mutations{Offset: 41}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(walFlushInterval + time.Millisecond) // on the bubble's clock: a flush tick
	synctest.Wait()                                 // the flush is done
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
	if snap.Offset != 41 {
		t.Fatalf("a flush interval after the commit, the crash image has offset %d, want 41", snap.Offset)
	}
}
