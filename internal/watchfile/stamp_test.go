package watchfile

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
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

// TestEvery: poll runs once every interval, and not after ctx ends. It
// runs in a synctest bubble: the ticker's intervals pass on the bubble's
// clock, so the count of polls is exact.
func TestEvery(t *testing.T) { synctest.Test(t, testEvery) }

func testEvery(t *testing.T) {
	var n atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); Every(ctx, time.Second, func() { n.Add(1) }) }()
	defer func() { cancel(); <-done }() // the bubble ends with its goroutines

	time.Sleep(3*time.Second + time.Millisecond) // on the bubble's clock: three ticks
	synctest.Wait()                              // the third poll has run
	if got := n.Load(); got != 3 {
		t.Fatalf("%d polls in 3 s of a 1 s interval, want 3", got)
	}
	cancel()
	<-done
	time.Sleep(10 * time.Second) // on the bubble's clock: ten intervals without a poll
	if got := n.Load(); got != 3 {
		t.Errorf("%d polls, 3 before ctx ended: poll ran after it", got)
	}
}
