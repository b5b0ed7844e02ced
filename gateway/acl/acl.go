package acl

import (
	"context"
	"log/slog"
	"time"

	"github.com/shoal-mqtt/shoal/internal/watchfile"
)

// ACL serves the ACL file in force and reloads it: Reload (called on SIGHUP
// by the process), and Watch, which polls the file. A version that fails to
// read or parse keeps the previous one in force and is logged (slog) with
// its line number. Safe for concurrent use.
type ACL struct {
	file *watchfile.File[File]
}

// Open loads the ACL file at path; this first load must succeed. log
// receives the reloads and their errors (nil: discarded).
func Open(path string, log *slog.Logger) (*ACL, error) {
	f, err := watchfile.Open(path, "acl file", Parse, func(f *File) []any {
		return []any{"rules", f.Rules(), "users", f.Users()}
	}, log)
	if err != nil {
		return nil, err
	}
	return &ACL{file: f}, nil
}

// File returns the file in force.
func (a *ACL) File() *File { return a.file.Current() }

// Path returns the path of the ACL file.
func (a *ACL) Path() string { return a.file.Path() }

// Reload reads the file again. When it cannot be read or parsed the
// previous file stays in force; the error (with the line number) is logged
// here as well as returned, so a caller may drop it.
func (a *ACL) Reload() error { return a.file.Reload() }

// Watch polls the file every interval (a second when interval ≤ 0) and
// reloads it when it changed; each version is read once. It returns when
// ctx ends.
func (a *ACL) Watch(ctx context.Context, interval time.Duration) { a.file.Watch(ctx, interval) }
