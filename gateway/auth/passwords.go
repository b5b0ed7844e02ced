package auth

import (
	"log/slog"

	"github.com/shoal-mqtt/shoal/internal/watchfile"
)

// Passwords serves the current password file and reloads it: Reload()
// (called on SIGHUP by the process), and Watch, which polls the file's
// mtime/size/inode every interval. A file that fails to parse keeps the
// old one in force and logs (slog) the error with the line number.
type Passwords struct {
	*watchfile.File[PasswordFile]
}

// OpenPasswords loads the password file at path; this first load must
// succeed. log receives the reloads and their errors (nil: discarded).
func OpenPasswords(path string, log *slog.Logger) (*Passwords, error) {
	f, err := watchfile.Open(path, "password file", ParsePasswordFile, func(f *PasswordFile) []any {
		return []any{"users", f.Len()}
	}, log)
	if err != nil {
		return nil, err
	}
	return &Passwords{f}, nil
}

// Authenticate returns nil when password is user's, else ErrBadCredentials.
// It takes the time of one hash whether or not the user exists.
func (p *Passwords) Authenticate(user string, password []byte) error {
	if p.Current().Verify(user, password) {
		return nil
	}
	return ErrBadCredentials
}
