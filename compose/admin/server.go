package admin

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shoal-mqtt/shoal/bridge"
	"github.com/shoal-mqtt/shoal/gateway"
	"github.com/shoal-mqtt/shoal/kafka"
	routersvc "github.com/shoal-mqtt/shoal/router-svc"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
	sessionsvc "github.com/shoal-mqtt/shoal/session-svc"
)

// Gateway is what the API needs of a gateway: its connections
// (*gateway.Gateway).
type Gateway interface {
	ClientsPage(tenant string, allTenants bool, p gateway.ClientPage) ([]gateway.ClientInfo, bool)
	Client(tenant, clientID string) (gateway.ClientInfo, bool)
	EachTenant(f func(tenant string, s *gateway.Stats))
}

// SessionService is what the API needs of a session service: its sessions and
// the commands it writes to the log (*sessionsvc.Service).
type SessionService interface {
	SessionsPage(ctx context.Context, tenant string, allTenants bool, p sessionsvc.Page) ([]*sessionsvc.Session, bool)
	Session(ctx context.Context, tenant, clientID string) (*sessionsvc.Session, error)
	Command(ctx context.Context, tenant, clientID string, op eventspb.SessionCommand_Op, reason string) error
}

// Router is what the API needs of a router: its view of subscriptions and
// retained messages, and the deletion of one through the log
// (*routersvc.Router).
type Router interface {
	Subscriptions(ctx context.Context, q routersvc.Query) ([]routersvc.Subscription, error)
	Retained(ctx context.Context, q routersvc.Query) ([]*eventspb.Envelope, error)
	DeleteRetained(ctx context.Context, tenant, topic string) error
}

// Bridge is what the API needs of a Kafka data bridge: its mappings and
// their lag (*bridge.Bridge).
type Bridge interface {
	Status() []bridge.MappingStatus
}

// Roles are the roles a server serves; nil for a role the process does
// not run.
type Roles struct {
	Gateway   Gateway
	GatewayID string
	Sessions  SessionService
	Router    Router
	Bridge    Bridge
	// Health reports each role's readiness; Lags the lag of the roles'
	// consumers. Either may be nil.
	Health func() []RoleHealth
	Lags   func() []kafka.ConsumerLag
}

