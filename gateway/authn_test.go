package gateway

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

// fakePasswords accepts the users of its map with their passwords.
type fakePasswords map[string]string

func (f fakePasswords) Authenticate(user string, password []byte) error {
	if p, ok := f[user]; ok && p == string(password) {
		return nil
	}
	return errors.New("bad user name or password")
}

// recordingDelay counts failures and successes; it never delays.
type recordingDelay struct {
	mu              sync.Mutex
	failed, succeed int
	addrs           []netip.Addr
}

func (d *recordingDelay) Wait(netip.Addr) time.Duration { return 0 }
func (d *recordingDelay) Failed(a netip.Addr) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failed++
	d.addrs = append(d.addrs, a)
}
func (d *recordingDelay) Succeeded(netip.Addr) { d.mu.Lock(); d.succeed++; d.mu.Unlock() }

func (d *recordingDelay) counts() (int, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.failed, d.succeed
}

// connackFor sends cp (in its version) to g and returns the CONNACK's
// reason code as 5.0 states it, the raw 3.1.1 return code, and the
// assigned client identifier.
func connackFor(t *testing.T, g *Gateway, cp *packet.Connect) (packet.ReasonCode, byte, string) {
	t.Helper()
	nc, err := net.Dial("tcp", g.Addr("mqtt").String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = nc.Close() }()
	if _, err := nc.Write(cp.Append(nil, cp.Version)); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if cp.Version != packet.V5 {
		var b [4]byte
		if _, err := io.ReadFull(nc, b[:]); err != nil {
			t.Fatalf("read 3.1.1 CONNACK: %v", err)
		}
		if b[0] != 0x20 || b[1] != 2 {
			t.Fatalf("3.1.1 answer % x is not a CONNACK", b)
		}
		return 0, b[3], ""
	}
	rd := packet.NewReader(nc, 256)
	h, body, err := rd.ReadPacket()
	if err != nil {
		t.Fatal(err)
	}
	p, err := packet.Decode(h, body, packet.V5)
	if err != nil {
		t.Fatal(err)
	}
	ca, ok := p.(*packet.Connack)
	if !ok {
		t.Fatalf("answer %T, want CONNACK", p)
	}
	return ca.Code, 0, string(ca.Props.AssignedClientID)
}

// TestAuthenticate drives the handshake's authentication step: anonymous
// clients with and without a source, wrong and right passwords, and the
// tenant bound to the identity, in 5.0 and 3.1.1.
func TestAuthenticate(t *testing.T) {
	users := fakePasswords{"acme-alice": "s3cret", "globex-bob": "hunter2"}
	type tc struct {
		name      string
		auth      Auth
		cp        packet.Connect
		v5        packet.ReasonCode
		v311      byte
		failed    int
		succeeded int
	}
	withUser := func(id, user, pass string) packet.Connect {
		return packet.Connect{ClientID: []byte(id), CleanStart: true, UsernameFlag: true, Username: []byte(user),
			PasswordFlag: true, Password: []byte(pass)}
	}
	cases := []tc{
		{name: "no source, anonymous", cp: packet.Connect{ClientID: []byte("acme-1"), CleanStart: true}},
		{name: "no source, any user", cp: withUser("acme-1", "whoever", "x")},
		{name: "source, anonymous refused", auth: Auth{Passwords: users},
			cp: packet.Connect{ClientID: []byte("acme-1"), CleanStart: true}, v5: packet.CodeNotAuthorized, v311: 5},
		{name: "source, anonymous allowed", auth: Auth{Passwords: users, AllowAnonymous: true},
			cp: packet.Connect{ClientID: []byte("acme-1"), CleanStart: true}},
		{name: "wrong password", auth: Auth{Passwords: users}, cp: withUser("acme-1", "acme-alice", "guess"),
			v5: packet.CodeBadUserNameOrPassword, v311: 4, failed: 1},
		{name: "unknown user", auth: Auth{Passwords: users}, cp: withUser("acme-1", "acme-mallory", "s3cret"),
			v5: packet.CodeBadUserNameOrPassword, v311: 4, failed: 1},
		{name: "right password, own tenant", auth: Auth{Passwords: users}, cp: withUser("acme-1", "acme-alice", "s3cret"),
			succeeded: 1},
		{name: "right password, another tenant", auth: Auth{Passwords: users}, cp: withUser("globex-1", "acme-alice", "s3cret"),
			v5: packet.CodeClientIdentifierNotValid, v311: 2, succeeded: 1},
		{name: "right password, no tenant", auth: Auth{Passwords: users}, cp: withUser("plain", "acme-alice", "s3cret"),
			v5: packet.CodeClientIdentifierNotValid, v311: 2, succeeded: 1},
	}
	for _, v := range []packet.Version{packet.V5, packet.V311} {
		for _, c := range cases {
			t.Run(c.name+"/"+v.String(), func(t *testing.T) {
				d := &recordingDelay{}
				a := c.auth
				if a.Passwords != nil {
					a.Delay = d
				}
				g := startGatewayAuth(t, a)
				cp := c.cp
				cp.Version = v
				code, rc, _ := connackFor(t, g, &cp)
				if v == packet.V5 && code != c.v5 {
					t.Errorf("CONNACK %v, want %v", code, c.v5)
				}
				if v != packet.V5 && rc != c.v311 {
					t.Errorf("3.1.1 return code %d, want %d", rc, c.v311)
				}
				if f, s := d.counts(); f != c.failed || s != c.succeeded {
					t.Errorf("delay saw %d failures and %d successes, want %d and %d", f, s, c.failed, c.succeeded)
				}
				if c.failed > 0 && !d.addrs[0].IsLoopback() {
					t.Errorf("failure recorded for %v, want the loopback client address", d.addrs[0])
				}
			})
		}
	}
}

