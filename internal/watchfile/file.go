package watchfile

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// File is a file parsed into a T and kept in force: Reload (the process
// calls it on SIGHUP) and Watch, which polls the file's stamp, read it
// again; a version that cannot be read or parsed keeps the previous one in
// force and is logged once. Safe for concurrent use.
type File[T any] struct {
	path, what string // what names the file in logs and errors ("acl file")
	parse      func(io.Reader) (*T, error)
	describe   func(*T) []any // log attributes of a version (its size)
	log        *slog.Logger
	cur        atomic.Pointer[T]

	mu         sync.Mutex // serialises loads; guards the fields below
	seen       Stamp      // the version last read, whether it parsed or not
	statFailed bool       // the last poll could not stat the file (logged once)
}

// Open loads the file at path with parse; this first load must succeed.
// what names the file in logs and errors; describe gives the log
// attributes of a version (nil: none); log receives the reloads and their
// errors (nil: discarded).
func Open[T any](path, what string, parse func(io.Reader) (*T, error), describe func(*T) []any, log *slog.Logger) (*File[T], error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if describe == nil {
		describe = func(*T) []any { return nil }
	}
	f := &File[T]{path: path, what: what, parse: parse, describe: describe, log: log}
	v, st, err := f.load()
	if err != nil {
		return nil, err
	}
	f.cur.Store(v)
	f.seen = st
	log.Info(what+" loaded", append([]any{"path", path}, describe(v)...)...)
	return f, nil
}

// Path returns the file's path.
func (f *File[T]) Path() string { return f.path }

// Current returns the version in force.
func (f *File[T]) Current() *T { return f.cur.Load() }

// Reload reads the file again. When it cannot be read or parsed the
// previous version stays in force; the error is logged here as well as
// returned, so a caller may drop it.
func (f *File[T]) Reload() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reloadLocked()
}

func (f *File[T]) reloadLocked() error {
	v, st, err := f.load()
	if st != (Stamp{}) {
		f.seen = st
	}
	if err != nil {
		f.log.Error(f.what+" not reloaded, the previous one stays in force", "path", f.path, "err", err)
		return err
	}
	f.cur.Store(v)
	f.log.Info(f.what+" reloaded", append([]any{"path", f.path}, f.describe(v)...)...)
	return nil
}

// load reads and parses the file; the stamp is that of the open file (zero
// when it could not be opened), taken before reading, so that a change
// made while it is read is seen by the next poll.
func (f *File[T]) load() (*T, Stamp, error) {
	fh, err := os.Open(f.path)
	if err != nil {
		return nil, Stamp{}, fmt.Errorf("open %s: %w", f.what, err)
	}
	defer fh.Close() //nolint:errcheck // a file opened for reading; nothing to do on error
	fi, err := fh.Stat()
	if err != nil {
		return nil, Stamp{}, fmt.Errorf("stat %s: %w", f.what, err)
	}
	st := StampOf(fi)
	v, err := f.parse(fh)
	if err != nil {
		return nil, st, fmt.Errorf("%s %s: %w", f.what, f.path, err)
	}
	return v, st, nil
}

// Watch polls the file every interval (a second when interval ≤ 0) and
// reloads it when its stamp changed. Each version is read once: a broken
// file is logged once, not every interval. It returns when ctx ends.
func (f *File[T]) Watch(ctx context.Context, interval time.Duration) {
	Every(ctx, interval, f.Poll)
}

// Poll checks the file once, as Watch does every interval: it reloads a
// version it has not read yet.
func (f *File[T]) Poll() {
	fi, err := os.Stat(f.path)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		if !f.statFailed {
			f.statFailed = true
			f.log.Warn(f.what+" unreadable, the previous one stays in force", "path", f.path, "err", err)
		}
		return
	}
	f.statFailed = false
	if st := StampOf(fi); st != f.seen {
		f.seen = st
		_ = f.reloadLocked() // logged there
	}
}
