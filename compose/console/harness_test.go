package console_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/shoal-mqtt/shoal/compose/broker"
	"github.com/shoal-mqtt/shoal/compose/broker/brokertest"
	"github.com/shoal-mqtt/shoal/compose/config"
	"github.com/shoal-mqtt/shoal/compose/console"
	"github.com/shoal-mqtt/shoal/internal/testutil/pahoconn"
	"github.com/shoal-mqtt/shoal/internal/watchfile"
)

// xssID is a client id that would run a script if a page put it in as
// HTML.
const xssID = `acme-<img src=x onerror=alert(1)>`

// site is a shoal all with its console, and a tenant console token of
// acme and of globex.
type site struct {
	b                        *broker.Broker
	url, admin, acme, globex string
	tokens                   string // the tokens file
	mqtt                     string
}

func startSite(t testing.TB, mut ...func(*config.Config)) *site {
	t.Helper()
	dir := t.TempDir()
	s := &site{tokens: filepath.Join(dir, "console-tokens")}
	var err error
	if s.acme, err = console.AddToken(s.tokens, "acme"); err != nil {
		t.Fatal(err)
	}
	if s.globex, err = console.AddToken(s.tokens, "globex"); err != nil {
		t.Fatal(err)
	}
	var dataDir string
	s.b, _ = brokertest.RunWith(t, []broker.Option{broker.WithAdminUI(console.UI)}, append([]func(*config.Config){func(c *config.Config) {
		c.Admin.ConsoleTokensFile = s.tokens
		dataDir = c.DataDir
	}}, mut...)...)
	s.url = "http://" + s.b.Addr("admin").String()
	s.mqtt = s.b.Addr("mqtt").String()
	tok, err := os.ReadFile(filepath.Join(dataDir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	s.admin = strings.TrimSpace(string(tok))
	return s
}

// connect connects an MQTT 5 client.
func (s *site) connect(t *testing.T, id string, onPublish func(*paho.Publish)) *paho.Client {
	t.Helper()
	return pahoconn.Connect(t, s.mqtt, id, onPublish)
}

// subscribe subscribes c to filter at QoS 1.
func subscribe(t *testing.T, c *paho.Client, filter string) {
	t.Helper()
	if _, err := c.Subscribe(t.Context(), &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: filter, QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
}

// user is a browser without a browser: an HTTP client with a cookie jar,
// logged in with a token.
type user struct {
	t    testing.TB
	base string
	hc   *http.Client
}

func (s *site) login(t testing.TB, token string) *user {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	u := &user{t: t, base: s.url, hc: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	resp, err := u.hc.PostForm(s.url+"/login", url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %s, want 303", resp.Status)
	}
	return u
}

// get returns a page's status and body.
func (u *user) get(path string) (int, string) {
	u.t.Helper()
	resp, err := u.hc.Get(u.base + path)
	if err != nil {
		u.t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		u.t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// post posts a form and returns the status.
func (u *user) post(path string, form url.Values) int {
	u.t.Helper()
	resp, err := u.hc.PostForm(u.base+path, form)
	if err != nil {
		u.t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the session's CSRF token, as its pages carry it.
func (u *user) csrf() string {
	u.t.Helper()
	_, body := u.get("/clients")
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		u.t.Fatal("no CSRF token on /clients")
	}
	return m[1]
}

var traceLink = regexp.MustCompile(`href="/trace\?id=([0-9a-f]+-[0-9]+)"`)

func consoleRevoke(path, tenant string) (int, error) { return console.RevokeTokens(path, tenant) }

// newAdminRequest is a GET of the admin API with the admin token.
func newAdminRequest(s *site, path string) (*http.Request, error) {
	req, err := http.NewRequest(http.MethodGet, s.url+path, nil)
	if err == nil {
		req.Header.Set("Authorization", "Bearer "+s.admin)
	}
	return req, err
}

var (
	clientLink = regexp.MustCompile(`<a class="client" href="[^"]*">([^<]*)</a>`)
	nextLink   = regexp.MustCompile(`<a href="/clients\?([^"]*)" id="next-page">`)
)

// openTokens keeps a tokens file in force for a console made by the test.
func openTokens(t *testing.T, path string) (*watchfile.File[console.TenantTokens], error) {
	t.Helper()
	return watchfile.Open(path, "console tokens file", console.ParseTenantTokens,
		func(*console.TenantTokens) []any { return nil }, slog.New(slog.DiscardHandler))
}