// TestAuthenticatedAssignedID: an identity that lets the gateway assign
// its client identifier gets one in its own tenant.
func TestAuthenticatedAssignedID(t *testing.T) {
	g := startGatewayAuth(t, Auth{Passwords: fakePasswords{"acme-alice": "s3cret"}})
	code, _, assigned := connackFor(t, g, &packet.Connect{Version: packet.V5, CleanStart: true,
		UsernameFlag: true, Username: []byte("acme-alice"), PasswordFlag: true, Password: []byte("s3cret")})
	if code != packet.CodeSuccess || !strings.HasPrefix(assigned, "acme-") {
		t.Fatalf("CONNACK %v with assigned id %q, want success and an id of tenant acme", code, assigned)
	}
}

// startGatewayAuth starts a gateway on a fake log that authenticates as a
// says (given at construction, WithAuth).
func startGatewayAuth(t *testing.T, a Auth) *Gateway {
	t.Helper()
	g, stop := runGatewayWith(t, newFakeLog(), func(g *Gateway) { WithAuth(a)(g) })
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	return g
}

// TestWillChecks: a will goes through the checks of a PUBLISH, so no
// client forges $SYS (or a $share topic) by its will.
func TestWillChecks(t *testing.T) {
	g := startGatewayAuth(t, Auth{})
	for _, tc := range []struct {
		topic string
		v5    packet.ReasonCode
		v311  byte
	}{
		{"acme/status", packet.CodeSuccess, 0},
		{"$SYS/broker/uptime", packet.CodeNotAuthorized, 5},
		{"$share/g/x", packet.CodeNotAuthorized, 5},
	} {
		for _, v := range []packet.Version{packet.V5, packet.V311} {
			cp := packet.Connect{Version: v, ClientID: []byte("acme-w"), CleanStart: true,
				WillFlag: true, WillTopic: []byte(tc.topic), WillPayload: []byte("gone")}
			code, rc, _ := connackFor(t, g, &cp)
			if v == packet.V5 && code != tc.v5 {
				t.Errorf("will on %q, 5.0: CONNACK %v, want %v", tc.topic, code, tc.v5)
			}
			if v == packet.V311 && rc != tc.v311 {
				t.Errorf("will on %q, 3.1.1: return code %d, want %d", tc.topic, rc, tc.v311)
			}
		}
	}
	// A 5.0 will that says its payload is UTF-8 and is not.
	cp := packet.Connect{Version: packet.V5, ClientID: []byte("acme-w"), CleanStart: true,
		WillFlag: true, WillTopic: []byte("acme/status"), WillPayload: []byte{0xff, 0xfe}}
	cp.WillProps.PayloadFormat = 1
	cp.WillProps.Set(packet.PropPayloadFormat)
	if code, _, _ := connackFor(t, g, &cp); code != packet.CodePayloadFormatInvalid {
		t.Errorf("will with a payload that is not UTF-8: CONNACK %v, want %v", code, packet.CodePayloadFormatInvalid)
	}
}

// fakeTokens verifies tokens "eyJ.<name>.<tenant>" whose name is in the
// map; the identity expires after the map's duration (0: never).
type fakeTokens map[string]time.Duration

func (f fakeTokens) VerifyToken(token []byte) (Identity, error) {
	parts := strings.Split(string(token), ".")
	if len(parts) != 3 {
		return Identity{}, errors.New("not a token")
	}
	ttl, ok := f[parts[1]]
	if !ok {
		return Identity{}, errors.New("forged token")
	}
	id := Identity{Name: parts[1], Tenant: parts[2]}
	if ttl > 0 {
		id.Expires = time.Now().Add(ttl)
	}
	return id, nil
}

