package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/shoal-mqtt/shoal/compose/admin"
	"github.com/shoal-mqtt/shoal/compose/replay"
	"github.com/shoal-mqtt/shoal/internal/watchfile"
)

//go:embed assets
var assets embed.FS

// Options are what a console is made of.
type Options struct {
	// API asks the deployment's admin APIs: this process's roles (through
	// admin.LocalTransport) and admin.console_servers.
	API *admin.APIClient
	// AdminToken logs in an operator of every tenant.
	AdminToken string
	// Tenants are the tenants' console tokens (admin.console_tokens_file);
	// nil: the admin token alone logs in.
	Tenants *watchfile.File[TenantTokens]
	// OpenLog opens the event log for the trace and log pages; nil: those
	// pages say the log is out of reach.
	OpenLog func(ctx context.Context) (*replay.Log, error)
	// TenantSeparator is gateway.tenant_separator, for the log's filters.
	TenantSeparator string
	Log             *slog.Logger
	// Now is the clock (tests); nil is time.Now.
	Now func() time.Time
}

// Console serves the web console.
type Console struct {
	opt   Options
	pages map[string]*template.Template
	ss    sessions
	chart chart

	logMu sync.Mutex
	log   *replay.Log
}

// New makes a console; Close releases the log it opened.
func New(opt Options) (*Console, error) {
	if opt.API == nil || opt.AdminToken == "" {
		return nil, errors.New("console: an admin API and the admin token are needed")
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	c := &Console{opt: opt, pages: map[string]*template.Template{}}
	layout, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "assets/layout.html")
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	names, err := fs.Glob(assets, "assets/page-*.html")
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		t, err := template.Must(layout.Clone()).ParseFS(assets, n)
		if err != nil {
			return nil, fmt.Errorf("console: %w", err)
		}
		c.pages[strings.TrimSuffix(strings.TrimPrefix(n, "assets/page-"), ".html")] = t
	}
	return c, nil
}

// Close closes the event log the console opened.
func (c *Console) Close() error {
	c.logMu.Lock()
	defer c.logMu.Unlock()
	if c.log == nil {
		return nil
	}
	err := c.log.Close()
	c.log = nil
	return err
}

// eventLog returns the event log, opening it at the first use.
func (c *Console) eventLog(ctx context.Context) (*replay.Log, error) {
	if c.opt.OpenLog == nil {
		return nil, errors.New("this console cannot reach the event log")
	}
	c.logMu.Lock()
	defer c.logMu.Unlock()
	if c.log != nil {
		return c.log, nil
	}
	l, err := c.opt.OpenLog(ctx)
	if err != nil {
		return nil, err
	}
	c.log = l
	return l, nil
}

// The Content-Security-Policy of every answer: the console's own script
// and style sheet, nothing inline, nothing from elsewhere, no framing.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Handler serves the console: / and its pages behind the login, /login,
// /logout and /static/.
//
//	GET  /                        overview (GET /overview/live: its live part)
//	GET  /clients                 connections: search, pages; /clients/show one
//	POST /clients/kick            SessionCommand OP_KICK
//	GET  /sessions                sessions, offline ones too
//	POST /sessions/delete         SessionCommand OP_DELETE_SESSION
//	GET  /subscriptions           the router's view
//	GET  /retained                retained messages; POST /retained/delete
//	GET  /trace?id=MESSAGE-ID     a message's timeline
//	GET  /log                     the replay query; GET /log.json downloads it
//	GET  /bridges                 the Kafka bridges and their lag
func (c *Console) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets/static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /login", c.loginForm)
	mux.HandleFunc("POST /login", c.login)
	mux.HandleFunc("POST /logout", c.auth(c.logout))
	mux.HandleFunc("GET /{$}", c.auth(c.overview))
	mux.HandleFunc("GET /overview/live", c.auth(c.overviewLive))
	mux.HandleFunc("GET /clients", c.auth(c.clients))
	mux.HandleFunc("GET /clients/show", c.auth(c.client))
	mux.HandleFunc("POST /clients/kick", c.auth(c.kick))
	mux.HandleFunc("GET /sessions", c.auth(c.sessionsPage))
	mux.HandleFunc("POST /sessions/delete", c.auth(c.deleteSession))
	mux.HandleFunc("GET /subscriptions", c.auth(c.subscriptions))
	mux.HandleFunc("GET /retained", c.auth(c.retained))
	mux.HandleFunc("POST /retained/delete", c.auth(c.deleteRetained))
	mux.HandleFunc("GET /trace", c.auth(c.trace))
	mux.HandleFunc("GET /log", c.auth(c.logPage))
	mux.HandleFunc("GET /log.json", c.auth(c.logJSON))
	mux.HandleFunc("GET /bridges", c.auth(c.bridges))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such page", http.StatusNotFound)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		mux.ServeHTTP(w, r)
	})
}

