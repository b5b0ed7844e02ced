package pebblestore

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// DB is an open Pebble view store. It is safe for concurrent use; each
// router shard is written by one goroutine.
type DB struct {
	db        *pebble.DB
	dir       string
	log       *slog.Logger
	writeOpts *pebble.WriteOptions

	closeOnce sync.Once
	closeErr  error
}

// Options tune a DB.
type Options struct {
	// NoSync commits without waiting for the write-ahead log to reach the
	// disk (fdatasync). A commit is then in the operating system's page
	// cache within moments, so it survives a crash of the process but not
	// of the machine, like the embedded backbone's log without its
	// SyncWrites. Losing the newest commits is safe for every view: each
	// stores the log offset it reflects, and the service replays the log
	// from there (DESIGN.md §3). Without NoSync every commit syncs.
	NoSync bool
}

// Open opens (creating if needed) the Pebble database in dir, syncing
// every commit.
func Open(dir string, log *slog.Logger) (*DB, error) {
	return OpenWith(dir, Options{}, log)
}

// OpenWith opens (creating if needed) the Pebble database in dir with o.
func OpenWith(dir string, o Options, log *slog.Logger) (*DB, error) {
	opts := &pebble.Options{
		Logger:             pebbleLogger{log: log},
		FormatMajorVersion: pebble.FormatNewest,
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("open pebble store %s: %w", dir, err)
	}
	log.Info("pebble store open", "dir", dir, "sync", !o.NoSync)
	w := pebble.Sync
	if o.NoSync {
		w = pebble.NoSync
	}
	return &DB{db: db, dir: dir, log: log, writeOpts: w}, nil
}

// Close closes the database. Later calls return the first call's result.
// The store must not be used after Close.
func (d *DB) Close() error {
	d.closeOnce.Do(func() {
		if err := d.db.Close(); err != nil {
			d.closeErr = fmt.Errorf("close pebble store %s: %w", d.dir, err)
		}
	})
	return d.closeErr
}

// pebbleLogger sends Pebble's log lines to slog: its informational lines
// (flushes, compactions) at debug level.
type pebbleLogger struct {
	log *slog.Logger
}

func (l pebbleLogger) Infof(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

// Fatalf is called by Pebble on corruption it cannot continue from.
func (l pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.log.Error(msg, "component", "pebble", "fatal", true)
	panic(errors.New("pebble: " + msg))
}
