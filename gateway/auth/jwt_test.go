package auth

import (
	"bytes"
	"crypto/elliptic"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TestJWTAlgorithms verifies a token of every accepted algorithm, each
// against a key file of the fitting type, and checks the identity.
func TestJWTAlgorithms(t *testing.T) {
	dir := t.TempDir()
	rsaKey := newRSAKey(t)
	p256, p384, p521 := newECKey(t, elliptic.P256()), newECKey(t, elliptic.P384()), newECKey(t, elliptic.P521())
	edKey := newEd25519Key(t)

	hmacFile := writeKeyFile(t, dir, "secret", []byte(hmacSecret+"\n"))
	pemFile := writeKeyFile(t, dir, "keys.pem", bytes.Join([][]byte{
		pemPublic(t, &rsaKey.PublicKey), pemPublic(t, &p256.PublicKey), pemPublic(t, &p384.PublicKey),
		pemPublic(t, &p521.PublicKey), pemPublic(t, edKey.Public()),
	}, nil))

	for _, c := range []struct {
		cfg    JWTConfig
		method jwt.SigningMethod
		key    any
	}{
		{JWTConfig{HMACSecretFile: hmacFile}, jwt.SigningMethodHS256, []byte(hmacSecret)},
		{JWTConfig{HMACSecretFile: hmacFile}, jwt.SigningMethodHS384, []byte(hmacSecret)},
		{JWTConfig{HMACSecretFile: hmacFile}, jwt.SigningMethodHS512, []byte(hmacSecret)},
		{JWTConfig{PublicKeyFile: pemFile}, jwt.SigningMethodRS256, rsaKey},
		{JWTConfig{PublicKeyFile: pemFile}, jwt.SigningMethodRS384, rsaKey},
		{JWTConfig{PublicKeyFile: pemFile}, jwt.SigningMethodRS512, rsaKey},
		{JWTConfig{PublicKeyFile: pemFile}, jwt.SigningMethodPS256, rsaKey},
		{JWTConfig{PublicKeyFile: pemFile}, jwt.SigningMethodPS512, rsaKey},
		{JWTConfig{PublicKeyFile: pemFile}, jwt.SigningMethodES256, p256},
		{JWTConfig{PublicKeyFile: pemFile}, jwt.SigningMethodES384, p384},
		{JWTConfig{PublicKeyFile: pemFile}, jwt.SigningMethodES512, p521},
		{JWTConfig{PublicKeyFile: pemFile}, jwt.SigningMethodEdDSA, edKey},
	} {
		t.Run(c.method.Alg(), func(t *testing.T) {
			j, _ := openJWT(t, c.cfg)
			id, err := j.Verify(sign(t, c.method, c.key, "", claims()))
			if err != nil {
				t.Fatal(err)
			}
			want := Identity{User: "acme-alice", Expires: jwtNow.Add(time.Hour)}
			if id != want {
				t.Fatalf("identity %+v, want %+v", id, want)
			}
		})
	}
}

// TestJWTShortSecretTakesShortHashesOnly: RFC 7518 wants an HMAC key as
// long as the hash; a 32-byte secret verifies HS256 only.
func TestJWTShortSecretTakesShortHashesOnly(t *testing.T) {
	secret := []byte(hmacSecret[:32])
	j, logs := openJWT(t, JWTConfig{HMACSecretFile: writeKeyFile(t, t.TempDir(), "secret", secret)})
	if _, err := j.Verify(sign(t, jwt.SigningMethodHS256, secret, "", claims())); err != nil {
		t.Fatal(err)
	}
	_, err := j.Verify(sign(t, jwt.SigningMethodHS512, secret, "", claims()))
	wantRefused(t, err, rTokenAlgorithm)
	if !strings.Contains(logs.String(), "algorithms=HS256 ") {
		t.Errorf("the load does not log the algorithms:\n%s", logs)
	}
}

// TestJWTFixtures verifies tokens made by OpenSSL and Python's
// cryptography (testdata/jwt/gen.sh), not by the library under test.
func TestJWTFixtures(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", "jwt", name))
		if err != nil {
			t.Fatal(err)
		}
		return bytes.TrimSpace(b)
	}
	rs256, es256 := read("rs256.jwt"), read("es256.jwt")
	want := Identity{User: "acme-alice", Tenant: "acme", HasTenant: true, Expires: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)}
	base := JWTConfig{Issuer: "https://idp.example", Audience: "shoal", TenantClaim: "tenant"}

	t.Run("jwks", func(t *testing.T) {
		cfg := base
		cfg.JWKSFile = filepath.Join("testdata", "jwt", "jwks.json")
		j, logs := openJWT(t, cfg)
		for _, tok := range [][]byte{rs256, es256} {
			id, err := j.Verify(tok)
			if err != nil {
				t.Fatal(err)
			}
			if !id.Expires.Equal(want.Expires) || id.User != want.User || id.Tenant != want.Tenant || !id.HasTenant {
				t.Fatalf("identity %+v, want %+v", id, want)
			}
		}
		if !strings.Contains(logs.String(), "keys=2 algorithms=ES256,RS256 skipped_encryption_keys=1") {
			t.Errorf("the encryption key is not skipped, or the load not logged:\n%s", logs)
		}
	})
	t.Run("pem", func(t *testing.T) {
		cfg := base
		cfg.PublicKeyFile = filepath.Join("testdata", "jwt", "rsa.pub.pem")
		j, _ := openJWT(t, cfg)
		if _, err := j.Verify(rs256); err != nil {
			t.Fatal(err)
		}
		_, err := j.Verify(es256)
		wantRefused(t, err, rTokenAlgorithm)
	})
	t.Run("certificate", func(t *testing.T) {
		cfg := base
		cfg.PublicKeyFile = filepath.Join("testdata", "jwt", "ec-p256.crt")
		j, _ := openJWT(t, cfg)
		if _, err := j.Verify(es256); err != nil {
			t.Fatal(err)
		}
		_, err := j.Verify(rs256)
		wantRefused(t, err, rTokenAlgorithm)
	})
}

