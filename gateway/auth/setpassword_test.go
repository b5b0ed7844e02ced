package auth

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// testArgon2 keeps tests that are not about the default parameters cheap.
var testArgon2 = argon2Params{memory: 64, time: 1, threads: 1}

// setCheap is SetPassword with testArgon2.
func setCheap(t *testing.T, path, user, password string) error {
	t.Helper()
	hash, err := hashArgon2id([]byte(password), testArgon2)
	if err != nil {
		t.Fatal(err)
	}
	return setEntry(path, user, hash)
}

func readString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func modeOf(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// assertOnlyFiles fails when dir holds other names than want (a temporary
// file left behind).
func assertOnlyFiles(t *testing.T, dir string, want ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("directory holds %v, want %v", got, want)
	}
}

var phc = regexp.MustCompile(`^\$argon2id\$v=19\$m=65536,t=3,p=2\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$`)

// TestSetPasswordDefaultParameters is the one test that pays for
// HashPassword's real cost (64 MiB, three passes): once to hash, once to
// verify.
func TestSetPasswordDefaultParameters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "passwd")
	if err := SetPassword(path, "acme-alice", []byte("s3cret pass")); err != nil {
		t.Fatal(err)
	}
	user, hash, ok := strings.Cut(strings.TrimSuffix(readString(t, path), "\n"), ":")
	if !ok || user != "acme-alice" || !phc.MatchString(hash) {
		t.Fatalf("SetPassword wrote %q:%q, want acme-alice and a PHC string like %s", user, hash, phc)
	}
	if got := modeOf(t, path); got != 0o600 {
		t.Errorf("new file has mode %o, want 600", got)
	}
	f, err := LoadPasswordFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Verify("acme-alice", []byte("s3cret pass")) || f.Verify("acme-alice", []byte("s3cret pas")) {
		t.Fatal("the written entry does not verify exactly its password")
	}
}

func TestHashPasswordSalts(t *testing.T) {
	a, err := hashArgon2id([]byte("same"), testArgon2)
	if err != nil {
		t.Fatal(err)
	}
	b, err := hashArgon2id([]byte("same"), testArgon2)
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Fatal("two hashes of one password are equal: the salt is not random")
	}
	if strings.Contains(a, "same") {
		t.Fatal("the hash contains the password")
	}
}

func TestSetPasswordKeepsOtherLines(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "passwd")
	orig := "# Shoal users\r\n" + lineAlice7 + "\r\n\r\n# legacy\r\n" + lineCarol6 + "\r\n" + lineErin2y // no final newline
	if err := os.WriteFile(path, []byte(orig), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o640); err != nil { // whatever the umask
		t.Fatal(err)
	}

	// Replace the first user: only its line changes, in place, with its "\r\n".
	if err := setCheap(t, path, "acme-alice", "new alice"); err != nil {
		t.Fatal(err)
	}
	got := readString(t, path)
	lines := strings.Split(got, "\r\n")
	if len(lines) != 6 || !strings.HasPrefix(lines[1], "acme-alice:$argon2id$v=19$m=64,t=1,p=1$") {
		t.Fatalf("after replacing acme-alice the file is %q", got)
	}
	if want := strings.Replace(orig, lineAlice7, lines[1], 1); got != want {
		t.Fatalf("other lines changed:\n got %q\nwant %q", got, want)
	}
	if m := modeOf(t, path); m != 0o640 {
		t.Errorf("mode %o after SetPassword, want the old file's 640", m)
	}

	// Add a user: appended after the last line, which had no newline.
	if err := setCheap(t, path, "acme-bob", "bob pass"); err != nil {
		t.Fatal(err)
	}
	got2 := readString(t, path)
	if !strings.HasPrefix(got2, got+"\nacme-bob:$argon2id$") || !strings.HasSuffix(got2, "\n") {
		t.Fatalf("after adding acme-bob the file is %q", got2)
	}
	assertOnlyFiles(t, dir, "passwd")

	f, err := LoadPasswordFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for user, pass := range map[string]string{"acme-alice": "new alice", "acme-bob": "bob pass", "legacy-carol": "sha512 only", "acme-erin": "bcrypt pass"} {
		if !f.Verify(user, []byte(pass)) {
			t.Errorf("%s does not verify after SetPassword", user)
		}
	}
	if f.Verify("acme-alice", []byte("correct horse")) {
		t.Error("acme-alice's old password still verifies")
	}
	if f.Len() != 4 {
		t.Errorf("Len() = %d, want 4", f.Len())
	}
}

func TestSetPasswordRefuses(t *testing.T) {
	dir := t.TempDir()
	broken := filepath.Join(dir, "broken")
	content := lineAlice7 + "\nbob:plain text password\n"
	if err := os.WriteFile(broken, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	err := setCheap(t, broken, "carol", "x")
	if err == nil || !strings.Contains(err.Error(), "line 2: ") {
		t.Fatalf("SetPassword on a broken file: %v, want an error naming line 2", err)
	}
	if strings.Contains(err.Error(), "plain text password") {
		t.Fatalf("the error quotes the file: %v", err)
	}
	if readString(t, broken) != content {
		t.Fatal("a broken file was changed")
	}

	for _, user := range []string{"", "a:b", " lead", "trail ", "#comment", "new\nline", "\xff"} {
		path := filepath.Join(dir, "new")
		if err := SetPassword(path, user, []byte("x")); err == nil {
			t.Errorf("SetPassword accepted user %q", user)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("SetPassword with user %q created the file", user)
		}
	}
	assertOnlyFiles(t, dir, "broken")

	if err := setCheap(t, filepath.Join(dir, "missing-dir", "passwd"), "u", "x"); err == nil {
		t.Error("SetPassword into a missing directory succeeded")
	}
}

func TestSetPasswordFollowsSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "real")
	link := filepath.Join(dir, "link")
	if err := os.WriteFile(target, []byte(lineCarol6+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", link); err != nil {
		t.Fatal(err)
	}
	if err := setCheap(t, link, "u", "x"); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced by a file (%v)", err)
	}
	if !strings.Contains(readString(t, target), "\nu:$argon2id$") {
		t.Fatalf("the link's target was not updated: %q", readString(t, target))
	}
}
