package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoal-mqtt/shoal/gateway/auth"
)

const testPassword = "s3cret: pässword"

// assertNoPassword fails when the output quotes the password.
func assertNoPassword(t *testing.T, outputs ...string) {
	t.Helper()
	for _, out := range outputs {
		if strings.Contains(out, testPassword) || strings.Contains(out, "s3cret") {
			t.Errorf("the output contains the password: %q", out)
		}
	}
}

func TestRunPasswdFromStdin(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "passwd")
	// A file mosquitto_passwd made: its entry must survive.
	mosq, err := os.ReadFile(filepath.Join("..", "..", "gateway", "auth", "testdata", "mosquitto.passwd"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, mosq, 0o640); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := runPasswd([]string{path, "acme-new"}, strings.NewReader(testPassword+"\r\nsecond line ignored\n"), &stdout, &stderr)
	if code != 0 {
		t.Fatalf("runPasswd = %d, stderr %q", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), `"acme-new"`) {
		t.Errorf("stdout %q does not confirm the user", stdout.String())
	}
	assertNoPassword(t, stdout.String(), stderr.String())

	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(got, mosq) {
		t.Fatalf("the existing entries changed:\n%s", got)
	}
	f, err := auth.LoadPasswordFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Verify("acme-new", []byte(testPassword)) {
		t.Fatal("the new user does not verify with the password from stdin")
	}
	if f.Verify("acme-new", []byte(testPassword+"\r")) || !f.Verify("acme-alice", []byte("correct horse")) {
		t.Fatal("the line end became part of the password, or an old user was lost")
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode after shoal passwd: %v %v, want 640", fi.Mode(), err)
	}
}

func TestRunPasswdRefuses(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "passwd")
	for _, c := range []struct {
		name  string
		args  []string
		stdin string
		code  int
		say   string
	}{
		{"no arguments", nil, testPassword, 2, "usage: shoal passwd FILE USER"},
		{"one argument", []string{path}, testPassword, 2, "usage: shoal passwd FILE USER"},
		{"three arguments", []string{path, "u", "v"}, testPassword, 2, "usage: shoal passwd FILE USER"},
		{"help", []string{"-h"}, "", 0, "usage: shoal passwd FILE USER"},
		{"empty stdin", []string{path, "u"}, "", 1, "empty password"},
		{"empty line", []string{path, "u"}, "\n" + testPassword, 1, "empty password"},
		{"too long", []string{path, "u"}, strings.Repeat("x", 70000), 1, "longer than 65535"},
		{"colon in user", []string{path, "a:b"}, testPassword, 1, "user name contains ':'"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runPasswd(c.args, strings.NewReader(c.stdin), &stdout, &stderr)
			if code != c.code || !strings.Contains(stderr.String(), c.say) {
				t.Errorf("runPasswd = %d, stderr %q; want %d and %q", code, stderr.String(), c.code, c.say)
			}
			assertNoPassword(t, stdout.String(), stderr.String())
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Fatalf("a refused command created the file (%v)", err)
			}
		})
	}
}

func TestRunDispatchesPasswd(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"passwd"}, &stdout, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), "usage: shoal passwd FILE USER") {
		t.Fatalf("shoal passwd without arguments = %d, stderr %q", code, stderr.String())
	}
	stdout.Reset()
	if run(context.Background(), []string{"help"}, &stdout, &stderr) != 0 || !strings.Contains(stdout.String(), "passwd") {
		t.Fatalf("shoal help does not list passwd: %q", stdout.String())
	}
}

// TestShoalPasswdProcess runs the command as a process (TestMain stands in
// for the binary), so its stdin is a real pipe: not a terminal, one line.
func TestShoalPasswdProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "passwd")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "SHOAL_TEST_RUN_MAIN=1", "SHOAL_TEST_ARGS=passwd\x1f"+path+"\x1facme-proc")
	cmd.Stdin = strings.NewReader(testPassword + "\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("shoal passwd: %v: %s", err, out)
	}
	assertNoPassword(t, string(out))
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("new password file has mode %o, want 600", fi.Mode().Perm())
	}
	p, err := auth.OpenPasswords(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Authenticate("acme-proc", []byte(testPassword)); err != nil {
		t.Fatalf("the user written by the process does not authenticate: %v", err)
	}
}
