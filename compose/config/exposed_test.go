package config

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOperatorListenersDefaultToLoopback: without a setting, http_listen
// (metrics, probes, profiles: no authentication) and admin.listen listen
// on loopback only, and nothing is exposed.
func TestOperatorListenersDefaultToLoopback(t *testing.T) {
	c, err := Load("shoal all", nil, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPListen != "127.0.0.1:9090" || c.Admin.Listen != "127.0.0.1:9091" {
		t.Errorf("http_listen %q, admin.listen %q; want 127.0.0.1:9090 and 127.0.0.1:9091", c.HTTPListen, c.Admin.Listen)
	}
	if e := c.Exposed(true); len(e) != 0 {
		t.Errorf("defaults expose %+v, want nothing", e)
	}
}

// TestExposedListeners: each operators' listener beyond loopback is
// reported with its key, its address and what it exposes; the admin
// listener only when the process serves the admin API.
func TestExposedListeners(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		all  bool
		want []string // key=addr: warning substring
	}{
		{"loopback", []string{"--http-listen", "[::1]:9090", "--admin-listen", "localhost:9091"}, true, nil},
		{"http everywhere", []string{"--http-listen", ":9090"}, true,
			[]string{"http_listen=:9090: /metrics, /healthz and /readyz are served to anyone"}},
		{"http and pprof", []string{"--http-listen", "0.0.0.0:9090", "--pprof", "true"}, true,
			[]string{"http_listen=0.0.0.0:9090: /metrics, /healthz, /readyz, /debug/pprof/ and /debug/memory"}},
		{"http off", []string{"--http-listen", "", "--admin-listen", ""}, true, nil},
		{"admin of shoal all", []string{"--admin-listen", "10.0.0.5:9091"}, true,
			[]string{"admin.listen=10.0.0.5:9091: admin API on a listener beyond loopback"}},
		{"admin of a role without a token", []string{"--admin-listen", ":9091"}, false, nil},
		{"admin over TLS", []string{"--admin-listen", ":9091", "--admin-tls-cert-file", "/run/c.pem", "--admin-tls-key-file", "/run/k.pem"}, true, nil},
		{"admin of a role with a token", []string{"--admin-listen", ":9091", "--admin-token-file", "/run/token", "--http-listen", ":9090"}, false,
			[]string{"http_listen=:9090: no authentication", "admin.listen=:9091: its bearer token crosses the network unencrypted"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load("shoal all", tc.args, env(nil), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			got := c.Exposed(tc.all)
			if len(got) != len(tc.want) {
				t.Fatalf("exposed %+v, want %d listeners", got, len(tc.want))
			}
			for i, w := range tc.want {
				key, rest, _ := strings.Cut(w, "=")
				addr, warning, _ := strings.Cut(rest, ": ")
				if got[i].Key != key || got[i].Addr != addr || !strings.Contains(got[i].Warning, warning) {
					t.Errorf("exposed %+v, want %s at %s saying %q", got[i], key, addr, warning)
				}
			}
		})
	}
}

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:9090": true, "127.1.2.3:1": true, "[::1]:9090": true, "localhost:9090": true,
		":9090": false, "0.0.0.0:9090": false, "[::]:9090": false, "10.0.0.5:9090": false,
		"example.com:9090": false, "garbage": false,
	} {
		if got := Loopback(addr); got != want {
			t.Errorf("Loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// TestBadFlagsAreOneLine: Load prints nothing for a command line that
// does not parse and says in its error which flag and where the flags
// are listed; -h prints them.
func TestBadFlagsAreOneLine(t *testing.T) {
	var out strings.Builder
	for args, want := range map[string]string{
		"--foo":         "unknown flag --foo; see shoal gateway -h",
		"-foo":          "unknown flag --foo; see shoal gateway -h",
		"--mqtt-listen": "flag needs an argument: --mqtt-listen; see shoal gateway -h",
		"stray":         `unexpected argument "stray"; see shoal gateway -h`,
	} {
		_, err := Load("shoal gateway", strings.Fields(args), env(nil), &out)
		if err == nil || err.Error() != want {
			t.Errorf("Load(%s): %v, want %q", args, err, want)
		}
	}
	if out.Len() > 0 {
		t.Errorf("Load printed %q for bad command lines, want nothing", out.String())
	}
	if _, err := Load("shoal gateway", []string{"-h"}, env(nil), &out); err == nil {
		t.Error("Load(-h): no error, want flag.ErrHelp")
	}
	if !strings.HasPrefix(out.String(), "usage: shoal gateway [flags]\n") || !strings.Contains(out.String(), "SHOAL_HTTP_LISTEN") {
		t.Errorf("Load(-h) printed %.300q, want the usage line and the flags", out.String())
	}
}

// TestAdminConsoleKeysChecked: the admin listener's TLS takes both files
// or neither, and a console server may not be empty; each error names its
// key.
func TestAdminConsoleKeysChecked(t *testing.T) {
	for args, want := range map[string]string{
		"--admin-tls-cert-file /run/c.pem": "admin.tls_cert_file and admin.tls_key_file: give both or neither",
		"--admin-tls-key-file /run/k.pem":  "admin.tls_cert_file and admin.tls_key_file: give both or neither",
		"--admin-console maybe":            "admin.console",
	} {
		_, err := Load("shoal all", strings.Fields(args), env(nil), io.Discard)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", args, err, want)
		}
	}
	yml := filepath.Join(t.TempDir(), "shoal.yaml")
	if err := os.WriteFile(yml, []byte("admin:\n  console_servers: [gw-a:9091, \"\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load("shoal all", []string{"--config", yml}, env(nil), io.Discard); err == nil || !strings.Contains(err.Error(), "admin.console_servers[1]: empty") {
		t.Errorf("an empty console server in YAML: %v", err)
	}
	c, err := Load("shoal all", nil, env(map[string]string{"SHOAL_ADMIN_CONSOLE_SERVERS": "dns+http://shoal-gateway-admin:9091,session-1:9091"}), io.Discard)
	if err != nil || !c.Admin.Console || len(c.Admin.ConsoleServers) != 2 || c.Admin.ConsoleServers[0] != "dns+http://shoal-gateway-admin:9091" {
		t.Errorf("SHOAL_ADMIN_CONSOLE_SERVERS: %+v, %v", c.Admin, err)
	}
}