// TestJWTJWKSSelectsKeyByKID: a token's kid picks the one JWKS key it is
// checked with; without a kid every fitting key is tried.
func TestJWTJWKSSelectsKeyByKID(t *testing.T) {
	a, b := newRSAKey(t), newRSAKey(t)
	ec := newECKey(t, elliptic.P256())
	path := writeKeyFile(t, t.TempDir(), "jwks.json", jwksJSON(t,
		jwk(t, "key-a", "", &a.PublicKey), jwk(t, "key-b", "RS256", &b.PublicKey), jwk(t, "key-ec", "", &ec.PublicKey)))
	j, _ := openJWT(t, JWTConfig{JWKSFile: path})

	for _, c := range []struct {
		name   string
		method jwt.SigningMethod
		key    any
		kid    string
		want   reason
	}{
		{"a by its kid", jwt.SigningMethodRS256, a, "key-a", rOK},
		{"b by its kid", jwt.SigningMethodRS256, b, "key-b", rOK},
		{"a, PS256", jwt.SigningMethodPS256, a, "key-a", rOK},
		{"a without kid", jwt.SigningMethodRS256, a, "", rOK},
		{"b without kid", jwt.SigningMethodRS256, b, "", rOK},
		{"ec by its kid", jwt.SigningMethodES256, ec, "key-ec", rOK},
		{"a naming b", jwt.SigningMethodRS256, a, "key-b", rTokenSignature},
		{"b naming a", jwt.SigningMethodRS256, b, "key-a", rTokenSignature},
		{"unknown kid", jwt.SigningMethodRS256, a, "key-c", rTokenKID},
		{"b restricted to RS256", jwt.SigningMethodPS256, b, "key-b", rTokenKeyAlg},
		{"ES256 naming an RSA key", jwt.SigningMethodES256, ec, "key-a", rTokenKeyAlg},
		{"RS256 naming the EC key", jwt.SigningMethodRS256, a, "key-ec", rTokenKeyAlg},
	} {
		t.Run(c.name, func(t *testing.T) {
			id, err := j.Verify(sign(t, c.method, c.key, c.kid, claims()))
			if c.want == rOK {
				if err != nil || id.User != "acme-alice" {
					t.Fatalf("Verify = %+v, %v; want acme-alice", id, err)
				}
				return
			}
			wantRefused(t, err, c.want)
		})
	}
}

