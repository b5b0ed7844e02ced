package broker_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/golang-jwt/jwt/v5"

	"github.com/shoal-mqtt/shoal/compose/config"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

// TestJWTEndToEnd: a JWT in the password field authenticates a Paho
// client (the tenant from its tenant claim); expired, forged and
// wrong-audience tokens are refused with 0x86; a connection is closed
// with 0xA0 when its token expires.
func TestJWTEndToEnd(t *testing.T) {
	secret := []byte("a secret of at least thirty-two bytes, for HS256")
	path := filepath.Join(t.TempDir(), "jwt.secret")
	if err := os.WriteFile(path, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	b := startBroker(t, func(c *config.Config) {
		c.Auth.JWT.HMACSecretFile, c.Auth.JWT.Audience, c.Auth.JWT.TenantClaim = path, "shoal", "tenant"
		c.Auth.JWT.Skew = time.Second
	})
	sign := func(key []byte, claims jwt.MapClaims) []byte {
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return []byte(s)
	}
	now := time.Now()
	claims := func(exp time.Time, aud string) jwt.MapClaims {
		return jwt.MapClaims{"sub": "device-7", "tenant": "acme", "aud": aud, "exp": exp.Unix(), "iat": now.Unix()}
	}
	for name, tc := range map[string]struct {
		token []byte
		id    string
		want  packet.ReasonCode
	}{
		"valid":                      {sign(secret, claims(now.Add(time.Hour), "shoal")), "acme-7", packet.CodeSuccess},
		"valid, another tenant's id": {sign(secret, claims(now.Add(time.Hour), "shoal")), "globex-7", packet.CodeClientIdentifierNotValid},
		"expired":                    {sign(secret, claims(now.Add(-time.Hour), "shoal")), "acme-7", packet.CodeBadUserNameOrPassword},
		"forged":                     {sign([]byte("another secret of thirty-two bytes or more"), claims(now.Add(time.Hour), "shoal")), "acme-7", packet.CodeBadUserNameOrPassword},
		"wrong audience":             {sign(secret, claims(now.Add(time.Hour), "someone-else")), "acme-7", packet.CodeBadUserNameOrPassword},
	} {
		t.Run(name, func(t *testing.T) {
			r := dialRaw(t, mqttAddr(b), packet.V5)
			if ca := r.connect(&packet.Connect{ClientID: []byte(tc.id), CleanStart: true, PasswordFlag: true, Password: tc.token}); ca.Code != tc.want {
				t.Fatalf("CONNACK %v, want %v", ca.Code, tc.want)
			}
		})
	}

	// A Paho client whose token expires in 2 s is disconnected with 0xA0.
	c, _ := dialV5(t, mqttAddr(b), "acme-8", func(cp *paho.Connect) {
		cp.Username, cp.UsernameFlag = "jwt", true
		cp.Password, cp.PasswordFlag = sign(secret, claims(time.Now().Add(2*time.Second), "shoal")), true
	})
	select {
	case d := <-c.disc:
		if packet.ReasonCode(d.ReasonCode) != packet.CodeMaximumConnectTime {
			t.Fatalf("DISCONNECT %#x, want 0xA0", d.ReasonCode)
		}
	case <-time.After(4*time.Second + wait):
		t.Fatal("no DISCONNECT after the token expired")
	}
}
