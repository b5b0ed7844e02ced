package auth

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// SetPassword adds or replaces user's entry in the file at path (argon2id,
// HashPassword's parameters), keeping every other line as it was (comments,
// order, line endings). It creates the file with mode 0600 when missing and
// writes atomically: a temporary file in the same directory, given the mode
// of the existing file, synced, then renamed over it. A symbolic link is
// followed and its target replaced. A file that does not parse is refused
// (nothing is written), as mosquitto_passwd refuses a corrupt file.
func SetPassword(path, user string, password []byte) error {
	if why := checkUser(user); why != rOK {
		return fmt.Errorf("set password: %s", why)
	}
	hash, err := HashPassword(password)
	if err != nil {
		return err
	}
	return setEntry(path, user, hash)
}

func setEntry(path, user, hash string) error {
	if why := checkUser(user); why != rOK {
		return fmt.Errorf("set password: %s", why)
	}
	mode := fs.FileMode(0o600)
	var old []byte
	switch real, err := filepath.EvalSymlinks(path); {
	case err == nil:
		path = real
		fi, err := os.Stat(path)
		if err != nil {
			return fmt.Errorf("set password: %w", err)
		}
		mode = fi.Mode().Perm()
		if old, err = os.ReadFile(path); err != nil {
			return fmt.Errorf("set password: %w", err)
		}
		if _, err := ParsePasswordFile(bytes.NewReader(old)); err != nil {
			return fmt.Errorf("set password: password file %s: %w", path, err)
		}
	case errors.Is(err, fs.ErrNotExist):
	default:
		return fmt.Errorf("set password: %w", err)
	}
	return writeAtomic(path, mode, replaceEntry(old, user, hash))
}

// replaceEntry returns old with user's line replaced by user:hash (keeping
// that line's ending), or with user:hash appended.
func replaceEntry(old []byte, user, hash string) []byte {
	line := user + ":" + hash
	var out bytes.Buffer
	found := false
	for _, raw := range bytes.SplitAfter(old, []byte("\n")) {
		text := strings.TrimRight(string(raw), "\n")
		if u, _, ok, _ := splitLine(text); ok && u == user {
			out.WriteString(line)
			if strings.HasSuffix(text, "\r") {
				out.WriteByte('\r')
			}
			out.Write(raw[len(text):])
			found = true
			continue
		}
		out.Write(raw)
	}
	if !found {
		if out.Len() > 0 && !bytes.HasSuffix(out.Bytes(), []byte("\n")) {
			out.WriteByte('\n')
		}
		out.WriteString(line + "\n")
	}
	return out.Bytes()
}

// writeAtomic replaces path with data: a temporary file beside it, with
// mode, written and synced, renamed over path, and the directory synced.
func writeAtomic(path string, mode fs.FileMode, data []byte) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp*")
	if err != nil {
		return fmt.Errorf("set password: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(mode); err != nil {
		return fmt.Errorf("set password: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("set password: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("set password: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("set password: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("set password: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // the rename is done; a directory that cannot sync is not an error here
		_ = d.Close()
	}
	return nil
}
