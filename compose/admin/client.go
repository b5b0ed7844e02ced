package admin

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// APIClient asks the admin APIs of a deployment's servers: one for `shoal
// all`, one per role process (or more) for a distributed deployment. Every
// error is one line that names the server.
type APIClient struct {
	// Servers are base URLs ("http://127.0.0.1:9091"); a bare host:port
	// gets http://.
	Servers []string
	Token   string
	HTTP    *http.Client

	mu    sync.Mutex
	roles map[string][]string // server → its roles, asked once
}

// Scope is the tenant selection of a request.
type Scope struct {
	Tenant     string
	AllTenants bool
}

func (s Scope) values() url.Values {
	v := url.Values{}
	if s.AllTenants {
		v.Set("all_tenants", "true")
	} else {
		v.Set("tenant", s.Tenant)
	}
	return v
}

// apiError is an answer other than 2xx.
type apiError struct {
	server string
	status int
	msg    string
}

func (e *apiError) Error() string {
	if e.status == http.StatusUnauthorized {
		return e.server + ": wrong or missing admin token (401); give --token-file, or --data-dir of shoal all"
	}
	return fmt.Sprintf("%s: %s (%d)", e.server, e.msg, e.status)
}

// NormalizeServer turns host:port into a URL and drops a trailing slash.
func NormalizeServer(s string) string {
	s = strings.TrimRight(strings.TrimSpace(s), "/")
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	return s
}

func (c *APIClient) do(ctx context.Context, method, server, path string, q url.Values, out any) error {
	u := server + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return fmt.Errorf("admin request %s: %w", server, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("cannot reach the admin API at %s: %w", server, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read answer of %s: %w", server, err)
	}
	if resp.StatusCode/100 != 2 {
		var e Error
		if json.Unmarshal(body, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(body))
			if e.Error == "" {
				e.Error = http.StatusText(resp.StatusCode)
			}
		}
		return &apiError{server: server, status: resp.StatusCode, msg: e.Error}
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			return fmt.Errorf("decode answer of %s: %w", server, err)
		}
	}
	return nil
}

// ErrNoRole is the error of a request for a role none of the servers
// runs.
var ErrNoRole = errors.New("no such role")

type noRoleError string

func (e noRoleError) Error() string        { return string(e) }
func (e noRoleError) Is(target error) bool { return target == ErrNoRole }

// DNSPrefix starts a server that stands for every address its host name
// resolves to ("dns+http://shoal-session-admin:9091"), looked up again
// each time the client needs its servers: the pods behind a headless
// Service of Kubernetes, which come and go.
const DNSPrefix = "dns+"

// servers returns the servers given, each dns+ one replaced by one URL per
// address of its host (in the order resolved), normalized.
func (c *APIClient) servers(ctx context.Context) ([]string, error) {
	var out []string
	for _, s := range c.Servers {
		if !strings.HasPrefix(s, DNSPrefix) {
			out = append(out, NormalizeServer(s))
			continue
		}
		u, err := url.Parse(NormalizeServer(strings.TrimPrefix(s, DNSPrefix)))
		if err != nil {
			return nil, fmt.Errorf("admin server %q: %w", s, err)
		}
		addrs, err := net.DefaultResolver.LookupHost(ctx, u.Hostname())
		if err != nil {
			return nil, fmt.Errorf("admin server %q: %w", s, err)
		}
		for _, a := range addrs {
			v := *u
			v.Host = net.JoinHostPort(a, u.Port())
			out = append(out, v.String())
		}
	}
	return out, nil
}

// serversOf returns the servers that run role, asking each its roles once
// (which also checks that it answers and takes the token).
func (c *APIClient) serversOf(ctx context.Context, role string) ([]string, error) {
	if len(c.Servers) == 0 {
		return nil, errors.New("no admin server given (--server)")
	}
	all, err := c.servers(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.roles == nil {
		c.roles = make(map[string][]string)
	}
	var out []string
	for _, s := range all {
		roles, known := c.roles[s]
		if !known {
			var rl RoleList
			if err := c.do(ctx, http.MethodGet, s, "/v1/roles", nil, &rl); err != nil {
				return nil, err
			}
			roles = rl.Roles
			c.roles[s] = roles
		}
		if slices.Contains(roles, role) && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, noRoleError(fmt.Sprintf("none of the servers given (%s) runs a %s", strings.Join(c.Servers, ", "), role))
	}
	return out, nil
}

// Clients lists the connections of every gateway; with clientID, that
// client's.
func (c *APIClient) Clients(ctx context.Context, sc Scope, clientID string) ([]Client, error) {
	servers, err := c.serversOf(ctx, "gateway")
	if err != nil {
		return nil, err
	}
	q := sc.values()
	if clientID != "" {
		q.Set("client", clientID)
	}
	out := []Client{}
	for _, s := range servers {
		var l Clients
		if err := c.do(ctx, http.MethodGet, s, "/v1/clients", q, &l); err != nil {
			return nil, err
		}
		out = append(out, l.Clients...)
	}
	slices.SortStableFunc(out, func(a, b Client) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.ClientID, b.ClientID))
	})
	return out, nil
}

