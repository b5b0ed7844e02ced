package gateway

import (
	"bytes"
	"crypto/x509"
	"net"
	"net/netip"
	"time"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

// Identity is who a client proved to be, and the tenant it belongs to.
type Identity struct {
	// Name is the user name, the token's subject or the certificate's
	// field.
	Name string
	// Tenant is the identity's tenant: a token's tenant claim, or the
	// name's prefix up to the tenant separator.
	Tenant string
	// Expires is when the proof runs out (a token's exp): the connection
	// is then closed, with 0xA0 (maximum connect time) in 5.0. Zero:
	// never.
	Expires time.Time
}

// Authenticator checks a CONNECT's user name and password (a password
// file: gateway/auth.Passwords). It returns nil when they prove the
// identity user, else an error (answered as a bad user name or password:
// CONNACK 0x86, 3.1.1 return code 4).
type Authenticator interface {
	Authenticate(user string, password []byte) error
}

// TokenVerifier checks a token carried in the CONNECT's password field (a
// JWT: gateway/auth.JWT) and returns the identity it proves. An Identity
// without a Tenant takes its name's.
type TokenVerifier interface {
	VerifyToken(token []byte) (Identity, error)
}

// Authorizer says what each client may do (an ACL file:
// gateway/acl.ACL): For is asked once per connection, after CONNECT,
// with the identity's name (none when anonymous) and the client
// identifier.
type Authorizer interface {
	For(user, clientID string, anonymous bool) Permissions
}

// Permissions are one client's: topics and filters are relative to its
// tenant. Each check is made on the path of every message and must not
// allocate.
type Permissions interface {
	AllowPublish(topic []byte) bool
	AllowReadString(topic string) bool
	AllowSubscribeString(filter string) bool
}

// FailureDelay slows down repeated failed attempts from one address
// (gateway/auth.Delay): Wait says how long to hold this attempt back.
type FailureDelay interface {
	Wait(addr netip.Addr) time.Duration
	Failed(addr netip.Addr)
	Succeeded(addr netip.Addr)
}

// Auth is how the gateway authenticates CONNECTs (WithAuth). The zero value has no source: every client is accepted,
// anonymous, and its tenant is its client identifier's (the rule without
// authentication).
//
// The sources, in the order they are tried:
//   - Certificates: with CertIdentity set, a client that presented a
//     certificate the listener verified (mTLS) is the identity
//     CertIdentity reads from it; its user name and password are not
//     checked.
//   - Tokens: a password that is a JWT (three base64url parts, the first
//     beginning "eyJ") is verified by Tokens, whatever the user name (5.0
//     clients may send a password alone).
//   - Passwords: any other user name and password.
//
// With any source, a client must prove an identity, unless it sends no
// credentials and AllowAnonymous is set: none → CONNACK 0x87 / 3.1.1 5
// (not authorized); wrong ones → 0x86 / 4 (bad user name or password),
// after the delay of earlier failures from its address. An identity
// belongs to one tenant and may use only client identifiers of that
// tenant (0x85 / 2 otherwise); one it lets the gateway assign is made in
// its tenant.
type Auth struct {
	Passwords      Authenticator
	Tokens         TokenVerifier
	CertIdentity   func(*x509.Certificate) (string, error)
	AllowAnonymous bool
	Delay          FailureDelay // optional

	// ACL, when set, is asked what each client may publish (its will and
	// retained messages too), subscribe to and receive. A PUBLISH it
	// refuses is answered 0x87 in 5.0 and dropped in 3.1.1, or closes a
	// 3.1.1 connection when ACLDenyDisconnect is set; a refused
	// subscription gets SUBACK 0x87 (3.1.1: 0x80), a refused will CONNACK
	// 0x87 (3.1.1: 5), and a message the client may not read is not sent.
	ACL               Authorizer
	ACLDenyDisconnect bool
}

// authorize sets the connection's permissions once its client identifier
// is known, and checks its will against them.
func (c *conn) authorize(cp *packet.Connect) bool {
	a := c.g.auth.ACL
	if a == nil {
		return true
	}
	user := ""
	if c.ident != nil {
		user = c.ident.Name
	}
	c.perms = a.For(user, c.clientID, c.ident == nil)
	if cp.WillFlag && !c.perms.AllowPublish(cp.WillTopic) {
		c.refuseFor(causeNotAuthorized, packet.CodeNotAuthorized, "detail", "will refused by the acl", "topic", string(cp.WillTopic))
		return false
	}
	return true
}

// configured reports whether any source is set.
func (a *Auth) configured() bool {
	return a.Passwords != nil || a.Tokens != nil || a.CertIdentity != nil
}

// authenticate is the handshake's authentication step: it sets c.ident
// to the proven identity, or refuses the connection. Nothing of the
// password is logged.
func (c *conn) authenticate(cp *packet.Connect, client net.Addr, cert *x509.Certificate) bool {
	g := c.g
	a := &g.auth
	if !a.configured() {
		return true
	}
	if cert != nil && a.CertIdentity != nil {
		name, err := a.CertIdentity(cert)
		if err != nil {
			c.add(AuthFailures, 1)
			c.refuseFor(causeNotAuthorized, packet.CodeNotAuthorized, "detail", "certificate names no identity",
				"client_id", string(cp.ClientID), "err", err)
			return false
		}
		c.setIdentity(Identity{Name: name})
		return true
	}
	token := cp.PasswordFlag && a.Tokens != nil && looksLikeJWT(cp.Password)
	if !cp.UsernameFlag && !token {
		if a.AllowAnonymous {
			return true
		}
		c.add(AuthFailures, 1)
		c.refuseFor(causeNotAuthorized, packet.CodeNotAuthorized, "detail", "anonymous", "client_id", string(cp.ClientID))
		return false
	}
	addr := addrOf(client)
	if a.Delay != nil {
		if d := a.Delay.Wait(addr); d > 0 {
			// Bounded by the connect timeout, as the whole handshake is.
			time.Sleep(min(d, g.cfg.ConnectTimeout))
		}
	}
	var id Identity
	var err error
	switch {
	case token:
		id, err = a.Tokens.VerifyToken(cp.Password)
	case a.Passwords != nil:
		// A password hash is costly by design (argon2id: 64 MiB and tens
		// of milliseconds each): as many at once as there are
		// processors, so a storm of connects queues instead of
		// exhausting memory.
		g.authSlots <- struct{}{}
		err = a.Passwords.Authenticate(string(cp.Username), cp.Password)
		<-g.authSlots
		id.Name = string(cp.Username)
	default:
		err = errNoPasswordSource
	}
	if err != nil {
		if a.Delay != nil {
			a.Delay.Failed(addr)
		}
		c.add(AuthFailures, 1)
		// The user name and why, never the password or the token.
		c.refuseFor(causeAuthFailed, packet.CodeBadUserNameOrPassword, "client_id", string(cp.ClientID),
			"user", string(cp.Username), "token", token, "err", err)
		return false
	}
	if a.Delay != nil {
		a.Delay.Succeeded(addr)
	}
	c.setIdentity(id)
	return true
}

// setIdentity makes id the connection's identity, its tenant the name's
// when it has none.
func (c *conn) setIdentity(id Identity) {
	if id.Tenant == "" {
		id.Tenant = Tenant(id.Name, c.g.cfg.TenantSeparator)
	}
	c.ident = &id
}

type authError string

func (e authError) Error() string { return string(e) }

// errNoPasswordSource refuses a user name and password when only tokens
// or certificates are configured.
const errNoPasswordSource = authError("no password file: a token or a certificate is required")

// looksLikeJWT reports whether p has a JWT's shape: three dot-separated
// parts, the first a base64url JSON object ("eyJ" is `{"`).
func looksLikeJWT(p []byte) bool {
	return bytes.HasPrefix(p, []byte("eyJ")) && bytes.Count(p, []byte(".")) == 2
}

// addrOf is the IP address of a client's network address (the zero Addr
// when it has none, as for an in-process pipe).
func addrOf(a net.Addr) netip.Addr {
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

// closeAtExpiry arranges for the connection to be closed when its
// identity's proof runs out (a token's exp), with 0xA0 (maximum connect
// time) in 5.0.
func (c *conn) closeAtExpiry() {
	if c.ident == nil || c.ident.Expires.IsZero() {
		return
	}
	c.expiry = time.AfterFunc(c.ident.Expires.Sub(c.g.clock()), func() {
		c.kick(packet.CodeMaximumConnectTime) // logged by its end (identity_expired)
	})
}