// Handler serves the admin API of roles, to requests with the bearer
// token (401 otherwise). Every answer is JSON.
//
//	GET  /v1/roles                              the roles served here
//	GET  /v1/clients?tenant=T[&client=C]        a gateway's connections
//	GET  /v1/sessions?tenant=T[&client=C]       a session service's sessions
//	GET  /v1/subscriptions?tenant=T[&client=C][&filter=F]
//	GET  /v1/retained?tenant=T[&filter=F]       the router's view
//	GET  /v1/bridges?tenant=T                   the Kafka bridge's mappings and lag
//	GET  /v1/stats?tenant=T                     counters per tenant, health, lag
//	POST /v1/kick?tenant=T&client=C             SessionCommand OP_KICK
//	POST /v1/delete-session?tenant=T&client=C   SessionCommand OP_DELETE_SESSION
//	POST /v1/delete-retained?tenant=T&topic=N   an empty, expired retained Publish
//
// The listings of clients, sessions, subscriptions and retained messages
// take a page (page.go): search=, after_tenant= and after_client=, limit=.
// The listings take all_tenants=true instead of tenant (tenant= with an
// empty value is the default tenant); the mutations take one tenant.
// A role this process does not run answers 404; a client whose partition
// another session service owns, 421 (the client asks the next server).
func Handler(roles Roles, token string, log *slog.Logger) http.Handler {
	s := &server{roles: roles, log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/roles", s.listRoles)
	mux.HandleFunc("GET /v1/clients", s.clients)
	mux.HandleFunc("GET /v1/sessions", s.sessions)
	mux.HandleFunc("GET /v1/subscriptions", s.subscriptions)
	mux.HandleFunc("GET /v1/retained", s.retained)
	mux.HandleFunc("GET /v1/bridges", s.bridges)
	mux.HandleFunc("GET /v1/stats", s.stats)
	mux.HandleFunc("POST /v1/kick", s.command(eventspb.SessionCommand_OP_KICK))
	mux.HandleFunc("POST /v1/delete-session", s.command(eventspb.SessionCommand_OP_DELETE_SESSION))
	mux.HandleFunc("POST /v1/delete-retained", s.deleteRetained)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint: "+r.Method+" "+r.URL.Path)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := bearerToken(r.Header.Get("Authorization"))
		if !ok || !tokenMatches(got, token) {
			log.Warn("admin request refused: wrong or missing token", "remote", r.RemoteAddr, "path", r.URL.Path)
			w.Header().Set("WWW-Authenticate", `Bearer realm="shoal admin"`)
			writeError(w, http.StatusUnauthorized, "wrong or missing admin token")
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// bearerToken returns the token of an Authorization header of the Bearer
// scheme, which RFC 9110 §11.1 makes case-insensitive ("bearer" too), one
// or more spaces before the token (§11.4).
func bearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimLeft(token, " "), true
}

type server struct {
	roles Roles
	log   *slog.Logger
}

func (s *server) listRoles(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, RoleList{Roles: s.roleNames()})
}

// roleNames are the roles served here.
func (s *server) roleNames() []string {
	out := []string{}
	if s.roles.Gateway != nil {
		out = append(out, "gateway")
	}
	if s.roles.Router != nil {
		out = append(out, "router")
	}
	if s.roles.Sessions != nil {
		out = append(out, "session")
	}
	if s.roles.Bridge != nil {
		out = append(out, "bridge")
	}
	return out
}

// scope is the tenant selection of a request: tenant= (possibly empty:
// the default tenant) or all_tenants=true.
type scope struct {
	tenant string
	all    bool
}

func scopeOf(w http.ResponseWriter, r *http.Request, mutation bool) (scope, bool) {
	q := r.URL.Query()
	all, _ := strconv.ParseBool(q.Get("all_tenants"))
	switch {
	case all && mutation:
		writeError(w, http.StatusBadRequest, "a change names one tenant: tenant=, not all_tenants")
		return scope{}, false
	case all:
		return scope{all: true}, true
	case !q.Has("tenant"):
		writeError(w, http.StatusBadRequest, "tenant= is required (empty for the default tenant), or all_tenants=true")
		return scope{}, false
	}
	return scope{tenant: q.Get("tenant")}, true
}

func (s *server) clients(w http.ResponseWriter, r *http.Request) {
	if s.roles.Gateway == nil {
		writeError(w, http.StatusNotFound, "this server runs no gateway")
		return
	}
	sc, ok := scopeOf(w, r, false)
	if !ok {
		return
	}
	pg, ok := pageOf(w, r)
	if !ok {
		return
	}
	out := Clients{Clients: []Client{}}
	if id := r.URL.Query().Get("client"); id != "" {
		if sc.all {
			writeError(w, http.StatusBadRequest, "client= needs tenant=")
			return
		}
		if ci, ok := s.roles.Gateway.Client(sc.tenant, id); ok {
			out.Clients = append(out.Clients, clientOf(ci, s.roles.GatewayID))
		}
	} else {
		cis, more := s.roles.Gateway.ClientsPage(sc.tenant, sc.all, gateway.ClientPage{
			AfterTenant: pg.AfterTenant, AfterClient: pg.AfterClient, Search: pg.Search, Limit: pg.Limit})
		for _, ci := range cis {
			out.Clients = append(out.Clients, clientOf(ci, s.roles.GatewayID))
		}
		out.More = more
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *server) sessions(w http.ResponseWriter, r *http.Request) {
	if s.roles.Sessions == nil {
		writeError(w, http.StatusNotFound, "this server runs no session service")
		return
	}
	sc, ok := scopeOf(w, r, false)
	if !ok {
		return
	}
	pg, ok := pageOf(w, r)
	if !ok {
		return
	}
	out := Sessions{Sessions: []Session{}}
	if id := r.URL.Query().Get("client"); id != "" {
		if sc.all {
			writeError(w, http.StatusBadRequest, "client= needs tenant=")
			return
		}
		sess, err := s.roles.Sessions.Session(r.Context(), sc.tenant, id)
		switch {
		case errors.Is(err, sessionsvc.ErrNotOwned):
			writeError(w, http.StatusMisdirectedRequest, err.Error())
			return
		case err == nil:
			out.Sessions = append(out.Sessions, sessionOf(sess, true))
		}
	} else {
		// Selected, sorted and cut by the session service before any is
		// copied: a page costs its rows, not every session's.
		page, more := s.roles.Sessions.SessionsPage(r.Context(), sc.tenant, sc.all, sessionsvc.Page{
			AfterTenant: pg.AfterTenant, AfterClient: pg.AfterClient, Search: pg.Search, Limit: pg.Limit})
		for _, sess := range page {
			out.Sessions = append(out.Sessions, sessionOf(sess, false))
		}
		out.More = more
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *server) query(w http.ResponseWriter, r *http.Request) (routersvc.Query, bool) {
	if s.roles.Router == nil {
		writeError(w, http.StatusNotFound, "this server runs no router")
		return routersvc.Query{}, false
	}
	sc, ok := scopeOf(w, r, false)
	if !ok {
		return routersvc.Query{}, false
	}
	q := r.URL.Query()
	return routersvc.Query{Tenant: sc.tenant, AllTenants: sc.all, Filter: q.Get("filter"), Client: q.Get("client")}, true
}

func (s *server) subscriptions(w http.ResponseWriter, r *http.Request) {
	q, ok := s.query(w, r)
	if !ok {
		return
	}
	pg, ok := pageOf(w, r)
	if !ok {
		return
	}
	subs, err := s.roles.Router.Subscriptions(r.Context(), q)
	if err != nil {
		s.internal(w, err)
		return
	}
	out := Subscriptions{Subscriptions: make([]Subscription, 0, len(subs))}
	for _, sub := range subs {
		out.Subscriptions = append(out.Subscriptions, subscriptionOf(sub))
	}
	slices.SortFunc(out.Subscriptions, comparePage)
	out.Subscriptions, out.More = cut(out.Subscriptions, pg)
	writeJSON(w, http.StatusOK, out)
}

func (s *server) retained(w http.ResponseWriter, r *http.Request) {
	q, ok := s.query(w, r)
	if !ok {
		return
	}
	pg, ok := pageOf(w, r)
	if !ok {
		return
	}
	envs, err := s.roles.Router.Retained(r.Context(), q)
	if err != nil {
		s.internal(w, err)
		return
	}
	out := RetainedList{Retained: make([]Retained, 0, len(envs))}
	for _, env := range envs {
		out.Retained = append(out.Retained, retainedOf(env))
	}
	slices.SortFunc(out.Retained, comparePage)
	out.Retained, out.More = cut(out.Retained, pg)
	writeJSON(w, http.StatusOK, out)
}

func (s *server) bridges(w http.ResponseWriter, r *http.Request) {
	if s.roles.Bridge == nil {
		writeError(w, http.StatusNotFound, "this server runs no kafka bridge")
		return
	}
	sc, ok := scopeOf(w, r, false)
	if !ok {
		return
	}
	out := Bridges{Mappings: []BridgeMapping{}}
	for _, m := range s.roles.Bridge.Status() {
		if sc.all || m.Tenant == sc.tenant {
			out.Mappings = append(out.Mappings, bridgeMappingOf(m))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *server) stats(w http.ResponseWriter, r *http.Request) {
	sc, ok := scopeOf(w, r, false)
	if !ok {
		return
	}
	out := Stats{Server: s.roles.GatewayID, At: time.Now().UTC(), Roles: s.roleNames(), Health: []RoleHealth{}}
	if out.Server == "" {
		out.Server, _ = os.Hostname()
	}
	if s.roles.Health != nil {
		out.Health = s.roles.Health()
	}
	if g := s.roles.Gateway; g != nil {
		out.Tenants = []TenantStats{}
		g.EachTenant(func(t string, st *gateway.Stats) {
			if sc.all || t == sc.tenant {
				out.Tenants = append(out.Tenants, TenantStats{Tenant: t, Connections: st.Load(gateway.ConnectionsCurrent),
					MessagesReceived: st.Load(gateway.MessagesReceived), MessagesSent: st.Load(gateway.MessagesSent)})
			}
		})
		slices.SortFunc(out.Tenants, func(a, b TenantStats) int { return strings.Compare(a.Tenant, b.Tenant) })
	}
	if sc.all && s.roles.Lags != nil {
		for _, l := range s.roles.Lags() {
			out.Lag = append(out.Lag, TopicLag{Topic: l.Topic, Group: l.Group, Partitions: l.Partitions, Lag: l.Lag})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *server) command(op eventspb.SessionCommand_Op) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.roles.Sessions == nil {
			writeError(w, http.StatusNotFound, "this server runs no session service")
			return
		}
		sc, ok := scopeOf(w, r, true)
		if !ok {
			return
		}
		id := r.URL.Query().Get("client")
		if id == "" {
			writeError(w, http.StatusBadRequest, "client= is required")
			return
		}
		err := s.roles.Sessions.Command(r.Context(), sc.tenant, id, op, "shoal ctl from "+r.RemoteAddr)
		switch {
		case errors.Is(err, sessionsvc.ErrNotOwned):
			writeError(w, http.StatusMisdirectedRequest, err.Error())
		case errors.Is(err, sessionsvc.ErrNoSession):
			writeError(w, http.StatusNotFound, "client "+strconv.Quote(id)+" of tenant "+strconv.Quote(sc.tenant)+" has no session")
		case errors.Is(err, sessionsvc.ErrNotConnected):
			writeError(w, http.StatusNotFound, "client "+strconv.Quote(id)+" of tenant "+strconv.Quote(sc.tenant)+" is not connected")
		case err != nil:
			s.internal(w, err)
		default:
			writeJSON(w, http.StatusAccepted, Accepted{Event: "session_command", Detail: op.String()})
		}
	}
}

func (s *server) deleteRetained(w http.ResponseWriter, r *http.Request) {
	if s.roles.Router == nil {
		writeError(w, http.StatusNotFound, "this server runs no router")
		return
	}
	sc, ok := scopeOf(w, r, true)
	if !ok {
		return
	}
	name := r.URL.Query().Get("topic")
	if name == "" {
		writeError(w, http.StatusBadRequest, "topic= is required")
		return
	}
	err := s.roles.Router.DeleteRetained(r.Context(), sc.tenant, name)
	switch {
	case errors.Is(err, routersvc.ErrNoRetained):
		writeError(w, http.StatusNotFound, "tenant "+strconv.Quote(sc.tenant)+" has no retained message on "+strconv.Quote(name))
	case err != nil:
		s.internal(w, err)
	default:
		writeJSON(w, http.StatusAccepted, Accepted{Event: "publish", Detail: "empty retained message on " + name})
	}
}

func (s *server) internal(w http.ResponseWriter, err error) {
	s.log.Warn("admin request failed", "err", err)
	writeError(w, http.StatusInternalServerError, err.Error())
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, Error{Error: msg})
}
