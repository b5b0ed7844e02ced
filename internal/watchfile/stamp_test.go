package watchfile

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// TestOf: a rewrite that changes the size, and on Linux a replacement by
// rename with the same size and modification time, give another stamp;
// the same file stats to the same stamp.
func TestOf(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	stamp := func() Stamp {
		t.Helper()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return StampOf(fi)
	}
	if err := os.WriteFile(path, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	first := stamp()
	if first == (Stamp{}) || stamp() != first {
		t.Fatalf("stamp %+v is zero or unstable", first)
	}
	if err := os.WriteFile(path, []byte("three"), 0o600); err != nil {
		t.Fatal(err)
	}
	if stamp() == first {
		t.Error("a rewrite with another size kept the stamp")
	}
	if runtime.GOOS != "linux" {
		return
	}
	before := stamp()
	fi, _ := os.Stat(path)
	tmp := filepath.Join(dir, "g")
	if err := os.WriteFile(tmp, []byte("THREE"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tmp, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	if stamp() == before {
		t.Error("a file replaced by a rename, same size and mtime, kept the stamp")
	}
}

// TestEvery: poll runs repeatedly, and not after ctx ends.
func TestEvery(t *testing.T) {
	var n atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); Every(ctx, time.Millisecond, func() { n.Add(1) }) }()
	deadline := time.Now().Add(10 * time.Second)
	for n.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatal("poll ran fewer than 3 times in 10s")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	after := n.Load()
	time.Sleep(10 * time.Millisecond)
	if n.Load() != after {
		t.Error("poll ran after ctx ended")
	}
}
