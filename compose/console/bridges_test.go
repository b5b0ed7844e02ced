package console_test

import (
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/shoal-mqtt/shoal/bridge"
	"github.com/shoal-mqtt/shoal/compose/admin"
	"github.com/shoal-mqtt/shoal/compose/console"
)

// fakeBridge is a Kafka data bridge's mappings.
type fakeBridge []bridge.MappingStatus

func (f fakeBridge) Status() []bridge.MappingStatus { return f }

// TestConsoleBridgesPage: the bridges page lists a bridge's mappings with
// their lag and state, a tenant's login its tenant's alone, from a console
// made over an admin API of a bridge alone.
func TestConsoleBridgesPage(t *testing.T) {
	br := fakeBridge{
		{Direction: "out", Name: "acme-telemetry", Tenant: "acme", From: "sensors/#", To: "acme.telemetry", Lag: 42, LagKnown: true, Running: true},
		{Direction: "in", Name: "globex-commands", Tenant: "globex", From: "globex.commands", To: "cmd/{key}"},
	}
	api := admin.Handler(admin.Roles{Bridge: br}, "admin-secret", slog.New(slog.DiscardHandler))
	tokens := t.TempDir() + "/tokens"
	acme, err := console.AddToken(tokens, "acme")
	if err != nil {
		t.Fatal(err)
	}
	f, err := openTokens(t, tokens)
	if err != nil {
		t.Fatal(err)
	}
	c, err := console.New(console.Options{
		API:        &admin.APIClient{Servers: []string{admin.LocalServer}, Token: "admin-secret", HTTP: &http.Client{Transport: admin.LocalTransport(api, nil)}},
		AdminToken: "admin-secret", Tenants: f,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	page := func(token string) string {
		t.Helper()
		jar, _ := cookiejar.New(nil)
		u := &user{t: t, base: srv.URL, hc: &http.Client{Jar: jar}}
		resp, err := u.hc.PostForm(srv.URL+"/login", url.Values{"token": {token}})
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		code, body := u.get("/bridges")
		if code != http.StatusOK {
			t.Fatalf("/bridges: %d", code)
		}
		return body
	}
	all := page("admin-secret")
	for _, want := range []string{"acme-telemetry", "MQTT → Kafka", "sensors/#", "<td class=\"num\">42</td>", "globex-commands", "Kafka → MQTT", "starting"} {
		if !strings.Contains(all, want) {
			t.Errorf("the admin's bridges page lacks %q:\n%s", want, all)
		}
	}
	if mine := page(acme); !strings.Contains(mine, "acme-telemetry") || strings.Contains(mine, "globex") {
		t.Errorf("acme's bridges page:\n%s", mine)
	}
}