// TestAuthenticateToken: a password that is a token is verified as one,
// with or without a user name; its tenant claim, when it has one, is the
// identity's tenant; a source of tokens alone refuses passwords.
func TestAuthenticateToken(t *testing.T) {
	tokens := fakeTokens{"acme-alice": 0, "bob": 0}
	pw := fakePasswords{"acme-carol": "s3cret"}
	conn := func(id, user, pass string) *packet.Connect {
		cp := &packet.Connect{Version: packet.V5, ClientID: []byte(id), CleanStart: true, PasswordFlag: true, Password: []byte(pass)}
		if user != "" {
			cp.UsernameFlag, cp.Username = true, []byte(user)
		}
		return cp
	}
	for _, tc := range []struct {
		name string
		auth Auth
		cp   *packet.Connect
		want packet.ReasonCode
	}{
		{"token without user name", Auth{Tokens: tokens}, conn("acme-1", "", "eyJ.acme-alice."), packet.CodeSuccess},
		{"token with any user name", Auth{Tokens: tokens}, conn("acme-1", "jwt", "eyJ.acme-alice."), packet.CodeSuccess},
		{"token, another tenant", Auth{Tokens: tokens}, conn("globex-1", "", "eyJ.acme-alice."), packet.CodeClientIdentifierNotValid},
		{"tenant claim", Auth{Tokens: tokens}, conn("globex-1", "", "eyJ.bob.globex"), packet.CodeSuccess},
		{"tenant claim, name's tenant refused", Auth{Tokens: tokens}, conn("bob-1", "", "eyJ.bob.globex"), packet.CodeClientIdentifierNotValid},
		{"forged token", Auth{Tokens: tokens}, conn("acme-1", "", "eyJ.acme-mallory."), packet.CodeBadUserNameOrPassword},
		{"password without a password file", Auth{Tokens: tokens}, conn("acme-1", "acme-carol", "s3cret"), packet.CodeBadUserNameOrPassword},
		{"password next to tokens", Auth{Tokens: tokens, Passwords: pw}, conn("acme-1", "acme-carol", "s3cret"), packet.CodeSuccess},
		{"token next to passwords", Auth{Tokens: tokens, Passwords: pw}, conn("acme-1", "", "eyJ.acme-alice."), packet.CodeSuccess},
		{"no credentials", Auth{Tokens: tokens}, &packet.Connect{Version: packet.V5, ClientID: []byte("acme-1"), CleanStart: true}, packet.CodeNotAuthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := startGatewayAuth(t, tc.auth)
			if code, _, _ := connackFor(t, g, tc.cp); code != tc.want {
				t.Errorf("CONNACK %v, want %v", code, tc.want)
			}
		})
	}
}

// TestTokenExpiryDisconnects: a connection whose token expires is closed,
// with DISCONNECT 0xA0 (maximum connect time) in 5.0 and without a word
// in 3.1.1.
func TestTokenExpiryDisconnects(t *testing.T) {
	g := startGatewayAuth(t, Auth{Tokens: fakeTokens{"acme-alice": 300 * time.Millisecond}})
	for _, v := range []packet.Version{packet.V5, packet.V311} {
		t.Run(v.String(), func(t *testing.T) {
			nc, err := net.Dial("tcp", g.Addr("mqtt").String())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = nc.Close() }()
			cp := packet.Connect{Version: v, ClientID: []byte("acme-1"), CleanStart: true, KeepAlive: 60,
				UsernameFlag: true, Username: []byte("jwt"), PasswordFlag: true, Password: []byte("eyJ.acme-alice.")}
			if _, err := nc.Write(cp.Append(nil, v)); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_ = nc.SetReadDeadline(start.Add(10 * time.Second))
			rd := packet.NewReader(nc, 256)
			h, body, err := rd.ReadPacket()
			if err != nil {
				t.Fatal(err)
			}
			if p, err := packet.Decode(h, body, v); err != nil || p.Type() != packet.CONNACK || p.(*packet.Connack).Code != 0 { //nolint:errcheck,forcetypeassert // the type is checked first
				t.Fatalf("CONNACK %v, %v", p, err)
			}
			h, body, err = rd.ReadPacket()
			if v == packet.V5 {
				if err != nil {
					t.Fatalf("no DISCONNECT: %v", err)
				}
				p, derr := packet.Decode(h, body, v)
				if d, ok := p.(*packet.Disconnect); derr != nil || !ok || d.Code != packet.CodeMaximumConnectTime {
					t.Fatalf("got %v (%v), want DISCONNECT 0xA0", p, derr)
				}
				_, _, err = rd.ReadPacket()
			}
			if !errors.Is(err, io.EOF) {
				t.Fatalf("after expiry: %v, want the end of the stream", err)
			}
			if d := time.Since(start); d < 250*time.Millisecond {
				t.Errorf("closed after %v, before the token expired", d)
			}
		})
	}
}
