package testfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestReplace: the new content replaces the file under a new inode, and
// no temporary file is left.
func TestReplace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	Replace(t, path, "one")
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	Replace(t, path, "two")
	b, err := os.ReadFile(path)
	if err != nil || string(b) != "two" {
		t.Fatalf("content %q, %v", b, err)
	}
	after, _ := os.Stat(path)
	if os.SameFile(before, after) {
		t.Error("the file was rewritten in place, not replaced")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d files in the directory, want 1", len(entries))
	}
	n := 0
	WaitFor(t, "three calls", func() bool { n++; return n == 3 })
}
