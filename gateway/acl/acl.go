package acl

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// fileStamp identifies one version of a file (stampOf fills it).
type fileStamp struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64
}

// ACL serves the ACL file in force and reloads it: Reload (called on SIGHUP
// by the process), and Watch, which polls the file. A version that fails to
// read or parse keeps the previous one in force and is logged (slog) with
// its line number. Safe for concurrent use.
type ACL struct {
	path string
	log  *slog.Logger
	cur  atomic.Pointer[File]

	mu         sync.Mutex // serialises loads; guards the fields below
	seen       fileStamp  // the version last read, whether it parsed or not
	statFailed bool       // the last poll could not stat the file (logged once)
}

// Open loads the ACL file at path; this first load must succeed. log
// receives the reloads and their errors (nil: discarded).
func Open(path string, log *slog.Logger) (*ACL, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &ACL{path: path, log: log}
	f, st, err := a.load()
	if err != nil {
		return nil, err
	}
	a.cur.Store(f)
	a.seen = st
	log.Info("acl file loaded", "path", path, "rules", f.Rules(), "users", f.Users())
	return a, nil
}

// Path returns the path of the ACL file.
func (a *ACL) Path() string { return a.path }

// File returns the file in force.
func (a *ACL) File() *File { return a.cur.Load() }

// Reload reads the file again. When it cannot be read or parsed the
// previous file stays in force; the error (with the line number) is logged
// here as well as returned, so a caller may drop it.
func (a *ACL) Reload() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.reloadLocked()
}

func (a *ACL) reloadLocked() error {
	f, st, err := a.load()
	if st != (fileStamp{}) {
		a.seen = st
	}
	if err != nil {
		a.log.Error("acl file not reloaded, the previous one stays in force", "path", a.path, "err", err)
		return err
	}
	a.cur.Store(f)
	a.log.Info("acl file reloaded", "path", a.path, "rules", f.Rules(), "users", f.Users())
	return nil
}

// load reads and parses the file; the stamp is that of the open file (zero
// when it could not be opened), taken before reading, so that a change made
// while it is read is seen by the next poll.
func (a *ACL) load() (*File, fileStamp, error) {
	fh, err := os.Open(a.path)
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("open acl file: %w", err)
	}
	defer fh.Close() //nolint:errcheck // a file opened for reading; nothing to do on error
	fi, err := fh.Stat()
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("stat acl file: %w", err)
	}
	st := stampOf(fi)
	f, err := Parse(fh)
	if err != nil {
		return nil, st, fmt.Errorf("load %s: %w", a.path, err)
	}
	return f, st, nil
}

// Watch polls the file every interval (a second when interval ≤ 0) and
// reloads it when its size, modification time or inode changed. Each
// version is read once: a broken file is logged once, not every interval.
// It returns when ctx ends.
func (a *ACL) Watch(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.poll()
		}
	}
}

func (a *ACL) poll() {
	fi, err := os.Stat(a.path)
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		if !a.statFailed {
			a.statFailed = true
			a.log.Warn("acl file unreadable, the previous one stays in force", "path", a.path, "err", err)
		}
		return
	}
	a.statFailed = false
	if st := stampOf(fi); st != a.seen {
		a.seen = st
		_ = a.reloadLocked() // logged there
	}
}
