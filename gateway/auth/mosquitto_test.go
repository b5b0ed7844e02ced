package auth

import (
	"crypto/sha512"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fixturePasswords are the passwords the files in testdata/ were made with
// (testdata/README.md).
var fixturePasswords = map[string]string{
	"acme-alice":   "correct horse",
	"acme-bob":     "pässwörd€",
	"legacy-carol": "sha512 only",
	"acme-dave":    "y:z",
	"acme-erin":    "bcrypt pass",
	"acme-frank":   "argon pass",
}

// checkFile loads path and checks that each user in want verifies with its
// password and with no other, and that the file holds exactly those users.
func checkFile(t *testing.T, path string, want map[string]string) {
	t.Helper()
	f, err := LoadPasswordFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Len() != len(want) {
		t.Errorf("%s: Len() = %d, want %d", path, f.Len(), len(want))
	}
	for user, pass := range want {
		if !f.Verify(user, []byte(pass)) {
			t.Errorf("%s: Verify(%s, right password) = false", path, user)
		}
		if f.Verify(user, []byte(pass+"x")) {
			t.Errorf("%s: Verify(%s, wrong password) = true", path, user)
		}
		if f.Verify(user+"x", []byte(pass)) {
			t.Errorf("%s: Verify(unknown user %sx, %s's password) = true", path, user, user)
		}
	}
}

func TestMosquittoPasswdFixture(t *testing.T) {
	want := map[string]string{}
	for _, u := range []string{"acme-alice", "acme-bob", "legacy-carol", "acme-dave"} {
		want[u] = fixturePasswords[u]
	}
	checkFile(t, filepath.Join("testdata", "mosquitto.passwd"), want)
}

func TestOtherToolsFixture(t *testing.T) {
	checkFile(t, filepath.Join("testdata", "others.passwd"), map[string]string{
		"acme-erin":  fixturePasswords["acme-erin"],
		"acme-frank": fixturePasswords["acme-frank"],
	})
}

// TestMosquittoPasswdLive makes a file with the mosquitto_passwd on this
// machine, both of its formats, and reads it.
func TestMosquittoPasswdLive(t *testing.T) {
	bin, err := exec.LookPath("mosquitto_passwd")
	if err != nil {
		t.Fatalf("mosquitto_passwd is not on PATH (Debian package mosquitto): %v; run scripts/test-deps.sh (make test does)", err)
	}
	path := filepath.Join(t.TempDir(), "passwd")
	users := []struct{ hash, user, pass string }{
		{"sha512-pbkdf2", "live-pbkdf2", "pbkdf2 ünïcode pass"},
		{"sha512", "live-sha512", "old style"},
		{"sha512-pbkdf2", "live-colon", "a:b$c"},
	}
	want := map[string]string{}
	for i, u := range users {
		args := []string{"-H", u.hash, "-b", path, u.user, u.pass}
		if i == 0 {
			args = append([]string{"-c"}, args...)
		}
		if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			t.Fatalf("mosquitto_passwd %s: %v: %s", u.user, err, out)
		}
		want[u.user] = u.pass
	}
	checkFile(t, path, want)
	for _, prefix := range []string{"live-pbkdf2:$7$", "live-sha512:$6$"} {
		if !fileHasPrefixLine(t, path, prefix) {
			t.Errorf("mosquitto_passwd wrote no line starting %q: the test does not cover that format", prefix)
		}
	}
}

func fileHasPrefixLine(t *testing.T, path, prefix string) bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

// TestSHA512Definition pins the $6$ definition from Mosquitto's source
// (SHA-512 over the password, then the salt bytes), independently of the
// fixture.
func TestSHA512Definition(t *testing.T) {
	salt := []byte("twelve bytes")
	sum := sha512.Sum512(append([]byte("pass word"), salt...))
	line := "u:$6$" + base64.StdEncoding.EncodeToString(salt) + "$" + base64.StdEncoding.EncodeToString(sum[:])
	f, err := ParsePasswordFile(strings.NewReader(line))
	if err != nil {
		t.Fatal(err)
	}
	if !f.Verify("u", []byte("pass word")) || f.Verify("u", []byte("pass word ")) {
		t.Fatal("the $6$ entry does not verify exactly its password")
	}
	swapped := sha512.Sum512(append(append([]byte{}, salt...), "pass word"...))
	line = "u:$6$" + base64.StdEncoding.EncodeToString(salt) + "$" + base64.StdEncoding.EncodeToString(swapped[:])
	if f, err = ParsePasswordFile(strings.NewReader(line)); err != nil || f.Verify("u", []byte("pass word")) {
		t.Fatalf("salt-then-password verified (err %v): the order is password then salt", err)
	}
}
