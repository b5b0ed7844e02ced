package kafka

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestEmbeddedAcceptsOnlyItsProcess: by default the embedded broker opens
// no TCP listener and no socket: it advertises a host that resolves
// nowhere, and only this process's clients, through Dial and with the
// credentials, reach it.
func TestEmbeddedAcceptsOnlyItsProcess(t *testing.T) {
	before := listeningTCP(t)
	dir := t.TempDir()
	e := startEmbedded(t, dir)
	if got, want := e.Addrs(), []string{EmbeddedHost + ":9092"}; len(got) != 1 || got[0] != want[0] {
		t.Fatalf("Addrs() = %v, want %v", got, want)
	}
	if after := listeningTCP(t); after != nil && len(after) != len(before) {
		t.Errorf("the process listens on %d TCP sockets after StartEmbedded, %d before", len(after), len(before))
	}
	if _, err := os.Stat(filepath.Join(dir, SocketName)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a socket exists without EmbeddedConfig.Socket: %v", err)
	}
	newTestClient(t, e, Config{}) // this process's clients reach it

	// A client that dials the network does not.
	cfg := e.ClientConfig(Config{})
	cfg.Dial = nil
	expectNoBroker(t, cfg)
	// Nor one of this process without the credentials, or with others.
	cfg = e.ClientConfig(Config{})
	cfg.SASL = nil
	expectNoBroker(t, cfg)
	cfg = e.ClientConfig(Config{})
	cfg.SASL.Password = "guess"
	expectNoBroker(t, cfg)
}

// TestEmbeddedTCPNeedsCredentials: the TCP listener of
// kafka.embedded_addr refuses a client without the SCRAM credentials.
func TestEmbeddedTCPNeedsCredentials(t *testing.T) {
	e := startEmbedded2(t, EmbeddedConfig{Dir: t.TempDir(), Addr: "127.0.0.1:0"})
	if strings.HasPrefix(e.Addrs()[0], EmbeddedHost) {
		t.Fatalf("Addrs() = %v, want the TCP address", e.Addrs())
	}
	expectNoBroker(t, Config{Brokers: e.Addrs()})
	cfg := e.ClientConfig(Config{})
	cfg.Dial = nil // over TCP
	newTestClient(t, e, cfg)
}

// expectNoBroker checks that a client with cfg cannot reach a broker.
func expectNoBroker(t *testing.T, cfg Config) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := NewClient(ctx, cfg, testLogger(t))
	if err == nil {
		c.Close()
		t.Fatalf("a client with %s reached the embedded broker", describe(cfg))
	}
}

func describe(cfg Config) string {
	return fmt.Sprintf("brokers %v, dial set %t, sasl %v", cfg.Brokers, cfg.Dial != nil, cfg.SASL)
}

// TestEmbeddedSocket: with EmbeddedConfig.Socket, a tool of another
// process attaches through the Unix socket in the directory (mode 0600,
// its directory 0700) with the credentials kept there (0600), which stay
// the same across restarts. A socket file left by a killed process is
// replaced; Close removes the socket.
func TestEmbeddedSocket(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "k")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, SocketName)
	if err := os.WriteFile(sock, []byte("left by a killed process"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := startEmbedded2(t, EmbeddedConfig{Dir: dir, Socket: true})
	for path, want := range map[string]fs.FileMode{dir: fs.ModeDir | 0o700, sock: fs.ModeSocket | 0o600, filepath.Join(dir, CredentialsName): 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s has mode %v, want %v", path, fi.Mode(), want)
		}
	}
	cfg, err := AttachEmbedded(dir)
	if err != nil {
		t.Fatal(err)
	}
	tool := newAttached(t, cfg)
	inproc := newTestClient(t, e, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := tool.ProduceSync(ctx, &Record{Topic: TopicSessions, Key: []byte("t/tool"), Partition: 0, Value: []byte("over the socket")}); err != nil {
		t.Fatal(err)
	}
	if got := consumeN(t, inproc, ConsumeConfig{Topic: TopicSessions, Partitions: []int32{0}}, 1); string(got[0].Value) != "over the socket" {
		t.Errorf("in-process client read %q", got[0].Value)
	}
	bad := cfg
	s := *cfg.SASL
	s.Password = "guess"
	bad.SASL = &s
	expectNoBroker(t, bad)
	tool.Close()

	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sock); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket after Close: %v", err)
	}
	if _, err := AttachEmbedded(dir); err == nil || !strings.Contains(err.Error(), "running") {
		t.Errorf("AttachEmbedded of a stopped broker: %v", err)
	}
	startEmbedded2(t, EmbeddedConfig{Dir: dir, Socket: true})
	again, err := AttachEmbedded(dir)
	if err != nil {
		t.Fatal(err)
	}
	if again.SASL.Password != cfg.SASL.Password {
		t.Error("the credentials changed across a restart")
	}
	newAttached(t, again)
}

func newAttached(t *testing.T, cfg Config) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	c, err := NewClient(ctx, cfg, testLogger(t))
	if err != nil {
		t.Fatalf("attached client: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestEmbeddedSocketPathTooLong: a directory too deep for a socket
// address starts without the socket, saying so, rather than failing.
func TestEmbeddedSocketPathTooLong(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 120))
	e := startEmbedded2(t, EmbeddedConfig{Dir: dir, Socket: true})
	if e.socket != "" {
		t.Errorf("socket = %q", e.socket)
	}
	newTestClient(t, e, Config{})
}

// TestCredentialsErrorsKeepTheSecret: a credentials file that does not
// parse is named in the error, its password is not.
func TestCredentialsErrorsKeepTheSecret(t *testing.T) {
	const secret = "hunter2-very-secret"
	for name, body := range map[string]string{
		"mechanism": "sasl.mechanisms=GSSAPI\nsasl.username=shoal\nsasl.password=" + secret + "\n",
		"user":      "sasl.mechanisms=SCRAM-SHA-512\nsasl.password=" + secret + "\n",
		"line":      "sasl.password=" + secret + "\ngarbage\n",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), CredentialsName)
			if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := readCredentials(path)
			if err == nil {
				t.Fatal("readCredentials succeeded")
			}
			if strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %q", err)
			}
			if s := fmt.Sprintf("%v %+v %#v", SASL{Password: secret}, SASL{Password: secret}, SASL{Password: secret}); strings.Contains(s, secret) {
				t.Errorf("SASL printed as %q", s)
			}
		})
	}
}

// listeningTCP returns the inodes of the TCP sockets this process listens
// on (Linux; nil elsewhere).
func listeningTCP(t *testing.T) map[string]bool {
	t.Helper()
	if runtime.GOOS != "linux" {
		return nil
	}
	mine := map[string]bool{}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(l, "socket:[") {
			mine[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	listening := map[string]bool{}
	for _, table := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) > 9 && fields[3] == "0A" && mine[fields[9]] { // 0A: LISTEN
				listening[fields[9]] = true
			}
		}
		_ = f.Close()
	}
	return listening
}
