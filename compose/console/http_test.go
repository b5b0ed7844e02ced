package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
)

// TestConsoleLogin: the form's token field logs in and sets a session
// cookie that scripts cannot read and other sites cannot send; a wrong
// token is refused; every page comes with a strict CSP; a page without a
// login goes to /login, and a redirect after it stays on the console.
func TestConsoleLogin(t *testing.T) {
	s := startSite(t)
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Get(s.url + "/clients")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/login") {
		t.Fatalf("GET /clients without a login: %s to %q, want 303 to /login", resp.Status, resp.Header.Get("Location"))
	}
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") {
		t.Errorf("Content-Security-Policy %q allows inline code", csp)
	}
	for _, tok := range []string{"", "wrong", s.admin + "x"} {
		resp, err := hc.PostForm(s.url+"/login", url.Values{"token": {tok}})
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
			t.Errorf("login with %q: %s and %d cookies, want 401 and none", tok, resp.Status, len(resp.Cookies()))
		}
	}
	// A redirect after the login stays on the console, however it is
	// spelled; a path of its own is kept.
	for next, want := range map[string]string{
		"//evil.example/x": "/", "/\\evil.example": "/", "/\t/evil.example": "/", "/\n/evil.example": "/",
		"https://evil.example/": "/", "evil.example": "/", "/%0a/x": "/%0a/x", "/sessions?tenant=acme": "/sessions?tenant=acme",
	} {
		resp, err = hc.PostForm(s.url+"/login", url.Values{"token": {s.admin}, "next": {next}})
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != want {
			t.Errorf("login with next=%q: %s to %q, want 303 to %q", next, resp.Status, resp.Header.Get("Location"), want)
		}
	}
	var ck *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "shoal_console" {
			ck = c
		}
	}
	if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Secure {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, not Secure over plain HTTP", ck)
	}
	u := s.login(t, s.admin)
	if code, body := u.get("/"); code != http.StatusOK || !strings.Contains(body, "admin · every tenant") {
		t.Fatalf("overview as admin: %d\n%s", code, body)
	}
	// Logging out ends the session.
	if code := u.post("/logout", url.Values{"csrf": {u.csrf()}}); code != http.StatusSeeOther {
		t.Fatalf("logout: %d", code)
	}
	if code, _ := u.get("/clients"); code != http.StatusSeeOther {
		t.Errorf("after logout /clients answers %d, want 303 to /login", code)
	}
}

// TestConsoleRefusesWithoutCSRF: a change without the session's CSRF
// token, or with another session's, is refused and changes nothing.
func TestConsoleRefusesWithoutCSRF(t *testing.T) {
	s := startSite(t)
	s.connect(t, "acme-sensor1", nil)
	u := s.login(t, s.admin)
	other := s.login(t, s.admin)
	for name, form := range map[string]url.Values{
		"no token":             {"tenant": {"acme"}, "client": {"acme-sensor1"}},
		"another session's":    {"tenant": {"acme"}, "client": {"acme-sensor1"}, "csrf": {other.csrf()}},
		"an empty token":       {"tenant": {"acme"}, "client": {"acme-sensor1"}, "csrf": {""}},
		"the token in the URL": nil,
	} {
		path := "/clients/kick"
		if form == nil {
			path += "?csrf=" + url.QueryEscape(u.csrf()) + "&tenant=acme&client=acme-sensor1"
		}
		if code := u.post(path, form); code != http.StatusForbidden {
			t.Errorf("kick with %s: %d, want 403", name, code)
		}
	}
	for _, path := range []string{"/sessions/delete", "/retained/delete", "/logout"} {
		if code := u.post(path, url.Values{"tenant": {"acme"}, "client": {"acme-sensor1"}, "topic": {"x"}}); code != http.StatusForbidden {
			t.Errorf("POST %s without the CSRF token: %d, want 403", path, code)
		}
	}
	if _, body := u.get("/clients?tenant=acme"); !strings.Contains(body, "acme-sensor1") {
		t.Fatal("the client was kicked by a request without the CSRF token")
	}
	if code := u.post("/clients/kick", url.Values{"tenant": {"acme"}, "client": {"acme-sensor1"}, "csrf": {u.csrf()}}); code != http.StatusSeeOther {
		t.Fatalf("kick with the CSRF token: %d, want 303", code)
	}
	eventually.True(t, 10*time.Second, "the kicked client gone from /clients", func() bool {
		_, body := u.get("/clients?tenant=acme")
		return !strings.Contains(body, "acme-sensor1")
	})
}

