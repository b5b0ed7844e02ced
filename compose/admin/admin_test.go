package admin

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shoal-mqtt/shoal/bridge"
	routersvc "github.com/shoal-mqtt/shoal/router-svc"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
	sessionsvc "github.com/shoal-mqtt/shoal/session-svc"
)

// fakeSessions owns the clients in owned; it records the commands.
type fakeSessions struct {
	owned    map[string]*sessionsvc.Session // client id → session (nil: owned, none)
	commands []string
}

func (f *fakeSessions) SessionsPage(_ context.Context, tenant string, all bool, p sessionsvc.Page) ([]*sessionsvc.Session, bool) {
	var keys []sessionKey
	for _, s := range f.owned {
		if s != nil && (all || s.Tenant == tenant) {
			keys = append(keys, sessionKey{s})
		}
	}
	slices.SortFunc(keys, comparePage)
	page, more := cut(keys, Page{Search: p.Search, AfterTenant: p.AfterTenant, AfterClient: p.AfterClient, Limit: p.Limit})
	var out []*sessionsvc.Session
	for _, k := range page {
		out = append(out, k.s)
	}
	return out, more
}

func (f *fakeSessions) Session(_ context.Context, tenant, id string) (*sessionsvc.Session, error) {
	s, owned := f.owned[id]
	switch {
	case !owned:
		return nil, sessionsvc.ErrNotOwned
	case s == nil || s.Tenant != tenant:
		return nil, sessionsvc.ErrNoSession
	}
	return s, nil
}

func (f *fakeSessions) Command(ctx context.Context, tenant, id string, op eventspb.SessionCommand_Op, _ string) error {
	if _, err := f.Session(ctx, tenant, id); err != nil {
		return err
	}
	f.commands = append(f.commands, op.String()+" "+tenant+"/"+id)
	return nil
}

func serve(t *testing.T, roles Roles) string {
	t.Helper()
	srv := httptest.NewServer(Handler(roles, "secret", slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestHandlerRefusesWrongToken(t *testing.T) {
	url := serve(t, Roles{})
	for _, auth := range []string{"", "Bearer", "Bearer ", "Bearer wrong", "Bearer secre", "Basic secret", "bearer wrong", "Bearersecret", "Bear secret"} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url+"/v1/roles", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("Authorization %q: %d, want 401", auth, resp.StatusCode)
		}
	}
}

// TestHandlerTakesTheSchemeInAnyCase: the authentication scheme is
// case-insensitive (RFC 9110 §11.1), and one or more spaces separate it
// from the token (§11.4).
func TestHandlerTakesTheSchemeInAnyCase(t *testing.T) {
	url := serve(t, Roles{})
	for _, auth := range []string{"Bearer secret", "bearer secret", "BEARER secret", "bEaReR secret", "Bearer   secret"} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url+"/v1/roles", nil)
		req.Header.Set("Authorization", auth)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("Authorization %q: %d, want 200", auth, resp.StatusCode)
		}
	}
}

func TestHandlerNeedsATenant(t *testing.T) {
	url := serve(t, Roles{Sessions: &fakeSessions{}})
	c := &APIClient{Servers: []string{url}, Token: "secret"}
	err := c.do(t.Context(), http.MethodGet, url, "/v1/sessions", nil, nil)
	if !isStatus(err, http.StatusBadRequest) {
		t.Errorf("listing without a tenant: %v, want 400", err)
	}
	err = c.do(t.Context(), http.MethodPost, url, "/v1/kick", Scope{AllTenants: true}.values(), nil)
	if !isStatus(err, http.StatusBadRequest) {
		t.Errorf("kick of every tenant: %v, want 400", err)
	}
	// The default tenant is tenant= with an empty value.
	if _, err := c.Sessions(t.Context(), Scope{Tenant: ""}, ""); err != nil {
		t.Errorf("sessions of the default tenant: %v", err)
	}
}

// A distributed deployment: two session services, each owning its
// clients; the client asks the next when one answers 421.
func TestClientFindsTheOwner(t *testing.T) {
	a := &fakeSessions{owned: map[string]*sessionsvc.Session{"acme-1": {Tenant: "acme", ClientID: "acme-1", Active: true, Online: true}}}
	b := &fakeSessions{owned: map[string]*sessionsvc.Session{"acme-2": {Tenant: "acme", ClientID: "acme-2", Active: true}, "acme-3": nil}}
	c := &APIClient{Servers: []string{serve(t, Roles{Sessions: a}) + "/", strings.TrimPrefix(serve(t, Roles{Sessions: b}), "http://")}, Token: "secret"}
	all, err := c.Sessions(t.Context(), Scope{Tenant: "acme"}, "")
	if err != nil || len(all) != 2 || all[0].ClientID != "acme-1" || all[0].State != "connected" || all[1].State != "offline" {
		t.Fatalf("merged sessions %+v, %v", all, err)
	}
	one, err := c.Sessions(t.Context(), Scope{Tenant: "acme"}, "acme-2")
	if err != nil || len(one) != 1 || one[0].ClientID != "acme-2" {
		t.Errorf("session acme-2: %+v, %v", one, err)
	}
	if _, err := c.Kick(t.Context(), "acme", "acme-2"); err != nil {
		t.Fatal(err)
	}
	if len(a.commands) != 0 || len(b.commands) != 1 || b.commands[0] != "OP_KICK acme/acme-2" {
		t.Errorf("commands: first %v, second %v; want the kick at the second alone", a.commands, b.commands)
	}
	if _, err := c.DeleteSession(t.Context(), "acme", "acme-3"); err == nil || !strings.Contains(err.Error(), "no session") {
		t.Errorf("deletion of no session: %v", err)
	}
	if _, err := c.Kick(t.Context(), "acme", "acme-9"); err == nil || !strings.Contains(err.Error(), "no session service given owns") {
		t.Errorf("kick of a client nobody owns: %v", err)
	}
	if _, err := c.Clients(t.Context(), Scope{Tenant: "acme"}, ""); err == nil || !strings.Contains(err.Error(), "runs a gateway") {
		t.Errorf("clients without a gateway: %v", err)
	}
}

