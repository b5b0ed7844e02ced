package admin

import (
	"cmp"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	sessionsvc "github.com/shoal-mqtt/shoal/session-svc"
)

// A listing's page: the listings take search= (a part of the client id,
// or of the topic or filter, any case), after_tenant= and after_client=
// (the last entry of the page before: keyset paging, which stays correct
// while entries come and go and merges across servers), and limit= (at
// most MaxPageLimit). Without limit= a listing returns everything, as it
// always has; with it, the answer says "more" when entries follow.

// MaxPageLimit bounds limit=.
const MaxPageLimit = 1000

// Page is a listing's page request.
type Page struct {
	// Search keeps the entries whose client id (or topic, or filter)
	// holds it, in any case; "" keeps all.
	Search string
	// AfterTenant and AfterClient are the key of the last entry shown:
	// the page starts after it. Both "" start at the first entry.
	AfterTenant, AfterClient string
	// Limit is the page's size; 0 means no paging.
	Limit int
}

func (p Page) values(v url.Values) {
	if p.Search != "" {
		v.Set("search", p.Search)
	}
	if p.AfterTenant != "" || p.AfterClient != "" {
		v.Set("after_tenant", p.AfterTenant)
		v.Set("after_client", p.AfterClient)
	}
	if p.Limit > 0 {
		v.Set("limit", strconv.Itoa(p.Limit))
	}
}

// pageOf reads a request's page, answering 400 for a bad limit.
func pageOf(w http.ResponseWriter, r *http.Request) (Page, bool) {
	q := r.URL.Query()
	p := Page{Search: q.Get("search"), AfterTenant: q.Get("after_tenant"), AfterClient: q.Get("after_client")}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxPageLimit {
			writeError(w, http.StatusBadRequest, "limit= must be 1 to "+strconv.Itoa(MaxPageLimit))
			return Page{}, false
		}
		p.Limit = n
	}
	return p, true
}

// keyed is what a paged entry offers: its key (tenant, then client id or
// topic) and the text search= looks in.
type keyed interface {
	pageKey() (tenant, name string)
}

func (c Client) pageKey() (string, string)       { return c.Tenant, c.ClientID }
func (s Session) pageKey() (string, string)      { return s.Tenant, s.ClientID }
func (s Subscription) pageKey() (string, string) { return s.Tenant, s.ClientID + "\x00" + s.Filter }
func (r Retained) pageKey() (string, string)     { return r.Tenant, r.Topic }

// sessionKey pages sessions (the tests' fake session service).
type sessionKey struct{ s *sessionsvc.Session }

func (k sessionKey) pageKey() (string, string) { return k.s.Tenant, k.s.ClientID }

// comparePage orders entries by their keys.
func comparePage[T keyed](a, b T) int {
	at, an := a.pageKey()
	bt, bn := b.pageKey()
	return cmp.Or(cmp.Compare(at, bt), cmp.Compare(an, bn))
}

// cut returns the entries of p, from items sorted by comparePage, and
// whether more follow.
func cut[T keyed](items []T, p Page) ([]T, bool) {
	out := items[:0:0]
	search := strings.ToLower(p.Search)
	started := p.AfterTenant == "" && p.AfterClient == ""
	for _, it := range items {
		t, n := it.pageKey()
		if !started {
			if cmp.Or(cmp.Compare(t, p.AfterTenant), cmp.Compare(n, p.AfterClient)) <= 0 {
				continue
			}
			started = true
		}
		if search != "" && !strings.Contains(strings.ToLower(strings.ReplaceAll(n, "\x00", " ")), search) {
			continue
		}
		if p.Limit > 0 && len(out) == p.Limit {
			return out, true
		}
		out = append(out, it)
	}
	return out, false
}