// ClientsPage is page p of the connections of every gateway: each
// gateway's page, merged, and whether more follow.
func (c *APIClient) ClientsPage(ctx context.Context, sc Scope, p Page) ([]Client, bool, error) {
	return pagedList(c, ctx, "gateway", "/v1/clients", sc, p, nil, func(l *Clients) ([]Client, bool) { return l.Clients, l.More })
}

// SessionsPage is page p of the sessions of every session service.
func (c *APIClient) SessionsPage(ctx context.Context, sc Scope, p Page) ([]Session, bool, error) {
	return pagedList(c, ctx, "session", "/v1/sessions", sc, p, nil, func(l *Sessions) ([]Session, bool) { return l.Sessions, l.More })
}

// SubscriptionsPage is page p of the router's subscriptions (of clientID
// and filter alone when they are set).
func (c *APIClient) SubscriptionsPage(ctx context.Context, sc Scope, p Page, clientID, filter string) ([]Subscription, bool, error) {
	q := url.Values{}
	if clientID != "" {
		q.Set("client", clientID)
	}
	if filter != "" {
		q.Set("filter", filter)
	}
	return pagedList(c, ctx, "router", "/v1/subscriptions", sc, p, q, func(l *Subscriptions) ([]Subscription, bool) { return l.Subscriptions, l.More })
}

// RetainedPage is page p of the retained messages filter matches.
func (c *APIClient) RetainedPage(ctx context.Context, sc Scope, p Page, filter string) ([]Retained, bool, error) {
	q := url.Values{}
	if filter != "" {
		q.Set("filter", filter)
	}
	return pagedList(c, ctx, "router", "/v1/retained", sc, p, q, func(l *RetainedList) ([]Retained, bool) { return l.Retained, l.More })
}

// pagedList asks the servers of role for page p of path (the routers:
// the first, as every router holds the whole view) and merges their
// pages: sorted, an entry two servers list kept once, cut to p.Limit.
func pagedList[L any, T keyed](c *APIClient, ctx context.Context, role, path string, sc Scope, p Page, extra url.Values,
	items func(*L) ([]T, bool)) ([]T, bool, error) {
	servers, err := c.serversOf(ctx, role)
	if err != nil {
		return nil, false, err
	}
	if role == "router" {
		servers = servers[:1]
	}
	q := sc.values()
	for k, v := range extra {
		q[k] = v
	}
	p.values(q)
	var all []T
	more := false
	for _, s := range servers {
		var l L
		err := c.do(ctx, http.MethodGet, s, path, q, &l)
		if isStatus(err, http.StatusMisdirectedRequest) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		got, m := items(&l)
		all = append(all, got...)
		more = more || m
	}
	slices.SortStableFunc(all, comparePage)
	all = slices.CompactFunc(all, func(a, b T) bool { return comparePage(a, b) == 0 })
	if p.Limit > 0 && len(all) > p.Limit {
		all, more = all[:p.Limit], true
	}
	if all == nil {
		all = []T{}
	}
	return all, more, nil
}

// ServerStats is one server's answer to Stats: its stats, or why it gave
// none.
type ServerStats struct {
	URL string
	Stats
	Err error
}

// Stats asks every server for its counters, health and lag; a server
// that fails is in the answer with its error.
func (c *APIClient) Stats(ctx context.Context, sc Scope) []ServerStats {
	all, err := c.servers(ctx)
	if err != nil {
		return []ServerStats{{URL: strings.Join(c.Servers, ","), Err: err}}
	}
	out := make([]ServerStats, 0, len(all))
	for _, s := range all {
		st := ServerStats{URL: s}
		st.Err = c.do(ctx, http.MethodGet, st.URL, "/v1/stats", sc.values(), &st.Stats)
		out = append(out, st)
	}
	return out
}

