package gateway

import (
	"net"
	"net/netip"
	"time"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

// Authenticator checks a CONNECT's user name and password (a password
// file: gateway/auth.Passwords). It returns nil when they prove the
// identity user, else an error (answered as a bad user name or password:
// CONNACK 0x86, 3.1.1 return code 4).
type Authenticator interface {
	Authenticate(user string, password []byte) error
}

// FailureDelay slows down repeated failed attempts from one address
// (gateway/auth.Delay): Wait says how long to hold this attempt back.
type FailureDelay interface {
	Wait(addr netip.Addr) time.Duration
	Failed(addr netip.Addr)
	Succeeded(addr netip.Addr)
}

// Auth is how the gateway authenticates CONNECTs; set it with SetAuth
// before Run. The zero value has no source: every client is accepted,
// anonymous, and its tenant is its client identifier's (the rule without
// authentication).
//
// With a source, a client must prove an identity, unless it sends no user
// name and AllowAnonymous is set: no user name → CONNACK 0x87 / 3.1.1 5
// (not authorized); a wrong one → 0x86 / 4 (bad user name or password),
// after the delay of earlier failures from its address. An identity
// belongs to one tenant, its user name's prefix up to the tenant
// separator, and may use only client identifiers of that tenant (0x85 /
// 2 otherwise); one it lets the gateway assign is made in its tenant.
type Auth struct {
	Passwords      Authenticator
	AllowAnonymous bool
	Delay          FailureDelay // optional
}

// SetAuth sets how CONNECTs are authenticated. It must be called before
// Run.
func (g *Gateway) SetAuth(a Auth) { g.auth = a }

// authenticate is the handshake's authentication step: it sets c.user to
// the proven identity, or refuses the connection. Nothing of the password
// is logged.
func (c *conn) authenticate(cp *packet.Connect, client net.Addr) bool {
	g := c.g
	a := g.auth
	if a.Passwords == nil {
		return true
	}
	if !cp.UsernameFlag {
		if a.AllowAnonymous {
			return true
		}
		g.log.Info("anonymous connect refused", "remote", client)
		c.refuse(packet.CodeNotAuthorized, c.version)
		return false
	}
	user := string(cp.Username)
	addr := addrOf(client)
	if a.Delay != nil {
		if d := a.Delay.Wait(addr); d > 0 {
			// Bounded by the connect timeout, as the whole handshake is.
			time.Sleep(min(d, g.cfg.ConnectTimeout))
		}
	}
	// A password hash is costly by design (argon2id: 64 MiB and tens of
	// milliseconds each): as many at once as there are processors, so a
	// storm of connects queues instead of exhausting memory.
	g.authSlots <- struct{}{}
	err := a.Passwords.Authenticate(user, cp.Password)
	<-g.authSlots
	if err != nil {
		if a.Delay != nil {
			a.Delay.Failed(addr)
		}
		g.log.Info("authentication failed", "remote", client, "user", user)
		c.refuse(packet.CodeBadUserNameOrPassword, c.version)
		return false
	}
	if a.Delay != nil {
		a.Delay.Succeeded(addr)
	}
	c.user = user
	return true
}

// addrOf is the IP address of a client's network address (the zero Addr
// when it has none, as for an in-process pipe).
func addrOf(a net.Addr) netip.Addr {
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}
