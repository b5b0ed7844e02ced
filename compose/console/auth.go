package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"sync"
	"time"
)

// Sessions: a login makes one, kept in memory (a restart logs everyone
// out), named by a random id in the cookie. A session carries its CSRF
// token, which every form that changes something sends back; the tenant
// it is limited to (a tenant console token's), or none (the admin
// token's); and the hash of the token it was made with, so that a tenant
// token taken out of the tokens file ends its sessions at their next
// request.

const (
	cookieName = "shoal_console"
	// sessionIdle ends a session unused this long; sessionMax ends any.
	sessionIdle = time.Hour
	sessionMax  = 12 * time.Hour
	// maxSessions bounds the sessions kept: the oldest goes first.
	maxSessions = 10000
)

// session is one login.
type session struct {
	id, csrf string
	// admin: the admin token's session, of every tenant; else tenant is
	// the one it sees.
	admin   bool
	tenant  string
	token   [sha256.Size]byte
	created time.Time
	used    time.Time
	flash   string // said once, on the next page: what a change did
}

// sessions are the logins in force.
type sessions struct {
	mu sync.Mutex
	m  map[string]*session
}

func randomID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// add makes a session.
func (ss *sessions) add(admin bool, tenant, token string, now time.Time) *session {
	s := &session{id: randomID(), csrf: randomID(), admin: admin, tenant: tenant,
		token: sha256.Sum256([]byte(token)), created: now, used: now}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.m == nil {
		ss.m = map[string]*session{}
	}
	if len(ss.m) >= maxSessions {
		var oldest *session
		for _, o := range ss.m {
			if oldest == nil || o.used.Before(oldest.used) {
				oldest = o
			}
		}
		delete(ss.m, oldest.id)
	}
	ss.m[s.id] = s
	return s
}

// get returns the live session of id, marking it used.
func (ss *sessions) get(id string, now time.Time) *session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.m[id]
	if s == nil {
		return nil
	}
	if now.Sub(s.used) > sessionIdle || now.Sub(s.created) > sessionMax {
		delete(ss.m, id)
		return nil
	}
	s.used = now
	return s
}

func (ss *sessions) remove(id string) {
	ss.mu.Lock()
	delete(ss.m, id)
	ss.mu.Unlock()
}

// setCookie sets the session cookie: HttpOnly, SameSite=Strict, Secure
// when the request came over TLS; maxAge < 0 deletes it.
func setCookie(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
	})
}

// equalSecret compares two secrets in constant time (of their hashes, so
// that the length does not show either).
func equalSecret(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1 && a != "" && b != ""
}

// setFlash keeps msg for s's next page.
func (ss *sessions) setFlash(s *session, msg string) {
	ss.mu.Lock()
	s.flash = msg
	ss.mu.Unlock()
}

// takeFlash returns and forgets s's message.
func (ss *sessions) takeFlash(s *session) string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	m := s.flash
	s.flash = ""
	return m
}
