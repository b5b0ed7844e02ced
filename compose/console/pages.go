package console

import (
	"errors"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"net/url"
	"strconv"

	"github.com/shoal-mqtt/shoal/compose/admin"
)

// pageSize is the rows of a listing's page, unless limit= asks for
// another (up to admin.MaxPageLimit).
const pageSize = 50

// view is what every page's template gets.
type view struct {
	Title, Path  string
	Admin        bool
	Tenant       string
	CSRF         string
	Flash, Error string
	Nav          []navItem
	Data         any
}

type navItem struct {
	Path, Name string
	Current    bool
}

var navPages = []navItem{
	{Path: "/", Name: "Overview"}, {Path: "/clients", Name: "Clients"}, {Path: "/sessions", Name: "Sessions"},
	{Path: "/subscriptions", Name: "Subscriptions"}, {Path: "/retained", Name: "Retained"},
	{Path: "/trace", Name: "Trace"}, {Path: "/log", Name: "Log"}, {Path: "/bridges", Name: "Bridges"},
}

// render writes page name with data; errMsg, when set, is shown above it
// (the page still renders what it has).
func (c *Console) render(w http.ResponseWriter, r *http.Request, s *session, code int, name, title string, data any, errMsg string) {
	v := view{Title: title, Path: r.URL.Path, Admin: s.admin, Tenant: s.tenant, CSRF: s.csrf,
		Flash: c.ss.takeFlash(s), Error: errMsg, Data: data}
	for _, n := range navPages {
		n.Current = n.Path == r.URL.Path || (n.Path != "/" && len(r.URL.Path) > len(n.Path) && r.URL.Path[:len(n.Path)+1] == n.Path+"/")
		v.Nav = append(v.Nav, n)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	if err := c.pages[name].ExecuteTemplate(w, "layout", v); err != nil {
		c.opt.Log.Warn("console page failed", "page", name, "err", err)
	}
}

// fragment writes the template name of page alone (a live region).
func (c *Console) fragment(w http.ResponseWriter, page, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := c.pages[page].ExecuteTemplate(w, name, data); err != nil {
		c.opt.Log.Warn("console fragment failed", "page", page, "err", err)
	}
}

// errNotYours refuses a tenant's session another tenant's data.
var errNotYours = errors.New("this login sees its own tenant only")

// scope is the tenant selection of a request: a tenant's session sees its
// tenant, whatever the URL says (another tenant= is refused); the admin
// picks with tenant= ("*" or none: every tenant; "" the default tenant).
// sel is the value for the page's tenant field.
func scopeOf(r *http.Request, s *session) (sc admin.Scope, sel string, err error) {
	q := r.URL.Query()
	if !s.admin {
		if q.Has("tenant") && q.Get("tenant") != s.tenant {
			return admin.Scope{}, "", errNotYours
		}
		return admin.Scope{Tenant: s.tenant}, s.tenant, nil
	}
	if !q.Has("tenant") || q.Get("tenant") == "*" {
		return admin.Scope{AllTenants: true}, "*", nil
	}
	return admin.Scope{Tenant: q.Get("tenant")}, q.Get("tenant"), nil
}

// changeTenant is the tenant a change (a POST) names: a tenant's session
// may name its own alone.
func changeTenant(r *http.Request, s *session) (string, error) {
	t := r.PostFormValue("tenant")
	if !s.admin && t != s.tenant {
		return "", errNotYours
	}
	return t, nil
}

// refuse answers 403 for a scope error.
func (c *Console) refuse(w http.ResponseWriter, r *http.Request, s *session, err error) {
	c.opt.Log.Warn("console request refused", "tenant", s.tenant, "path", r.URL.Path, "err", err)
	c.render(w, r, s, http.StatusForbidden, "refused", "Refused", nil, err.Error())
}

// pageOf is the page a listing's request asks for.
func pageOf(r *http.Request) admin.Page {
	q := r.URL.Query()
	p := admin.Page{Search: q.Get("search"), AfterTenant: q.Get("after_tenant"), AfterClient: q.Get("after_client"), Limit: pageSize}
	if n, err := strconv.Atoi(q.Get("limit")); err == nil && n > 0 {
		p.Limit = min(n, admin.MaxPageLimit)
	}
	return p
}

// listing is a listing page's data.
type listing[T any] struct {
	Tenant, Search string
	Rows           []T
	// Next is the URL of the next page, "" on the last.
	Next template.URL
	// First is set when this is not the first page; FirstQuery is the
	// first page's URL.
	First      bool
	FirstQuery template.URL
	Limit      int
	// Extra are a page's own fields (a filter).
	Extra map[string]string
}

// newListing makes a listing of rows; last gives the key of a row.
func newListing[T any](r *http.Request, sel string, p admin.Page, rows []T, more bool, key func(T) (string, string), keep ...string) listing[T] {
	l := listing[T]{Tenant: sel, Search: p.Search, Rows: rows, Limit: p.Limit, Extra: map[string]string{},
		First: p.AfterTenant != "" || p.AfterClient != ""}
	q := r.URL.Query()
	for _, k := range keep {
		l.Extra[k] = q.Get(k)
	}
	fq := maps.Clone(q)
	fq.Del("after_tenant")
	fq.Del("after_client")
	l.FirstQuery = pageURL(r.URL.Path, fq)
	if more && len(rows) > 0 {
		t, n := key(rows[len(rows)-1])
		nq := maps.Clone(q)
		nq.Set("after_tenant", t)
		nq.Set("after_client", n)
		l.Next = pageURL(r.URL.Path, nq)
	}
	return l
}

func (c *Console) clients(w http.ResponseWriter, r *http.Request, s *session) {
	sc, sel, err := scopeOf(r, s)
	if err != nil {
		c.refuse(w, r, s, err)
		return
	}
	p := pageOf(r)
	rows, more, err := c.opt.API.ClientsPage(r.Context(), sc, p)
	c.render(w, r, s, http.StatusOK, "clients", "Clients", newListing(r, sel, p, rows, more,
		func(x admin.Client) (string, string) { return x.Tenant, x.ClientID }), errText(err))
}

// clientView is a client's page: its connection, its session and its
// subscriptions.
type clientView struct {
	Tenant, ClientID string
	Client           *admin.Client
	Session          *admin.Session
	Subscriptions    []admin.Subscription
}

func (c *Console) client(w http.ResponseWriter, r *http.Request, s *session) {
	sc, _, err := scopeOf(r, s)
	if err != nil {
		c.refuse(w, r, s, err)
		return
	}
	id := r.URL.Query().Get("client")
	if sc.AllTenants || id == "" {
		c.render(w, r, s, http.StatusBadRequest, "client", "Client", clientView{}, "name the tenant and the client")
		return
	}
	v := clientView{Tenant: sc.Tenant, ClientID: id}
	var errs []error
	if cl, err := c.opt.API.Clients(r.Context(), sc, id); err != nil {
		errs = append(errs, err)
	} else if len(cl) > 0 {
		v.Client = &cl[0]
	}
	if ss, err := c.opt.API.Sessions(r.Context(), sc, id); err != nil {
		errs = append(errs, err)
	} else if len(ss) > 0 {
		v.Session = &ss[0]
	}
	subs, _, err := c.opt.API.SubscriptionsPage(r.Context(), sc, admin.Page{Limit: admin.MaxPageLimit}, id, "")
	errs = append(errs, err)
	v.Subscriptions = subs
	msg := errText(errors.Join(errs...))
	if msg == "" && v.Client == nil && v.Session == nil {
		msg = fmt.Sprintf("client %q of tenant %q is not connected and has no session", id, sc.Tenant)
	}
	c.render(w, r, s, http.StatusOK, "client", "Client "+id, v, msg)
}

func (c *Console) sessionsPage(w http.ResponseWriter, r *http.Request, s *session) {
	sc, sel, err := scopeOf(r, s)
	if err != nil {
		c.refuse(w, r, s, err)
		return
	}
	p := pageOf(r)
	rows, more, err := c.opt.API.SessionsPage(r.Context(), sc, p)
	c.render(w, r, s, http.StatusOK, "sessions", "Sessions", newListing(r, sel, p, rows, more,
		func(x admin.Session) (string, string) { return x.Tenant, x.ClientID }), errText(err))
}

func (c *Console) subscriptions(w http.ResponseWriter, r *http.Request, s *session) {
	sc, sel, err := scopeOf(r, s)
	if err != nil {
		c.refuse(w, r, s, err)
		return
	}
	p := pageOf(r)
	rows, more, err := c.opt.API.SubscriptionsPage(r.Context(), sc, p, r.URL.Query().Get("client"), r.URL.Query().Get("filter"))
	c.render(w, r, s, http.StatusOK, "subscriptions", "Subscriptions", newListing(r, sel, p, rows, more,
		func(x admin.Subscription) (string, string) { return x.Tenant, x.ClientID + "\x00" + x.Filter }, "client", "filter"), errText(err))
}

func (c *Console) retained(w http.ResponseWriter, r *http.Request, s *session) {
	sc, sel, err := scopeOf(r, s)
	if err != nil {
		c.refuse(w, r, s, err)
		return
	}
	p := pageOf(r)
	rows, more, err := c.opt.API.RetainedPage(r.Context(), sc, p, r.URL.Query().Get("filter"))
	c.render(w, r, s, http.StatusOK, "retained", "Retained messages", newListing(r, sel, p, rows, more,
		func(x admin.Retained) (string, string) { return x.Tenant, x.Topic }, "filter"), errText(err))
}

func (c *Console) bridges(w http.ResponseWriter, r *http.Request, s *session) {
	sc, sel, err := scopeOf(r, s)
	if err != nil {
		c.refuse(w, r, s, err)
		return
	}
	rows, err := c.opt.API.Bridges(r.Context(), sc)
	if errors.Is(err, admin.ErrNoRole) {
		err = nil // no bridge runs: the page says there is none
	}
	c.render(w, r, s, http.StatusOK, "bridges", "Kafka bridges", listing[admin.BridgeMapping]{Tenant: sel, Rows: rows}, errText(err))
}

// The changes: each writes its event to the log through the admin API,
// then goes back to the page it came from with what it did.

func (c *Console) kick(w http.ResponseWriter, r *http.Request, s *session) {
	c.change(w, r, s, "/clients", func(tenant string) (string, error) {
		id := r.PostFormValue("client")
		if _, err := c.opt.API.Kick(r.Context(), tenant, id); err != nil {
			return "", err
		}
		return fmt.Sprintf("Kicked client %q of tenant %q (OP_KICK written to the log).", id, tenant), nil
	})
}

func (c *Console) deleteSession(w http.ResponseWriter, r *http.Request, s *session) {
	c.change(w, r, s, "/sessions", func(tenant string) (string, error) {
		id := r.PostFormValue("client")
		if _, err := c.opt.API.DeleteSession(r.Context(), tenant, id); err != nil {
			return "", err
		}
		return fmt.Sprintf("Deleted the session of client %q of tenant %q (OP_DELETE_SESSION written to the log).", id, tenant), nil
	})
}

func (c *Console) deleteRetained(w http.ResponseWriter, r *http.Request, s *session) {
	c.change(w, r, s, "/retained", func(tenant string) (string, error) {
		name := r.PostFormValue("topic")
		if _, err := c.opt.API.DeleteRetained(r.Context(), tenant, name); err != nil {
			return "", err
		}
		return fmt.Sprintf("Deleted the retained message on %q of tenant %q.", name, tenant), nil
	})
}

// change runs do for the form's tenant, logs it, and sends the browser
// back (the form's back field, on this console, else fallback) with what
// it did or why it failed.
func (c *Console) change(w http.ResponseWriter, r *http.Request, s *session, fallback string, do func(tenant string) (string, error)) {
	tenant, err := changeTenant(r, s)
	if err != nil {
		c.refuse(w, r, s, err)
		return
	}
	msg, err := do(tenant)
	if err != nil {
		msg = "Failed: " + err.Error()
	}
	c.opt.Log.Info("console change", "path", r.URL.Path, "tenant", tenant, "by_admin", s.admin, "remote", r.RemoteAddr, "ok", err == nil)
	c.ss.setFlash(s, msg)
	back := safeNext(r.PostFormValue("back"))
	if back == "/" {
		back = fallback
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// pageURL is the URL of path with the query q. It is a template.URL, put
// in an href as it is: url.Values.Encode has escaped every value in it
// (html/template would escape its = and & again).
func pageURL(path string, q url.Values) template.URL {
	return template.URL(path + "?" + q.Encode()) //nolint:gosec // escaped by Encode, and path is the request's own
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