// TestConsoleTenantTokenSeesItsTenant: acme's console token sees acme's
// clients, sessions, subscriptions, retained messages and events, and no
// URL shows it globex's or changes globex's.
func TestConsoleTenantTokenSeesItsTenant(t *testing.T) {
	s := startSite(t)
	a := s.connect(t, "acme-sensor1", nil)
	g := s.connect(t, "globex-secret", nil)
	subscribe(t, a, "acme/room/#")
	subscribe(t, g, "globex/vault/#")
	for _, c := range []struct {
		cl    *paho.Client
		topic string
	}{{a, "acme/room/1"}, {g, "globex/vault/1"}} {
		if _, err := c.cl.Publish(t.Context(), &paho.Publish{Topic: c.topic, Payload: []byte("payload-of-" + c.topic), QoS: 1, Retain: true}); err != nil {
			t.Fatal(err)
		}
	}
	admin := s.login(t, s.admin)
	eventually.True(t, 10*time.Second, "both retained messages on /retained", func() bool {
		_, body := admin.get("/retained")
		return strings.Contains(body, "acme/room/1") && strings.Contains(body, "globex/vault/1")
	})
	u := s.login(t, s.acme)
	secrets := []string{"globex-secret", "globex/vault", "payload-of-globex"}
	pages := []string{
		"/", "/overview/live", "/clients", "/sessions", "/subscriptions", "/retained", "/bridges",
		"/log?run=1&topics=all",
	}
	for _, p := range pages {
		code, body := u.get(p)
		if code != http.StatusOK {
			t.Errorf("acme's GET %s: %d, want 200", p, code)
		}
		for _, sec := range secrets {
			if strings.Contains(body, sec) {
				t.Errorf("acme's GET %s shows %q", p, sec)
			}
		}
	}
	if _, body := u.get("/clients"); !strings.Contains(body, "acme-sensor1") {
		t.Error("acme's /clients lacks its own client")
	}
	// globex's client looked up under acme: the page says the id it was
	// asked, and that acme has no such client.
	if _, body := u.get("/clients/show?tenant=acme&client=globex-secret"); !strings.Contains(body, "is not connected and has no session") ||
		strings.Contains(body, "globex/vault") {
		t.Errorf("acme's page of globex-secret:\n%s", body)
	}
	// Another tenant named in the URL is refused, on every page.
	for _, p := range []string{"/", "/overview/live", "/clients", "/sessions", "/subscriptions", "/retained", "/bridges", "/log", "/clients/show"} {
		for _, q := range []string{"?tenant=globex", "?tenant=globex&client=globex-secret&run=1", "?tenant=*", "?tenant="} {
			code, body := u.get(p + q)
			if code != http.StatusForbidden {
				t.Errorf("acme's GET %s%s: %d, want 403", p, q, code)
			}
			for _, sec := range secrets {
				if strings.Contains(body, sec) {
					t.Errorf("acme's GET %s%s shows %q", p, q, sec)
				}
			}
		}
	}
	if code, body := u.get("/log.json?tenant=globex"); code != http.StatusForbidden || strings.Contains(body, "globex/vault") {
		t.Errorf("acme's /log.json?tenant=globex: %d", code)
	}
	if _, body := u.get("/log.json?topics=all"); strings.Contains(body, "globex") || !strings.Contains(body, "acme/room/1") {
		t.Errorf("acme's /log.json: want acme's events alone, got\n%s", body)
	}
	// globex's message id, traced by acme, is not found.
	_, all := admin.get("/log?run=1&type=publish&tenant=globex")
	m := traceLink.FindStringSubmatch(all)
	if m == nil {
		t.Fatal("no trace link for globex's publish on the admin's /log")
	}
	if _, body := u.get("/trace?id=" + m[1]); strings.Contains(body, "globex") || !strings.Contains(body, "no such message") {
		t.Errorf("acme's trace of globex's message %s shows it:\n%s", m[1], body)
	}
	// Changes to globex are refused and change nothing.
	csrf := u.csrf()
	for path, form := range map[string]url.Values{
		"/clients/kick":    {"tenant": {"globex"}, "client": {"globex-secret"}},
		"/sessions/delete": {"tenant": {"globex"}, "client": {"globex-secret"}},
		"/retained/delete": {"tenant": {"globex"}, "topic": {"globex/vault/1"}},
	} {
		form.Set("csrf", csrf)
		if code := u.post(path, form); code != http.StatusForbidden {
			t.Errorf("acme's POST %s for globex: %d, want 403", path, code)
		}
	}
	if _, body := admin.get("/clients?tenant=globex"); !strings.Contains(body, "globex-secret") {
		t.Error("globex's client is gone after acme's refused kick")
	}
	if _, body := admin.get("/retained?tenant=globex"); !strings.Contains(body, "globex/vault/1") {
		t.Error("globex's retained message is gone after acme's refused delete")
	}
	// A token taken out of the file ends its session.
	if _, err := consoleRevoke(s.tokens, "acme"); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 10*time.Second, "acme's session ended by the revoke", func() bool {
		code, _ := u.get("/clients")
		return code == http.StatusSeeOther
	})
}

// TestConsolePagesClients: the clients page is cut on the gateway into
// pages of limit= rows, which its next links walk, each client once and in
// order; search= keeps the ids that hold it.
func TestConsolePagesClients(t *testing.T) {
	s := startSite(t)
	var want []string
	for i := range 7 {
		id := "acme-meter" + string(rune('0'+i))
		s.connect(t, id, nil)
		want = append(want, id)
	}
	s.connect(t, "globex-meter9", nil)
	u := s.login(t, s.admin)
	var got []string
	path := "/clients?tenant=acme&limit=3"
	for pages := 0; path != "" && pages < 5; pages++ {
		_, body := u.get(path)
		for _, m := range clientLink.FindAllStringSubmatch(body, -1) {
			got = append(got, m[1])
		}
		path = ""
		if m := nextLink.FindStringSubmatch(body); m != nil {
			path = "/clients?" + strings.ReplaceAll(m[1], "&amp;", "&")
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("the pages listed %v, want %v", got, want)
	}
	_, body := u.get("/clients?search=METER9")
	if m := clientLink.FindAllStringSubmatch(body, -1); len(m) != 1 || m[0][1] != "globex-meter9" {
		t.Fatalf("search METER9 listed %v", m)
	}
}