// TestJWTTimeClaims: exp is required; exp, nbf and iat are checked with
// the skew, up to its edge and not past it.
func TestJWTTimeClaims(t *testing.T) {
	secret := []byte(hmacSecret)
	path := writeKeyFile(t, t.TempDir(), "secret", secret)
	with := func(set map[string]any, del ...string) jwt.MapClaims {
		c := claims()
		for k, v := range set {
			c[k] = v
		}
		for _, k := range del {
			delete(c, k)
		}
		return c
	}
	at := func(d time.Duration) int64 { return jwtNow.Add(d).Unix() }
	for _, c := range []struct {
		name   string
		skew   time.Duration
		claims jwt.MapClaims
		want   reason
	}{
		{"valid", 0, claims(), rOK},
		{"no iat, no nbf", 0, with(nil, "iat"), rOK},
		{"no exp", 0, with(nil, "exp"), rTokenNoExp},
		{"exp zero", 0, with(map[string]any{"exp": 0}), rTokenNoExp},
		{"exp a string", 0, with(map[string]any{"exp": "tomorrow"}), rTokenClaimType},
		{"exp null", 0, with(map[string]any{"exp": nil}), rTokenClaimType},
		{"nbf a string", 0, with(map[string]any{"nbf": "now"}), rTokenClaimType},
		{"expired", 0, with(map[string]any{"exp": at(-time.Hour)}), rTokenExpired},
		{"expired just past the skew", 0, with(map[string]any{"exp": at(-31 * time.Second), "iat": at(-time.Hour)}), rTokenExpired},
		{"expired at the skew", 0, with(map[string]any{"exp": at(-30 * time.Second), "iat": at(-time.Hour)}), rTokenExpired},
		{"expired within the skew", 0, with(map[string]any{"exp": at(-29 * time.Second), "iat": at(-time.Hour)}), rOK},
		{"nbf at the skew", 0, with(map[string]any{"nbf": at(30 * time.Second)}), rOK},
		{"nbf past the skew", 0, with(map[string]any{"nbf": at(31 * time.Second)}), rTokenNotYet},
		{"iat at the skew", 0, with(map[string]any{"iat": at(30 * time.Second)}), rOK},
		{"iat past the skew", 0, with(map[string]any{"iat": at(31 * time.Second)}), rTokenIssuedLater},
		{"skew 5s: within", 5 * time.Second, with(map[string]any{"exp": at(-4 * time.Second)}), rOK},
		{"skew 5s: past", 5 * time.Second, with(map[string]any{"exp": at(-6 * time.Second)}), rTokenExpired},
		{"skew 5s: nbf past", 5 * time.Second, with(map[string]any{"nbf": at(6 * time.Second)}), rTokenNotYet},
	} {
		t.Run(c.name, func(t *testing.T) {
			j, _ := openJWT(t, JWTConfig{HMACSecretFile: path, Skew: c.skew})
			id, err := j.Verify(sign(t, jwt.SigningMethodHS256, secret, "", c.claims))
			if c.want == rOK {
				if err != nil {
					t.Fatal(err)
				}
				exp, _ := c.claims["exp"].(int64) // every valid case sets an int64
				if want := time.Unix(exp, 0).UTC(); id.Expires != want {
					t.Fatalf("Expires %v, want %v", id.Expires, want)
				}
				return
			}
			wantRefused(t, err, c.want)
		})
	}
}

func TestJWTIssuerAudience(t *testing.T) {
	secret := []byte(hmacSecret)
	cfg := JWTConfig{
		HMACSecretFile: writeKeyFile(t, t.TempDir(), "secret", secret),
		Issuer:         "https://idp.example",
		Audience:       "shoal",
	}
	j, _ := openJWT(t, cfg)
	open, _ := openJWT(t, JWTConfig{HMACSecretFile: cfg.HMACSecretFile})
	for _, c := range []struct {
		name     string
		iss, aud any // nil: absent
		want     reason
	}{
		{"both", "https://idp.example", "shoal", rOK},
		{"audience in a list", "https://idp.example", []string{"other", "shoal"}, rOK},
		{"no issuer", nil, "shoal", rTokenIssuer},
		{"other issuer", "https://evil.example", "shoal", rTokenIssuer},
		{"issuer with a trailing slash", "https://idp.example/", "shoal", rTokenIssuer},
		{"no audience", "https://idp.example", nil, rTokenAudience},
		{"other audience", "https://idp.example", "kafka", rTokenAudience},
		{"other audiences", "https://idp.example", []string{"kafka", "shoal-x"}, rTokenAudience},
		{"issuer a number", 7, "shoal", rTokenClaimType},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := claims()
			if c.iss != nil {
				cl["iss"] = c.iss
			}
			if c.aud != nil {
				cl["aud"] = c.aud
			}
			tok := sign(t, jwt.SigningMethodHS256, secret, "", cl)
			_, err := j.Verify(tok)
			if c.want == rOK {
				if err != nil {
					t.Fatal(err)
				}
			} else {
				wantRefused(t, err, c.want)
			}
			// Without issuer and audience configured, iss and aud of any
			// value (of the right type) are not checked.
			if c.want != rTokenClaimType {
				if _, err := open.Verify(tok); err != nil {
					t.Fatalf("without issuer and audience configured: %v", err)
				}
			}
		})
	}
}

