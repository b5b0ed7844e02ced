package acl

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shoal-mqtt/shoal/internal/testutil/testfile"
	"github.com/shoal-mqtt/shoal/internal/testutil/testlog"
)

const (
	aclV1 = "user acme-alice\ntopic read common/#\ntopic readwrite v1/#\n"
	aclV2 = "user acme-alice\ntopic read common/#\ntopic readwrite v2/#\npattern read dev/%c\n"
)

func openACL(t *testing.T, content string) (*ACL, string, *testlog.Buffer) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "acl")
	testfile.Replace(t, path, content)
	logs, log := testlog.NewLogger()
	a, err := Open(path, log)
	if err != nil {
		t.Fatal(err)
	}
	return a, path, logs
}

func TestOpen(t *testing.T) {
	a, path, logs := openACL(t, aclV1)
	if a.Path() != path {
		t.Errorf("Path() = %q, want %q", a.Path(), path)
	}
	if a.File().Rules() != 2 {
		t.Errorf("the file in force has %d rules, want 2", a.File().Rules())
	}
	c := a.For("acme-alice", "dev-1", false)
	if !c.AllowPublish([]byte("v1/x")) || c.AllowPublish([]byte("v2/x")) {
		t.Error("the loaded file does not decide")
	}
	if !strings.Contains(logs.String(), "rules=2 users=1") {
		t.Errorf("the first load is not logged with its counts:\n%s", logs)
	}
}

func TestOpenFirstLoadMustSucceed(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(filepath.Join(dir, "missing"), nil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v, want ErrNotExist", err)
	}
	path := filepath.Join(dir, "broken")
	testfile.Replace(t, path, "# rules\ntopic a\ntopic rwx b\n")
	_, err := Open(path, nil)
	var le *LineError
	if !errors.As(err, &le) || le.Line != 3 {
		t.Fatalf("broken file: %v, want an error naming line 3", err)
	}
}

func TestReloadKeepsOldOnErrorAndClientsFollow(t *testing.T) {
	a, path, logs := openACL(t, aclV1)
	c := a.For("acme-alice", "dev-1", false)
	anon := a.For("", "anon-1", true)
	if !c.AllowPublish([]byte("v1/x")) {
		t.Fatal("v1 not in force")
	}

	testfile.Replace(t, path, aclV2+"topic rwx v3\n")
	err := a.Reload()
	if err == nil || !strings.Contains(err.Error(), `acl line 5: unknown access "rwx"`) {
		t.Fatalf("Reload of a broken file: %v, want an error naming line 5", err)
	}
	if !c.AllowPublish([]byte("v1/x")) || c.AllowPublish([]byte("v2/x")) {
		t.Fatal("a broken file replaced the one in force")
	}
	if !strings.Contains(logs.String(), `acl line 5: unknown access`) {
		t.Errorf("the failed reload is not logged with its line:\n%s", logs)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Reload of a missing file: %v", err)
	}
	if !c.AllowPublish([]byte("v1/x")) {
		t.Fatal("a missing file replaced the one in force")
	}

	testfile.Replace(t, path, aclV2)
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	// The clients made before the reload see the new rules.
	if c.AllowPublish([]byte("v1/x")) || !c.AllowPublish([]byte("v2/x")) {
		t.Fatal("a connected client still sees the old rules after a reload")
	}
	if !c.AllowRead([]byte("dev/dev-1")) || !anon.AllowRead([]byte("dev/anon-1")) {
		t.Fatal("a connected client does not see the new patterns")
	}
	if !strings.Contains(logs.String(), "acl file reloaded") {
		t.Errorf("the reload is not logged:\n%s", logs)
	}
}

// TestWatch runs in a synctest bubble: the watch's polls, and the waits
// for what they load, are on the bubble's clock.
func TestWatch(t *testing.T) { synctest.Test(t, testWatch) }

func testWatch(t *testing.T) {
	a, path, logs := openACL(t, aclV1)
	c := a.For("acme-alice", "dev-1", false)
	testfile.Watch(t, func(ctx context.Context) { a.Watch(ctx, 5*time.Millisecond) })

	// A broken replacement: logged with its line, the old file stays.
	testfile.Replace(t, path, "# v2\n"+aclV2+"topic\n")
	testfile.WaitFor(t, "the broken file's error in the log", func() bool {
		return strings.Contains(logs.String(), "acl line 6: topic without a filter")
	})
	if !c.AllowPublish([]byte("v1/x")) || c.AllowPublish([]byte("v2/x")) {
		t.Fatal("the broken file replaced the one in force")
	}

	// A good replacement takes effect for the connected client.
	testfile.Replace(t, path, aclV2)
	testfile.WaitFor(t, "the new file in force", func() bool { return c.AllowPublish([]byte("v2/x")) })
	if c.AllowPublish([]byte("v1/x")) {
		t.Fatal("a rule of the old file still applies")
	}

	// So does a rewrite in place (same inode).
	if err := os.WriteFile(path, []byte("user acme-alice\ntopic write v3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	testfile.WaitFor(t, "the rewritten file in force", func() bool { return c.AllowPublish([]byte("v3")) })
}

// TestPollReadsEachVersionOnce drives the watch's poll by hand.
func TestPollReadsEachVersionOnce(t *testing.T) {
	a, path, logs := openACL(t, aclV1)
	a.file.Poll()
	if strings.Count(logs.String(), "reloaded") != 0 {
		t.Fatalf("an unchanged file was reloaded:\n%s", logs)
	}

	testfile.Replace(t, path, aclV1+"user\n")
	for range 3 {
		a.file.Poll()
	}
	if n := strings.Count(logs.String(), "acl line 4: user without a name"); n != 1 {
		t.Fatalf("a broken version was logged %d times, want once:\n%s", n, logs)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		a.file.Poll()
	}
	if n := strings.Count(logs.String(), "acl file unreadable"); n != 1 {
		t.Fatalf("a missing file was logged %d times, want once:\n%s", n, logs)
	}
	c := a.For("acme-alice", "dev-1", false)
	if !c.AllowPublish([]byte("v1/x")) {
		t.Fatal("the file in force was dropped")
	}

	testfile.Replace(t, path, aclV2)
	a.file.Poll()
	if !c.AllowPublish([]byte("v2/x")) {
		t.Fatalf("the restored file was not loaded:\n%s", logs)
	}
}

// TestConcurrentChecksAndReloads: checks from many goroutines while the
// file is reloaded; run with -race. Every answer is one of the two files'.
func TestConcurrentChecksAndReloads(t *testing.T) {
	a, path, _ := openACL(t, aclV1)
	c := a.For("acme-alice", "dev-1", false)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				// What both files allow, and what neither does.
				if !c.AllowRead([]byte("common/x")) || c.AllowPublish([]byte("common/x")) {
					select {
					case errs <- "a check saw neither file's rules":
					default:
					}
				}
			}
		})
	}
	for i := range 50 {
		content := aclV1
		if i%2 == 0 {
			content = aclV2
		}
		testfile.Replace(t, path, content)
		if err := a.Reload(); err != nil {
			t.Error(err)
		}
	}
	close(stop)
	wg.Wait()
	select {
	case e := <-errs:
		t.Fatal(e)
	default:
	}
	// The last file (v1) is what the client sees now.
	if !c.AllowPublish([]byte("v1/x")) || c.AllowPublish([]byte("v2/x")) {
		t.Fatal("after the reloads the client does not see the last file")
	}
}