// handler is a page's handler, with the request's session.
type handler func(w http.ResponseWriter, r *http.Request, s *session)

// auth lets requests with a live session through: a page without one
// goes to /login, anything else gets 401. A change (POST) must carry the
// session's CSRF token in the form field csrf: 403 otherwise. A tenant's
// session whose token left the tokens file is ended.
func (c *Console) auth(next handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var s *session
		if ck, err := r.Cookie(cookieName); err == nil {
			s = c.ss.get(ck.Value, c.opt.Now())
		}
		if s != nil && !s.admin && !c.tenantTokens().knows(s.token, s.tenant) {
			c.ss.remove(s.id)
			s = nil
		}
		if s == nil {
			if r.Method == http.MethodGet && r.Header.Get("X-Shoal-Fragment") == "" {
				http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			http.Error(w, "log in first", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodGet {
			r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
			if !equalSecret(r.PostFormValue("csrf"), s.csrf) {
				c.opt.Log.Warn("console change refused: no or wrong CSRF token", "remote", r.RemoteAddr, "path", r.URL.Path)
				http.Error(w, "refused: the form's CSRF token is missing or wrong; reload the page", http.StatusForbidden)
				return
			}
		}
		next(w, r, s)
	}
}

func (c *Console) tenantTokens() *TenantTokens {
	if c.opt.Tenants == nil {
		return nil
	}
	return c.opt.Tenants.Current()
}

func (c *Console) loginForm(w http.ResponseWriter, r *http.Request) {
	c.renderLogin(w, http.StatusOK, "", r.URL.Query().Get("next"))
}

// login takes the form field token: the admin token, or a tenant's
// console token.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	token := strings.TrimSpace(r.PostFormValue("token"))
	next := r.PostFormValue("next")
	var s *session
	switch tenant, ok := c.tenantTokens().Lookup(token); {
	case equalSecret(token, c.opt.AdminToken):
		s = c.ss.add(true, "", token, c.opt.Now())
		c.opt.Log.Info("console login", "as", "admin", "remote", r.RemoteAddr)
	case ok:
		s = c.ss.add(false, tenant, token, c.opt.Now())
		c.opt.Log.Info("console login", "tenant", tenant, "remote", r.RemoteAddr)
	default:
		c.opt.Log.Warn("console login refused: wrong token", "remote", r.RemoteAddr)
		c.renderLogin(w, http.StatusUnauthorized, "That token opens nothing here.", next)
		return
	}
	setCookie(w, r, s.id, int(sessionMax/time.Second))
	http.Redirect(w, r, safeNext(next), http.StatusSeeOther)
}

// safeNext keeps a redirect after the login on this console: a path,
// never another site. Browsers drop tabs and line breaks from a URL and
// read a backslash as a slash, so "/\t/evil.example" would be
// "//evil.example": any of them, or a path that parses with a host,
// sends the browser to / instead.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\t\r\n") {
		return "/"
	}
	for _, r := range next {
		if r < 0x20 || r == 0x7f {
			return "/"
		}
	}
	if u, err := url.Parse(next); err != nil || u.Host != "" || u.Scheme != "" {
		return "/"
	}
	return next
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, s *session) {
	c.ss.remove(s.id)
	setCookie(w, r, "", -1)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

func (c *Console) renderLogin(w http.ResponseWriter, code int, msg, next string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	if err := c.pages["login"].ExecuteTemplate(w, "login", map[string]string{"Error": msg, "Next": next}); err != nil {
		c.opt.Log.Warn("console page failed", "page", "login", "err", err)
	}
}