func TestJWTUserClaim(t *testing.T) {
	secret := []byte(hmacSecret)
	path := writeKeyFile(t, t.TempDir(), "secret", secret)
	def, _ := openJWT(t, JWTConfig{HMACSecretFile: path})
	custom, _ := openJWT(t, JWTConfig{HMACSecretFile: path, UserClaim: "username"})
	for _, c := range []struct {
		name string
		j    *JWT
		set  map[string]any
		del  string
		want string // the user, or "" for refused
		why  reason
	}{
		{"sub", def, nil, "", "acme-alice", rOK},
		{"no sub", def, nil, "sub", "", rTokenUser},
		{"empty sub", def, map[string]any{"sub": ""}, "", "", rTokenUser},
		{"numeric sub", def, map[string]any{"sub": 42}, "", "", rTokenUser},
		{"list sub", def, map[string]any{"sub": []string{"acme-alice"}}, "", "", rTokenUser},
		{"NUL in sub", def, map[string]any{"sub": "acme-al\x00ice"}, "", "", rTokenControl},
		{"newline in sub", def, map[string]any{"sub": "acme-alice\nacme-bob"}, "", "", rTokenControl},
		{"custom claim", custom, map[string]any{"username": "acme-bob"}, "", "acme-bob", rOK},
		{"custom claim missing", custom, nil, "", "", rTokenUser},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := claims()
			for k, v := range c.set {
				cl[k] = v
			}
			delete(cl, c.del)
			id, err := c.j.Verify(sign(t, jwt.SigningMethodHS256, secret, "", cl))
			if c.why == rOK {
				if err != nil || id.User != c.want || id.HasTenant {
					t.Fatalf("Verify = %+v, %v; want user %q and no tenant", id, err, c.want)
				}
				return
			}
			wantRefused(t, err, c.why)
		})
	}
}

func TestJWTTenantClaim(t *testing.T) {
	secret := []byte(hmacSecret)
	path := writeKeyFile(t, t.TempDir(), "secret", secret)
	withClaim, _ := openJWT(t, JWTConfig{HMACSecretFile: path, TenantClaim: "tenant"})
	without, _ := openJWT(t, JWTConfig{HMACSecretFile: path})
	token := func(tenant any) []byte {
		cl := claims()
		if tenant != nil {
			cl["tenant"] = tenant
		}
		return sign(t, jwt.SigningMethodHS256, secret, "", cl)
	}

	id, err := withClaim.Verify(token("acme"))
	if err != nil || id != (Identity{User: "acme-alice", Tenant: "acme", HasTenant: true, Expires: jwtNow.Add(time.Hour)}) {
		t.Fatalf("tenant claim present: %+v, %v", id, err)
	}
	for _, v := range []any{nil, "", 7, true, []string{"acme"}, map[string]any{"id": "acme"}} {
		_, err := withClaim.Verify(token(v))
		wantRefused(t, err, rTokenTenant)
	}
	_, err = withClaim.Verify(token("ac\tme"))
	wantRefused(t, err, rTokenControl)

	// Without a tenant claim configured, the token's tenant is ignored:
	// the gateway decides from the user.
	for _, v := range []any{nil, "other", 7} {
		id, err := without.Verify(token(v))
		if err != nil || id.HasTenant || id.Tenant != "" || id.User != "acme-alice" {
			t.Fatalf("no tenant claim configured, token tenant %v: %+v, %v", v, id, err)
		}
	}
}
