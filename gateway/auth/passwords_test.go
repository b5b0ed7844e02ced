package auth

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shoal-mqtt/shoal/internal/testutil/testfile"
	"github.com/shoal-mqtt/shoal/internal/testutil/testlog"
)

func authOK(p *Passwords, user, pass string) bool { return p.Authenticate(user, []byte(pass)) == nil }

// assertLogsNoSecret fails when the logs hold a password, a hash or a line
// of a password file.
func assertLogsNoSecret(t *testing.T, logs string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(logs, s) {
			t.Errorf("the logs contain %q:\n%s", s, logs)
		}
	}
}

var fileSecrets = []string{
	"correct horse", "sha512 only", "bcrypt pass",
	lineAlice7[len("acme-alice:"):], lineCarol6[len("legacy-carol:"):], lineErin2y[len("acme-erin:"):],
	salt12, hash64[:20],
}

func TestPasswordsAuthenticate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "passwd")
	testfile.Replace(t, path, lineAlice7+"\n"+lineErin2y+"\n")
	logs, log := testlog.NewLogger()
	p, err := OpenPasswords(path, log)
	if err != nil {
		t.Fatal(err)
	}
	if p.Path() != path {
		t.Errorf("Path() = %q, want %q", p.Path(), path)
	}
	if err := p.Authenticate("acme-alice", []byte("correct horse")); err != nil {
		t.Errorf("right password: %v", err)
	}
	for _, c := range []struct{ user, pass string }{
		{"acme-alice", "correct horsf"},
		{"acme-erin", ""},
		{"nobody", "correct horse"},
		{"", ""},
	} {
		if err := p.Authenticate(c.user, []byte(c.pass)); !errors.Is(err, ErrBadCredentials) {
			t.Errorf("Authenticate(%q, %q) = %v, want ErrBadCredentials", c.user, c.pass, err)
		}
	}
	if !strings.Contains(logs.String(), "users=2") {
		t.Errorf("the first load is not logged with its user count:\n%s", logs)
	}
	assertLogsNoSecret(t, logs.String(), fileSecrets...)
}

func TestOpenPasswordsFirstLoadMustSucceed(t *testing.T) {
	dir := t.TempDir()
	if _, err := OpenPasswords(filepath.Join(dir, "missing"), nil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v, want ErrNotExist", err)
	}
	path := filepath.Join(dir, "broken")
	testfile.Replace(t, path, "# users\n"+lineAlice7+"\nacme-bob correct horse\n")
	_, err := OpenPasswords(path, nil)
	var le *lineError
	if !errors.As(err, &le) || le.line != 3 {
		t.Fatalf("broken file: %v, want an error naming line 3", err)
	}
	assertLogsNoSecret(t, err.Error(), fileSecrets...)
}

func TestPasswordsReloadKeepsOldOnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "passwd")
	testfile.Replace(t, path, lineAlice7+"\n")
	logs, log := testlog.NewLogger()
	p, err := OpenPasswords(path, log)
	if err != nil {
		t.Fatal(err)
	}

	testfile.Replace(t, path, lineCarol6+"\nacme-bob:correct horse\n")
	err = p.Reload()
	if err == nil || !strings.Contains(err.Error(), "line 2: unknown hash format") {
		t.Fatalf("Reload of a broken file: %v, want an error naming line 2", err)
	}
	if !authOK(p, "acme-alice", "correct horse") || authOK(p, "legacy-carol", "sha512 only") {
		t.Fatal("a broken file replaced the one in force")
	}
	if !strings.Contains(logs.String(), "line 2: unknown hash format") {
		t.Errorf("the failed reload is not logged with its line:\n%s", logs)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := p.Reload(); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Reload of a missing file: %v", err)
	}
	if !authOK(p, "acme-alice", "correct horse") {
		t.Fatal("a missing file replaced the one in force")
	}

	testfile.Replace(t, path, lineCarol6+"\n")
	if err := p.Reload(); err != nil {
		t.Fatal(err)
	}
	if authOK(p, "acme-alice", "correct horse") || !authOK(p, "legacy-carol", "sha512 only") {
		t.Fatal("a good file did not take effect on Reload")
	}
	assertLogsNoSecret(t, logs.String(), fileSecrets...)
}

// TestPasswordsWatch runs in a synctest bubble: the watch's polls, and
// the waits for what they load, are on the bubble's clock.
func TestPasswordsWatch(t *testing.T) { synctest.Test(t, testPasswordsWatch) }

func testPasswordsWatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "passwd")
	testfile.Replace(t, path, lineAlice7+"\n")
	logs, log := testlog.NewLogger()
	p, err := OpenPasswords(path, log)
	if err != nil {
		t.Fatal(err)
	}
	testfile.Watch(t, func(ctx context.Context) { p.Watch(ctx, 5*time.Millisecond) })

	// A broken replacement: logged with its line, the old file stays.
	testfile.Replace(t, path, "# v2\n"+lineCarol6+"\nacme-alice correct horse\n")
	testfile.WaitFor(t, "the broken file's error in the log", func() bool {
		return strings.Contains(logs.String(), "line 3: no ':' between user name and hash")
	})
	if !authOK(p, "acme-alice", "correct horse") || authOK(p, "legacy-carol", "sha512 only") {
		t.Fatal("the broken file replaced the one in force")
	}

	// A good replacement takes effect.
	testfile.Replace(t, path, lineCarol6+"\n")
	testfile.WaitFor(t, "the new file in force", func() bool { return authOK(p, "legacy-carol", "sha512 only") })
	if authOK(p, "acme-alice", "correct horse") {
		t.Fatal("a user of the old file still authenticates")
	}

	// So does a rewrite in place (same inode).
	if err := os.WriteFile(path, []byte(lineErin2y+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	testfile.WaitFor(t, "the rewritten file in force", func() bool { return authOK(p, "acme-erin", "bcrypt pass") })

	assertLogsNoSecret(t, logs.String(), fileSecrets...)
}

// TestPollReadsEachVersionOnce drives the watch's poll by hand: a broken
// version is read and logged once however often it is polled, a missing
// file is warned about once, and its return is loaded.
func TestPollReadsEachVersionOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "passwd")
	testfile.Replace(t, path, lineAlice7+"\n")
	logs, log := testlog.NewLogger()
	p, err := OpenPasswords(path, log)
	if err != nil {
		t.Fatal(err)
	}
	p.Poll()
	if strings.Count(logs.String(), "reloaded") != 0 {
		t.Fatalf("an unchanged file was reloaded:\n%s", logs)
	}

	testfile.Replace(t, path, lineAlice7+"\n"+"acme-bob:\n")
	for range 3 {
		p.Poll()
	}
	if n := strings.Count(logs.String(), "line 2: empty hash"); n != 1 {
		t.Fatalf("a broken version was logged %d times, want once:\n%s", n, logs)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		p.Poll()
	}
	if n := strings.Count(logs.String(), "password file unreadable"); n != 1 {
		t.Fatalf("a missing file was logged %d times, want once:\n%s", n, logs)
	}
	if !authOK(p, "acme-alice", "correct horse") {
		t.Fatal("the file in force was dropped")
	}

	testfile.Replace(t, path, lineCarol6+"\n")
	p.Poll()
	if !authOK(p, "legacy-carol", "sha512 only") {
		t.Fatalf("the restored file was not loaded:\n%s", logs)
	}
}