// Sessions lists the sessions of every session service (each serves the
// partitions it owns); with clientID, that client's.
func (c *APIClient) Sessions(ctx context.Context, sc Scope, clientID string) ([]Session, error) {
	servers, err := c.serversOf(ctx, "session")
	if err != nil {
		return nil, err
	}
	q := sc.values()
	if clientID != "" {
		q.Set("client", clientID)
	}
	out := []Session{}
	seen := map[[2]string]bool{}
	for _, s := range servers {
		var l Sessions
		err := c.do(ctx, http.MethodGet, s, "/v1/sessions", q, &l)
		if isStatus(err, http.StatusMisdirectedRequest) {
			continue // another session service owns the client's partition
		}
		if err != nil {
			return nil, err
		}
		for _, sess := range l.Sessions {
			if k := [2]string{sess.Tenant, sess.ClientID}; !seen[k] {
				seen[k] = true
				out = append(out, sess)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Session) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.ClientID, b.ClientID))
	})
	return out, nil
}

// routerQuery asks the first router: every router reads the whole view
// store, so one answers for all.
func (c *APIClient) routerQuery(ctx context.Context, path string, q url.Values, out any) error {
	servers, err := c.serversOf(ctx, "router")
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodGet, servers[0], path, q, out)
}

// Subscriptions lists the router's subscriptions, of clientID alone and
// with filter alone when they are set.
func (c *APIClient) Subscriptions(ctx context.Context, sc Scope, clientID, filter string) ([]Subscription, error) {
	q := sc.values()
	if clientID != "" {
		q.Set("client", clientID)
	}
	if filter != "" {
		q.Set("filter", filter)
	}
	var l Subscriptions
	if err := c.routerQuery(ctx, "/v1/subscriptions", q, &l); err != nil {
		return nil, err
	}
	return l.Subscriptions, nil
}

// Retained lists the retained messages whose topic filter matches (all
// without a filter).
func (c *APIClient) Retained(ctx context.Context, sc Scope, filter string) ([]Retained, error) {
	q := sc.values()
	if filter != "" {
		q.Set("filter", filter)
	}
	var l RetainedList
	if err := c.routerQuery(ctx, "/v1/retained", q, &l); err != nil {
		return nil, err
	}
	return l.Retained, nil
}

// Bridges lists the Kafka bridge's mappings and their lag. Every bridge
// instance serves the same mappings and the lag of their shared consumer
// groups: a mapping is listed once, as the first server that runs a
// bridge reports it, "running" when any instance runs it.
func (c *APIClient) Bridges(ctx context.Context, sc Scope) ([]BridgeMapping, error) {
	servers, err := c.serversOf(ctx, "bridge")
	if err != nil {
		return nil, err
	}
	out := []BridgeMapping{}
	at := map[[2]string]int{}
	for _, s := range servers {
		var l Bridges
		if err := c.do(ctx, http.MethodGet, s, "/v1/bridges", sc.values(), &l); err != nil {
			return nil, err
		}
		for _, m := range l.Mappings {
			k := [2]string{m.Direction, m.Name}
			i, seen := at[k]
			switch {
			case !seen:
				at[k] = len(out)
				out = append(out, m)
			case m.State == "running":
				out[i].State = m.State
			}
		}
	}
	return out, nil
}

// Kick closes a client's connection (0x98 Administrative Action).
func (c *APIClient) Kick(ctx context.Context, tenant, clientID string) (Accepted, error) {
	return c.sessionCommand(ctx, "/v1/kick", tenant, clientID)
}

// DeleteSession ends a client's session (kicking it when connected).
func (c *APIClient) DeleteSession(ctx context.Context, tenant, clientID string) (Accepted, error) {
	return c.sessionCommand(ctx, "/v1/delete-session", tenant, clientID)
}

// sessionCommand asks the session services in turn until the one that
// owns the client's partition answers.
func (c *APIClient) sessionCommand(ctx context.Context, path, tenant, clientID string) (Accepted, error) {
	servers, err := c.serversOf(ctx, "session")
	if err != nil {
		return Accepted{}, err
	}
	q := url.Values{"tenant": {tenant}, "client": {clientID}}
	for _, s := range servers {
		var a Accepted
		err := c.do(ctx, http.MethodPost, s, path, q, &a)
		if isStatus(err, http.StatusMisdirectedRequest) {
			continue
		}
		return a, err
	}
	return Accepted{}, fmt.Errorf("no session service given owns the partition of client %q of tenant %q; give every session service with --server", clientID, tenant)
}

// DeleteRetained deletes a tenant's retained message on a topic.
func (c *APIClient) DeleteRetained(ctx context.Context, tenant, topic string) (Accepted, error) {
	servers, err := c.serversOf(ctx, "router")
	if err != nil {
		return Accepted{}, err
	}
	var a Accepted
	err = c.do(ctx, http.MethodPost, servers[0], "/v1/delete-retained", url.Values{"tenant": {tenant}, "topic": {topic}}, &a)
	return a, err
}

func isStatus(err error, status int) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.status == status
}
