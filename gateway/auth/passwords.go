package auth

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

// Passwords serves the current password file and reloads it: Reload()
// (called on SIGHUP by the process), and a watch that polls the file's
// mtime/size/inode every interval. A file that fails to parse keeps the old
// one in force and logs (slog) the error with the line number.
type Passwords struct {
	path string
	log  *slog.Logger
	cur  atomic.Pointer[PasswordFile]

	mu         sync.Mutex // serialises loads; guards the fields below
	seen       fileStamp  // the version last read, whether it parsed or not
	statFailed bool       // the last poll could not stat the file (logged once)
}

// OpenPasswords loads the password file at path; this first load must
// succeed. log receives the reloads and their errors (nil: discarded).
func OpenPasswords(path string, log *slog.Logger) (*Passwords, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Passwords{path: path, log: log}
	f, st, err := p.load()
	if err != nil {
		return nil, err
	}
	p.cur.Store(f)
	p.seen = st
	log.Info("password file loaded", "path", path, "users", f.Len())
	return p, nil
}

// Path returns the path of the password file.
func (p *Passwords) Path() string { return p.path }

// Authenticate returns nil when password is user's, else ErrBadCredentials.
// It takes the time of one hash whether or not the user exists.
func (p *Passwords) Authenticate(user string, password []byte) error {
	if p.cur.Load().Verify(user, password) {
		return nil
	}
	return ErrBadCredentials
}

// Reload reads the file again. When it cannot be read or parsed the
// previous file stays in force; the error (with the line number) is logged
// here as well as returned, so a caller may drop it.
func (p *Passwords) Reload() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reloadLocked()
}

func (p *Passwords) reloadLocked() error {
	f, st, err := p.load()
	if st != (fileStamp{}) {
		p.seen = st
	}
	if err != nil {
		p.log.Error("password file not reloaded, the previous one stays in force", "path", p.path, "err", err)
		return err
	}
	p.cur.Store(f)
	p.log.Info("password file reloaded", "path", p.path, "users", f.Len())
	return nil
}

// load reads and parses the file; the stamp is that of the open file (zero
// when it could not be opened), taken before reading, so a change made
// while it is read is seen by the next poll.
func (p *Passwords) load() (*PasswordFile, fileStamp, error) {
	fh, err := os.Open(p.path)
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("open password file: %w", err)
	}
	defer fh.Close() //nolint:errcheck // a file opened for reading; nothing to do on error
	fi, err := fh.Stat()
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("stat password file: %w", err)
	}
	st := stampOf(fi)
	f, err := ParsePasswordFile(fh)
	if err != nil {
		return nil, st, fmt.Errorf("password file %s: %w", p.path, err)
	}
	return f, st, nil
}

// Watch polls the file every interval (a second when interval ≤ 0) and
// reloads it when its size, modification time or inode changed. Each
// version is read once: a broken file is logged once, not every interval.
// It returns when ctx ends.
func (p *Passwords) Watch(ctx context.Context, interval time.Duration) {
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
			p.poll()
		}
	}
}

func (p *Passwords) poll() {
	fi, err := os.Stat(p.path)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		if !p.statFailed {
			p.statFailed = true
			p.log.Warn("password file unreadable, the previous one stays in force", "path", p.path, "err", err)
		}
		return
	}
	p.statFailed = false
	if st := stampOf(fi); st != p.seen {
		p.seen = st
		_ = p.reloadLocked() // logged there
	}
}
