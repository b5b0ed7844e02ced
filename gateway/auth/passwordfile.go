package auth

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"
)

// ErrBadCredentials: unknown user or wrong password (CONNACK 0x86 / 0x04).
var ErrBadCredentials = errors.New("bad user name or password")

// maxLineLen bounds one line of a password file. Mosquitto limits user
// names and hashes to 65535 bytes each.
const maxLineLen = 1 << 17

// PasswordFile is a parsed password file: user → hash entry. It is
// immutable once parsed and safe for concurrent use.
type PasswordFile struct {
	entries map[string]entry
	// dummy is checked, and its answer thrown away, when the user is
	// unknown, so that such an attempt costs what a known user's does.
	dummy entry
}

// lineError is a parse error: the 1-based line and a fixed description.
// It never holds text from the file, which may be a password.
type lineError struct {
	line   int
	reason reason
}

func (e *lineError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.reason) }

// ParsePasswordFile parses r; an error names the line number (1-based) and
// what is wrong, never the hash or password. See the package documentation
// for the format.
func ParsePasswordFile(r io.Reader) (*PasswordFile, error) {
	f := &PasswordFile{entries: make(map[string]entry)}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLineLen)
	line := 0
	for sc.Scan() {
		line++
		user, hash, ok, why := splitLine(sc.Text())
		if why != rOK {
			return nil, &lineError{line, why}
		}
		if !ok {
			continue
		}
		if _, dup := f.entries[user]; dup {
			return nil, &lineError{line, rDuplicate}
		}
		e, why := parseHash(hash)
		if why != rOK {
			return nil, &lineError{line, why}
		}
		f.entries[user] = e
		if f.dummy == nil {
			f.dummy = e
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &lineError{line + 1, rLineTooLong}
		}
		return nil, fmt.Errorf("read password file: %w", err)
	}
	return f, nil
}

// splitLine splits one line (without its "\n") into user and hash. ok is
// false for a blank line or a comment; reason is set for a malformed line.
// Blanks around the user and the hash are dropped, as Mosquitto does.
func splitLine(s string) (user, hash string, ok bool, why reason) {
	s = strings.Trim(s, " \t\r")
	if s == "" || s[0] == '#' {
		return "", "", false, rOK
	}
	user, hash, found := strings.Cut(s, ":")
	if !found {
		return "", "", false, rNoColon
	}
	user, hash = strings.Trim(user, " \t"), strings.Trim(hash, " \t")
	if why := checkUser(user); why != rOK {
		return "", "", false, why
	}
	if hash == "" {
		return "", "", false, rEmptyHash
	}
	return user, hash, true, rOK
}

// checkUser returns why user cannot be a name in a password file, or rOK.
func checkUser(user string) reason {
	switch {
	case user == "":
		return rEmptyUser
	case len(user) > 65535:
		return rUserTooLong
	case !utf8.ValidString(user):
		return rUserUTF8
	case strings.ContainsAny(user, ":\n\r\x00"):
		return rUserChars
	case user[0] == '#':
		return rUserComment
	case strings.Trim(user, " \t") != user:
		return rUserBlank
	}
	return rOK
}

// LoadPasswordFile reads and parses the file at path.
func LoadPasswordFile(path string) (*PasswordFile, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open password file: %w", err)
	}
	defer fh.Close() //nolint:errcheck // a file opened for reading; nothing to do on error
	f, err := ParsePasswordFile(fh)
	if err != nil {
		return nil, fmt.Errorf("password file %s: %w", path, err)
	}
	return f, nil
}

// Verify reports whether password is user's. The hashes compare in constant
// time; an unknown user still spends the time of one hash (the file's first
// entry is checked and its answer dropped), so timing does not reveal which
// users exist.
func (f *PasswordFile) Verify(user string, password []byte) bool {
	e, ok := f.entries[user]
	if !ok {
		if f.dummy != nil {
			f.dummy.verify(password)
		}
		return false
	}
	return e.verify(password)
}

// Len returns the number of users in the file.
func (f *PasswordFile) Len() int { return len(f.entries) }
