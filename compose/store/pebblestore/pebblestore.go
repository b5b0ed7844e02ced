package pebblestore

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
)

// DB is an open Pebble view store. It is safe for concurrent use; each
// router shard is written by one goroutine.
type DB struct {
	db        *pebble.DB
	dir       string
	log       *slog.Logger
	writeOpts *pebble.WriteOptions

	// With NoSync: commits since the last WAL flush, and the flusher
	// (see walFlushInterval), stopped by Close.
	dirty       atomic.Bool
	stopFlusher chan struct{}
	flusherDone chan struct{}

	closeOnce sync.Once
	closeErr  error
}

// walFlushInterval is how often a NoSync DB that has committed since
// writes its write-ahead log out and syncs it. Pebble keeps a NoSync
// commit in its own memory until a 32 KiB block fills, so without this a
// process crash would lose an unbounded stretch of commits (safe, since
// the services replay the log from the stored offsets, but a long replay
// and many repeated deliveries). With it, a crash of the process or the
// machine loses at most the last interval of commits, for at most ten
// fdatasyncs a second.
const walFlushInterval = 100 * time.Millisecond

// Options tune a DB.
type Options struct {
	// NoSync commits without waiting for the write-ahead log to reach the
	// disk (fdatasync). A background flusher writes and syncs the log
	// within walFlushInterval of a commit, so a crash of the process or
	// the machine loses at most the commits of that interval. Losing the
	// newest commits is safe for every view: each stores the log offset it
	// reflects, and the service replays the log from there (docs/design.md, "Scaling the router").
	// Without NoSync every commit syncs.
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
	for i := range opts.Levels {
		// The session service reads the session of every client it does
		// not hold (sessionsvc.Store.LoadClients), most of them never
		// seen: a filter answers for those without reading the tables.
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("open pebble store %s: %w", dir, err)
	}
	log.Info("pebble store open", "dir", dir, "sync", !o.NoSync)
	d := &DB{db: db, dir: dir, log: log, writeOpts: pebble.Sync}
	if o.NoSync {
		d.writeOpts = pebble.NoSync
		d.stopFlusher, d.flusherDone = make(chan struct{}), make(chan struct{})
		go d.flushWAL()
	}
	return d, nil
}

// commit commits b with the DB's write options.
func (d *DB) commit(b *pebble.Batch) error {
	if err := b.Commit(d.writeOpts); err != nil {
		return err
	}
	if d.stopFlusher != nil {
		d.dirty.Store(true)
	}
	return nil
}

// flushWAL writes out and syncs the write-ahead log every
// walFlushInterval after commits, until Close. A failure is logged and
// tried again at the next tick; Pebble reports a failing WAL on the next
// commit too.
func (d *DB) flushWAL() {
	defer close(d.flusherDone)
	t := time.NewTicker(walFlushInterval)
	defer t.Stop()
	for {
		select {
		case <-d.stopFlusher:
			return
		case <-t.C:
		}
		if !d.dirty.Swap(false) {
			continue
		}
		// An empty synced LogData writes the partial block and syncs it.
		if err := d.db.LogData(nil, pebble.Sync); err != nil {
			d.dirty.Store(true)
			d.log.Error("pebble store: flushing the write-ahead log failed; retrying", "dir", d.dir, "err", err)
		}
	}
}

// Close closes the database. Later calls return the first call's result.
// The store must not be used after Close.
func (d *DB) Close() error {
	d.closeOnce.Do(func() {
		if d.stopFlusher != nil {
			close(d.stopFlusher)
			<-d.flusherDone
		}
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
