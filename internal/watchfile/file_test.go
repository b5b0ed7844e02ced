package watchfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// parseWord accepts a file of one word without blanks.
func parseWord(r io.Reader) (*string, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	s := strings.TrimSpace(string(b))
	if s == "" || strings.ContainsAny(s, " \t\n") {
		return nil, errors.New("not one word")
	}
	return &s, nil
}

// TestFile: the first load must succeed; a version that does not parse
// keeps the one in force (Reload says why, naming the file); Poll loads a
// new version, once.
func TestFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "word")
	if _, err := Open(path, "word file", parseWord, nil, nil); err == nil || !strings.Contains(err.Error(), "open word file") {
		t.Fatalf("Open of a missing file: %v", err)
	}
	write := func(s string) {
		t.Helper()
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write("one")
	f, err := Open(path, "word file", parseWord, func(s *string) []any { return []any{"len", len(*s)} }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if *f.Current() != "one" || f.Path() != path {
		t.Fatalf("Current %q, Path %q", *f.Current(), f.Path())
	}
	write("two words")
	if err := f.Reload(); err == nil || !strings.Contains(err.Error(), "word file "+path+": not one word") {
		t.Fatalf("Reload of a bad version: %v", err)
	}
	if *f.Current() != "one" {
		t.Fatalf("Current %q after a bad version, want the one in force", *f.Current())
	}
	write("three")
	f.Poll()
	if *f.Current() != "three" {
		t.Fatalf("Current %q after Poll, want three", *f.Current())
	}
	// An unchanged file is not read again: a version swapped in behind
	// Poll's back (same stamp) is not noticed.
	f.cur.Store(new(string))
	f.Poll()
	if *f.Current() != "" {
		t.Error("Poll read an unchanged file again")
	}
}
