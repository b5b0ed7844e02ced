package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/shoal-mqtt/shoal/compose/broker/brokertest"
	"github.com/shoal-mqtt/shoal/compose/config"
)

// ctl runs `shoal ctl args…` and returns its exit code, stdout and stderr.
func ctl(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(t.Context(), append([]string{"ctl"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

// wantOneLine fails unless s is a single line naming want.
func wantOneLine(t *testing.T, s, want string) {
	t.Helper()
	if strings.Count(s, "\n") != 1 || !strings.HasSuffix(s, "\n") || !strings.Contains(s, want) {
		t.Errorf("stderr %q, want one line containing %q", s, want)
	}
}

func TestCtlAgainstShoalAll(t *testing.T) {
	var dir string
	b := brokertest.Start(t, func(c *config.Config) { dir = c.DataDir })
	server := "--server=" + b.Addr("admin").String()

	nc, err := net.DialTimeout("tcp", b.Addr("mqtt").String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	pc := paho.NewClient(paho.ClientConfig{Conn: nc, OnClientError: func(error) {}})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := pc.Connect(ctx, &paho.Connect{ClientID: "acme-sensor1", KeepAlive: 30, CleanStart: true}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pc.Disconnect(&paho.Disconnect{}) }()

	// Table: a header and a row per client.
	code, out, errOut := ctl(t, "clients", "list", server, "--data-dir", dir, "--tenant", "acme")
	if code != 0 || errOut != "" {
		t.Fatalf("clients list: exit %d, stderr %q", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "TENANT") || !strings.Contains(lines[0], "CLIENT_ID") ||
		!strings.Contains(lines[1], "acme-sensor1") {
		t.Errorf("clients table:\n%s", out)
	}
	// JSON: the stable field names.
	code, out, _ = ctl(t, "sessions", server, "--data-dir", dir, "--tenant", "acme", "--format", "json")
	var sl struct {
		Sessions []map[string]any `json:"sessions"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &sl) != nil || len(sl.Sessions) != 1 ||
		sl.Sessions[0]["client_id"] != "acme-sensor1" || sl.Sessions[0]["state"] != "connected" || sl.Sessions[0]["tenant"] != "acme" {
		t.Errorf("sessions --format json: exit %d\n%s", code, out)
	}
	// Flags may come before the command; the token from --token-file.
	code, out, _ = ctl(t, server, "--token-file", filepath.Join(dir, "admin.token"), "--tenant", "acme", "clients", "show", "acme-sensor1")
	if code != 0 || !strings.Contains(out, "client_id") || !strings.Contains(out, "acme-sensor1") {
		t.Errorf("clients show: exit %d\n%s", code, out)
	}

	// Failures: one line on stderr, exit 1.
	code, out, errOut = ctl(t, "kick", "acme-nobody", server, "--data-dir", dir, "--tenant", "acme")
	if code != 1 || out != "" {
		t.Errorf("kick of an unknown client: exit %d, stdout %q", code, out)
	}
	wantOneLine(t, errOut, `"acme-nobody"`)
	code, _, errOut = ctl(t, "clients", "show", "acme-nobody", server, "--data-dir", dir, "--tenant", "acme")
	if code != 1 {
		t.Errorf("show of an unknown client: exit %d", code)
	}
	wantOneLine(t, errOut, "not connected")
	bad := filepath.Join(t.TempDir(), "bad.token")
	if err := os.WriteFile(bad, []byte("wrong\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = ctl(t, "clients", server, "--token-file", bad, "--tenant", "acme")
	if code != 1 {
		t.Errorf("wrong token: exit %d", code)
	}
	wantOneLine(t, errOut, "401")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	_ = ln.Close()
	code, _, errOut = ctl(t, "clients", "--server", closed, "--data-dir", dir, "--tenant", "acme")
	if code != 1 {
		t.Errorf("unreachable server: exit %d", code)
	}
	wantOneLine(t, errOut, "cannot reach the admin API")
	code, _, errOut = ctl(t, "clients", server, "--data-dir", t.TempDir(), "--tenant", "acme")
	if code != 1 {
		t.Errorf("no token file: exit %d", code)
	}
	wantOneLine(t, errOut, "admin.token")

	// A wrong command line: one line, exit 2.
	for _, args := range [][]string{
		{"clients"},                      // no --tenant
		{"bogus", "--tenant", "acme"},    // unknown command
		{"kick", "--tenant", "acme"},     // no client
		{"clients", "--format", "yaml"},  // unknown format
		{"kick", "x", "--all-tenants"},   // a change names one tenant
		{"delete", "x", "--tenant", "a"}, // delete what
	} {
		code, _, errOut := ctl(t, append(args, server, "--data-dir", dir)...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
		if strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: stderr %q, want one line", args, errOut)
		}
	}
}

func TestCtlCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh"} {
		code, out, _ := ctl(t, "completion", shell)
		if code != 0 || out == "" {
			t.Fatalf("completion %s: exit %d, %d bytes", shell, code, len(out))
		}
		if sh, err := exec.LookPath(shell); err == nil {
			cmd := exec.CommandContext(t.Context(), sh, "-n")
			cmd.Stdin = strings.NewReader(out)
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s -n of the completion script: %v\n%s", shell, err, b)
			}
		}
		for _, w := range []string{"clients", "sessions", "subscriptions", "retained", "kick", "delete", "--tenant", "--format"} {
			if !strings.Contains(out, w) {
				t.Errorf("completion %s does not mention %s", shell, w)
			}
		}
	}
	if code, _, errOut := ctl(t, "completion", "fish"); code != 2 || errOut == "" {
		t.Errorf("completion fish: exit %d, stderr %q", code, errOut)
	}
	code, out, _ := ctl(t, "help")
	if code != 0 || !strings.Contains(out, "delete retained TOPIC") {
		t.Errorf("ctl help: exit %d\n%s", code, out)
	}
}

// TestEmptyClientIDIsAssigned: the CONNECT mosquitto_pub and mosquitto_sub
// 2.0 send without -i (3.1.1, clean session, an empty client identifier,
// captured from mosquitto-clients 2.0.11) gets an assigned identifier in
// the default tenant (README.md, "Tenancy"), not one of a tenant mosq.
func TestEmptyClientIDIsAssigned(t *testing.T) {
	var dir string
	b := brokertest.Start(t, func(c *config.Config) { dir = c.DataDir })
	nc, err := net.DialTimeout("tcp", b.Addr("mqtt").String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = nc.Close() }()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	mosquittoConnect := []byte{0x10, 0x0c, 0x00, 0x04, 'M', 'Q', 'T', 'T', 0x04, 0x02, 0x00, 0x3c, 0x00, 0x00}
	if _, err := nc.Write(mosquittoConnect); err != nil {
		t.Fatal(err)
	}
	connack := make([]byte, 4)
	if _, err := io.ReadFull(nc, connack); err != nil || !bytes.Equal(connack, []byte{0x20, 0x02, 0x00, 0x00}) {
		t.Fatalf("CONNACK % x, %v; want 20 02 00 00 (accepted)", connack, err)
	}
	server := "--server=" + b.Addr("admin").String()
	code, out, errOut := ctl(t, "clients", server, "--data-dir", dir, "--all-tenants", "--format", "json")
	var cl struct {
		Clients []struct {
			Tenant   string `json:"tenant"`
			ClientID string `json:"client_id"`
		} `json:"clients"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &cl) != nil {
		t.Fatalf("clients --all-tenants: exit %d, stderr %q\n%s", code, errOut, out)
	}
	if len(cl.Clients) != 1 || cl.Clients[0].Tenant != "" || !regexp.MustCompile(`^shoal[0-9a-f]{24}$`).MatchString(cl.Clients[0].ClientID) {
		t.Errorf("clients %+v, want one of the default tenant with an assigned identifier shoal<24 hex digits>", cl.Clients)
	}
}