func TestRouterQueryPassesFilters(t *testing.T) {
	r := &fakeRouter{}
	url := serve(t, Roles{Router: r})
	c := &APIClient{Servers: []string{url}, Token: "secret"}
	if _, err := c.Subscriptions(t.Context(), Scope{Tenant: "acme"}, "acme-1", "a/+"); err != nil {
		t.Fatal(err)
	}
	if want := (routersvc.Query{Tenant: "acme", Client: "acme-1", Filter: "a/+"}); r.q != want {
		t.Errorf("query %+v, want %+v", r.q, want)
	}
}

type fakeRouter struct{ q routersvc.Query }

func (f *fakeRouter) Subscriptions(_ context.Context, q routersvc.Query) ([]routersvc.Subscription, error) {
	f.q = q
	return nil, nil
}

func (f *fakeRouter) Retained(_ context.Context, q routersvc.Query) ([]*eventspb.Envelope, error) {
	f.q = q
	return nil, nil
}

func (f *fakeRouter) DeleteRetained(context.Context, string, string) error {
	return routersvc.ErrNoRetained
}

func TestTokenMadeOnceWithMode0600(t *testing.T) {
	dir := t.TempDir()
	tok, path, err := LoadOrCreateToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 || len(tok) < 40 || path != filepath.Join(dir, TokenFileName) {
		t.Fatalf("token file %s: %v %v, token of %d characters", path, st.Mode(), err, len(tok))
	}
	again, _, err := LoadOrCreateToken(dir)
	if err != nil || again != tok {
		t.Errorf("second start read %q (%v), want the same token", again, err)
	}
	if err := os.WriteFile(path, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadToken(path); err == nil || strings.Contains(err.Error(), tok) {
		t.Errorf("empty token file: %v", err)
	}
}

// TestCtlBadFlagIsOneLine: an unknown flag, or one without its value, is
// one line naming it as the help spells it, exit 2.
func TestCtlBadFlagIsOneLine(t *testing.T) {
	for args, want := range map[string]string{
		"clients --foo":    "shoal ctl: unknown flag --foo; see shoal ctl -h\n",
		"clients --tenant": "shoal ctl: flag needs an argument: --tenant; see shoal ctl -h\n",
	} {
		var out, errOut strings.Builder
		code := Ctl(t.Context(), strings.Fields(args), &out, &errOut, nil)
		if code != ExitUsage || out.Len() > 0 || errOut.String() != want {
			t.Errorf("shoal ctl %s: exit %d, stdout %q, stderr %q; want %d and %q", args, code, out.String(), errOut.String(), ExitUsage, want)
		}
	}
}

type fakeBridge []bridge.MappingStatus

func (f fakeBridge) Status() []bridge.MappingStatus { return f }

// TestCtlBridges: shoal ctl bridges lists each mapping of the tenant once
// across the bridge instances given, with its lag ("-" not measured) and
// "running" when any instance runs it.
func TestCtlBridges(t *testing.T) {
	one := fakeBridge{
		{Direction: "out", Name: "telemetry", Tenant: "acme", From: "plant/+/telemetry", To: "iot.telemetry", Lag: 42, LagKnown: true, Running: true},
		{Direction: "in", Name: "commands", Tenant: "acme", From: "iot.commands", To: "plant/{key}/command"},
		{Direction: "out", Name: "other", Tenant: "other", From: "#", To: "other.all", LagKnown: true},
	}
	two := fakeBridge{
		{Direction: "out", Name: "telemetry", Tenant: "acme", From: "plant/+/telemetry", To: "iot.telemetry", Lag: 42, LagKnown: true, Running: true},
		{Direction: "in", Name: "commands", Tenant: "acme", From: "iot.commands", To: "plant/{key}/command", Running: true},
	}
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"bridges", "--server", serve(t, Roles{Bridge: one}) + "," + serve(t, Roles{Bridge: two}), "--token-file", tok, "--tenant", "acme"}
	var out, errOut strings.Builder
	if code := Ctl(t.Context(), args, &out, &errOut, nil); code != ExitOK {
		t.Fatalf("shoal ctl bridges: exit %d, %s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := [][]string{
		{"DIRECTION", "NAME", "TENANT", "FROM", "TO", "LAG", "STATE"},
		{"out", "telemetry", "acme", "plant/+/telemetry", "iot.telemetry", "42", "running"},
		{"in", "commands", "acme", "iot.commands", "plant/{key}/command", "-", "running"},
	}
	if len(lines) != len(want) {
		t.Fatalf("shoal ctl bridges printed\n%s\nwant %d lines", out.String(), len(want))
	}
	for i, w := range want {
		if got := strings.Fields(lines[i]); strings.Join(got, " ") != strings.Join(w, " ") {
			t.Errorf("line %d: %q, want %q", i, got, w)
		}
	}
	out.Reset()
	if code := Ctl(t.Context(), append(args[:len(args)-2], "--all-tenants", "--format", "json"), &out, &errOut, nil); code != ExitOK ||
		!strings.Contains(out.String(), `"name": "other"`) || !strings.Contains(out.String(), `"lag": 0`) {
		t.Errorf("shoal ctl bridges --all-tenants --format json: exit %d, %s %s", code, out.String(), errOut.String())
	}
}
