package console_test

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/compose/broker"
	"github.com/shoal-mqtt/shoal/compose/config"
	"github.com/shoal-mqtt/shoal/compose/console"
	"github.com/shoal-mqtt/shoal/internal/testutil/testpki"
)

// TestConsoleTokensFile: tokens are added and revoked by tenant, the file
// holds their hashes alone (mode 0600), and a bad line is named.
func TestConsoleTokensFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	a1, err := console.AddToken(path, "acme")
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := console.AddToken(path, "acme")
	d, _ := console.AddToken(path, "")
	g, _ := console.AddToken(path, "globex:east") // a colon in the name
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{a1, a2, d, g} {
		if !strings.HasPrefix(tok, console.TokenPrefix) || strings.Contains(string(b), tok) {
			t.Fatalf("token %q: no prefix, or in the file", tok)
		}
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("tokens file mode %v, want 0600", fi.Mode().Perm())
	}
	tt, err := console.ParseTenantTokens(strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]string{a1: "acme", a2: "acme", d: "", g: "globex:east"} {
		if got, ok := tt.Lookup(tok); !ok || got != want {
			t.Errorf("Lookup(%q) = %q, %v; want %q", tok, got, ok, want)
		}
	}
	if _, ok := tt.Lookup(a1 + "x"); ok {
		t.Error("a changed token opens a tenant")
	}
	if n, err := console.RevokeTokens(path, "acme"); err != nil || n != 2 {
		t.Fatalf("revoke acme: %d, %v; want 2", n, err)
	}
	b, _ = os.ReadFile(path)
	tt, _ = console.ParseTenantTokens(strings.NewReader(string(b)))
	if _, ok := tt.Lookup(a1); ok || tt.Len() != 2 {
		t.Errorf("after the revoke: %d tokens, acme's found %v", tt.Len(), ok)
	}
	for text, want := range map[string]string{
		"acme:sha256:zz\n":     "line 1: the hash is not 64 hex digits",
		"# c\n\nacme:secret\n": "line 3: not TENANT:sha256:HEX",
		console.TokenLine("a", "t") + "\n" + console.TokenLine("b", "t") + "\n": `line 2: the same token is tenant "a"'s and "b"'s`,
	} {
		if _, err := console.ParseTenantTokens(strings.NewReader(text)); err == nil || err.Error() != want {
			t.Errorf("parse %q: %v, want %q", text, err, want)
		}
	}
}

// TestConsoleOverTLS: with admin.tls_cert_file the admin listener speaks
// TLS and the session cookie is Secure.
func TestConsoleOverTLS(t *testing.T) {
	ca := testpki.NewCA(t, "console-ca")
	leaf := ca.Server(t)
	dir := t.TempDir()
	cert := testpki.WriteFile(t, dir, "cert.pem", leaf.CertPEM)
	key := testpki.WriteFile(t, dir, "key.pem", leaf.KeyPEM)
	s := startSite(t, func(c *config.Config) { c.Admin.TLSCertFile, c.Admin.TLSKeyFile = cert, key })
	base := strings.Replace(s.url, "http://", "https://", 1)
	hc := &http.Client{
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := hc.PostForm(base+"/login", url.Values{"token": {s.admin}})
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	cks := resp.Cookies()
	if resp.StatusCode != http.StatusSeeOther || len(cks) != 1 || !cks[0].Secure || !cks[0].HttpOnly {
		t.Fatalf("login over TLS: %s, cookies %+v; want 303 and a Secure, HttpOnly cookie", resp.Status, cks)
	}
	// The admin API is on the same TLS listener.
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/roles", nil)
	req.Header.Set("Authorization", "Bearer "+s.admin)
	resp, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/roles over TLS: %s", resp.Status)
	}
}

// TestConsoleRefusesABadTokensFile: a broker whose tokens file does not
// parse does not start, and says which key and which line.
func TestConsoleRefusesABadTokensFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte("acme:sha256:"+strings.Repeat("a", 64)+"\nglobex:plaintext-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.DataDir, cfg.HTTPListen, cfg.Admin.Listen = t.TempDir(), "", "127.0.0.1:0"
	cfg.Gateway.MQTTListen, cfg.Gateway.WSListen = "127.0.0.1:0", ""
	cfg.Admin.ConsoleTokensFile = path
	b := broker.New(cfg, slog.New(slog.DiscardHandler), "test", broker.WithAdminUI(console.UI))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	err := b.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "admin.console_tokens_file") || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("run with a bad tokens file: %v; want an error naming admin.console_tokens_file and line 2", err)
	}
}
