package auth

import (
	"bytes"
	"context"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/shoal-mqtt/shoal/internal/testutil/testfile"
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

func TestJWTForged(t *testing.T) {
	dir := t.TempDir()
	real, other := newRSAKey(t), newRSAKey(t)
	secret := []byte(hmacSecret)
	j, _ := openJWT(t, JWTConfig{
		HMACSecretFile: writeKeyFile(t, dir, "secret", secret),
		PublicKeyFile:  writeKeyFile(t, dir, "key.pem", pemPublic(t, &real.PublicKey)),
	})

	_, err := j.Verify(sign(t, jwt.SigningMethodRS256, other, "", claims()))
	wantRefused(t, err, rTokenSignature)
	_, err = j.Verify(sign(t, jwt.SigningMethodHS256, []byte(strings.ToUpper(hmacSecret)), "", claims()))
	wantRefused(t, err, rTokenSignature)

	// A valid token whose payload is swapped for another user's.
	good := sign(t, jwt.SigningMethodRS256, real, "", claims())
	if _, err := j.Verify(good); err != nil {
		t.Fatal(err)
	}
	c := claims()
	c["sub"] = "acme-admin"
	evil := sign(t, jwt.SigningMethodRS256, other, "", c)
	gp, ep := bytes.Split(good, []byte(".")), bytes.Split(evil, []byte("."))
	_, err = j.Verify(bytes.Join([][]byte{gp[0], ep[1], gp[2]}, []byte(".")))
	wantRefused(t, err, rTokenSignature)

	// Signature stripped.
	_, err = j.Verify(bytes.Join([][]byte{gp[0], gp[1], nil}, []byte(".")))
	wantRefused(t, err, rTokenSignature)
}

// TestJWTAlgNone: "none" (and any unknown algorithm) is refused whatever
// the keys.
func TestJWTAlgNone(t *testing.T) {
	dir := t.TempDir()
	rsaKey := newRSAKey(t)
	j, _ := openJWT(t, JWTConfig{
		HMACSecretFile: writeKeyFile(t, dir, "secret", []byte(hmacSecret)),
		PublicKeyFile:  writeKeyFile(t, dir, "key.pem", pemPublic(t, &rsaKey.PublicKey)),
	})
	_, err := j.Verify(sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "", claims()))
	wantRefused(t, err, rTokenAlgorithm)
	for _, alg := range []any{"none", "None", "NONE", "HS1", "", nil, 256} {
		h := map[string]any{"typ": "JWT"}
		if alg != nil {
			h["alg"] = alg
		}
		_, err := j.Verify(rawToken(t, h, claims(), nil))
		wantRefused(t, err, rTokenAlgorithm)
	}
}

// TestJWTAlgorithmConfusion: the classic attack signs an HS256 token with
// the server's public key as the HMAC secret. A public key is never an
// HMAC secret here, whatever else is configured.
func TestJWTAlgorithmConfusion(t *testing.T) {
	dir := t.TempDir()
	rsaKey := newRSAKey(t)
	pemBytes := pemPublic(t, &rsaKey.PublicKey)
	der, err := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pemFile := writeKeyFile(t, dir, "key.pem", pemBytes)
	secretFile := writeKeyFile(t, dir, "secret", []byte(hmacSecret))
	forged := func(kid string) [][]byte {
		var toks [][]byte
		for _, k := range [][]byte{pemBytes, bytes.TrimSpace(pemBytes), der} {
			toks = append(toks, sign(t, jwt.SigningMethodHS256, k, kid, claims()))
		}
		return toks
	}

	// Only the public key: HS256 is not an algorithm of this broker.
	j, _ := openJWT(t, JWTConfig{PublicKeyFile: pemFile})
	for _, tok := range forged("") {
		_, err := j.Verify(tok)
		wantRefused(t, err, rTokenAlgorithm)
	}
	// Public key and an HMAC secret: HS256 is accepted, but checked
	// against the secret only.
	j, _ = openJWT(t, JWTConfig{PublicKeyFile: pemFile, HMACSecretFile: secretFile})
	for _, tok := range forged("") {
		_, err := j.Verify(tok)
		wantRefused(t, err, rTokenSignature)
	}
	// The other way: an RS256 token is not checked against the secret
	// (the secret cannot make an RSA signature, so: a bad signature).
	_, err = j.Verify(sign(t, jwt.SigningMethodHS256, []byte(hmacSecret), "", claims()))
	if err != nil {
		t.Fatalf("the real HMAC token: %v", err)
	}
	hs := sign(t, jwt.SigningMethodHS256, []byte(hmacSecret), "", claims())
	parts := bytes.Split(hs, []byte("."))
	rsHeader := []byte(b64u([]byte(`{"alg":"RS256","typ":"JWT"}`)))
	_, err = j.Verify(bytes.Join([][]byte{rsHeader, parts[1], parts[2]}, []byte(".")))
	wantRefused(t, err, rTokenSignature)

	// Only the secret: RS and ES tokens are refused before any key is
	// looked at.
	j, _ = openJWT(t, JWTConfig{HMACSecretFile: secretFile})
	_, err = j.Verify(sign(t, jwt.SigningMethodRS256, rsaKey, "", claims()))
	wantRefused(t, err, rTokenAlgorithm)
	_, err = j.Verify(sign(t, jwt.SigningMethodES256, newECKey(t, elliptic.P256()), "", claims()))
	wantRefused(t, err, rTokenAlgorithm)

	// A JWKS holding an HMAC key and an RSA key: a token naming the RSA
	// key with HS256 (signed with that key's PEM) is refused, and so is an
	// RS256 token naming the HMAC key.
	jwks := writeKeyFile(t, dir, "jwks.json", jwksJSON(t,
		jwk(t, "hmac", "", []byte(hmacSecret)), jwk(t, "rsa", "", &rsaKey.PublicKey)))
	j, _ = openJWT(t, JWTConfig{JWKSFile: jwks})
	for _, tok := range forged("rsa") {
		_, err := j.Verify(tok)
		wantRefused(t, err, rTokenKeyAlg)
	}
	for _, tok := range forged("") {
		_, err := j.Verify(tok)
		wantRefused(t, err, rTokenSignature)
	}
	_, err = j.Verify(sign(t, jwt.SigningMethodRS256, rsaKey, "hmac", claims()))
	wantRefused(t, err, rTokenKeyAlg)
	if _, err := j.Verify(sign(t, jwt.SigningMethodHS256, []byte(hmacSecret), "hmac", claims())); err != nil {
		t.Fatalf("the real HMAC token: %v", err)
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

// TestJWTTokenSize: the bound is exact, and a longer token is refused
// before parsing (so even a well-signed one).
func TestJWTTokenSize(t *testing.T) {
	secret := []byte(hmacSecret)
	j, _ := openJWT(t, JWTConfig{HMACSecretFile: writeKeyFile(t, t.TempDir(), "secret", secret)})
	var fits, over []byte
	// The padding grows a byte at a time from well under the bound.
	for n := MaxTokenSize / 2; over == nil && n < MaxTokenSize; n++ {
		c := claims()
		c["pad"] = strings.Repeat("x", n)
		tok := sign(t, jwt.SigningMethodHS256, secret, "", c)
		switch {
		case len(tok) <= MaxTokenSize:
			fits = tok
		case over == nil:
			over = tok
		}
	}
	if over == nil || len(fits) < MaxTokenSize-4 {
		t.Fatalf("the largest token that fits has %d bytes", len(fits))
	}
	if _, err := j.Verify(fits); err != nil {
		t.Fatalf("a token of %d bytes: %v", len(fits), err)
	}
	_, err := j.Verify(over)
	wantRefused(t, err, rTokenTooLong)
	_, err = j.Verify(bytes.Repeat([]byte("a"), 1<<16))
	wantRefused(t, err, rTokenTooLong)
}

func TestJWTMalformed(t *testing.T) {
	secret := []byte(hmacSecret)
	j, _ := openJWT(t, JWTConfig{HMACSecretFile: writeKeyFile(t, t.TempDir(), "secret", secret)})
	good := sign(t, jwt.SigningMethodHS256, secret, "", claims())
	parts := strings.Split(string(good), ".")
	for _, tok := range []string{
		"",
		"abc",
		parts[0] + "." + parts[1],
		string(good) + ".",
		parts[0] + "." + parts[1] + "." + parts[2] + "=",
		"!!." + parts[1] + "." + parts[2],
		b64u([]byte("not json")) + "." + parts[1] + "." + parts[2],
		parts[0] + "." + b64u([]byte(`["a list"]`)) + "." + parts[2],
		parts[0] + "." + parts[1] + ".***",
	} {
		_, err := j.Verify([]byte(tok))
		wantRefused(t, err, rTokenMalformed)
	}
	// A non-string kid, and a critical extension nobody here understands.
	_, err := j.Verify(rawToken(t, map[string]any{"alg": "HS256", "kid": 7}, claims(), nil))
	wantRefused(t, err, rTokenMalformed)
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims())
	tok.Header["crit"] = []string{"b64"}
	s, err := tok.SignedString(secret)
	if err != nil {
		t.Fatal(err)
	}
	_, err = j.Verify([]byte(s))
	wantRefused(t, err, rTokenCrit)
}

// TestJWTErrorsHoldNoSecret: whatever the reason, the error is one fixed
// text, holding no piece of the token's payload or signature, nor of the
// secret; neither do the logs.
func TestJWTErrorsHoldNoSecret(t *testing.T) {
	dir := t.TempDir()
	secret := []byte(hmacSecret)
	rsaKey := newRSAKey(t)
	cfg := JWTConfig{
		HMACSecretFile: writeKeyFile(t, dir, "secret", secret),
		PublicKeyFile:  writeKeyFile(t, dir, "key.pem", pemPublic(t, &rsaKey.PublicKey)),
		Issuer:         "https://idp.example",
		TenantClaim:    "tenant",
	}
	j, logs := openJWT(t, cfg)
	marked := func(set map[string]any) jwt.MapClaims {
		c := claims()
		c["iss"], c["tenant"], c["secret-marker"] = "https://idp.example", "acme", "do-not-show-this-claim"
		for k, v := range set {
			c[k] = v
		}
		return c
	}
	toks := [][]byte{
		sign(t, jwt.SigningMethodHS256, []byte("another-secret-of-at-least-32-bytes!"), "", marked(nil)),
		sign(t, jwt.SigningMethodRS256, newRSAKey(t), "", marked(nil)),
		sign(t, jwt.SigningMethodHS256, secret, "", marked(map[string]any{"exp": jwtNow.Add(-time.Hour).Unix()})),
		sign(t, jwt.SigningMethodHS256, secret, "", marked(map[string]any{"iss": "https://evil.example"})),
		sign(t, jwt.SigningMethodHS256, secret, "", marked(map[string]any{"sub": 12345678})),
		sign(t, jwt.SigningMethodHS256, secret, "", marked(map[string]any{"tenant": 12345678})),
		sign(t, jwt.SigningMethodHS256, secret, "", marked(map[string]any{"exp": "do-not-show-this-exp"})),
		sign(t, jwt.SigningMethodHS256, secret, "", marked(map[string]any{"sub": "do-not\x00show"})),
		sign(t, jwt.SigningMethodHS512, []byte(strings.ToUpper(hmacSecret)), "key-do-not-show", marked(nil)),
		rawToken(t, map[string]any{"alg": "do-not-show-this-alg"}, marked(nil), []byte("signature-do-not-show")),
		rawToken(t, map[string]any{"alg": "none"}, marked(nil), []byte("signature-do-not-show")),
		[]byte("do-not-show." + b64u([]byte("{not json, do-not-show}")) + ".c2lnbmF0dXJlLWRvLW5vdC1zaG93"),
	}
	seen := map[string]bool{}
	for i, tok := range toks {
		_, err := j.Verify(tok)
		if err == nil {
			t.Fatalf("token %d accepted", i)
		}
		known := false
		for _, r := range tokenReasons {
			known = known || err.Error() == "verify token: "+string(r)
		}
		if !known {
			t.Fatalf("token %d: %q is not one of the fixed reasons", i, err)
		}
		seen[err.Error()] = true
		assertNoTokenText(t, err.Error(), tok, hmacSecret, "do-not-show")
		assertNoTokenText(t, logs.String(), tok, hmacSecret, "do-not-show")
	}
	if len(seen) < 8 {
		t.Errorf("the tokens met only %d reasons, the test means to cover more: %v", len(seen), seen)
	}
}

func TestJWTConfigValidate(t *testing.T) {
	if (JWTConfig{Issuer: "x"}).Configured() || !(JWTConfig{JWKSFile: "x"}).Configured() {
		t.Fatal("Configured does not follow the key files")
	}
	if err := (JWTConfig{}).Validate(); err != nil {
		t.Fatalf("the zero config (JWT off): %v", err)
	}
	for _, c := range []struct {
		cfg  JWTConfig
		want []string // each must appear; nil: valid
	}{
		{JWTConfig{HMACSecretFile: "s"}, nil},
		{JWTConfig{PublicKeyFile: "p", Skew: MaxJWTSkew, UserClaim: "email", TenantClaim: "org"}, nil},
		{JWTConfig{Issuer: "i", Audience: "a", Skew: time.Second}, []string{"auth.jwt.issuer: set, but no key file", "auth.jwt.audience:", "auth.jwt.skew:"}},
		{JWTConfig{TenantClaim: "org"}, []string{"auth.jwt.tenant_claim: set, but no key file"}},
		{JWTConfig{JWKSFile: "j", Skew: -time.Second}, []string{"auth.jwt.skew: must be from 0"}},
		{JWTConfig{JWKSFile: "j", Skew: MaxJWTSkew + 1}, []string{"auth.jwt.skew:"}},
		{JWTConfig{JWKSFile: "j", UserClaim: " sub"}, []string{"auth.jwt.user_claim:"}},
		{JWTConfig{JWKSFile: "j", TenantClaim: "org\n"}, []string{"auth.jwt.tenant_claim:"}},
	} {
		err := c.cfg.Validate()
		if c.want == nil {
			if err != nil {
				t.Errorf("%+v: %v", c.cfg, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%+v: valid, want %q", c.cfg, c.want)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: %q does not say %q", c.cfg, err, w)
			}
		}
	}
	if _, err := OpenJWT(JWTConfig{}, nil, nil); err == nil || !strings.Contains(err.Error(), "auth.jwt: no key file") {
		t.Errorf("OpenJWT without a key file: %v", err)
	}
	if _, err := OpenJWT(JWTConfig{HMACSecretFile: "s", Skew: time.Hour}, nil, nil); err == nil || !strings.Contains(err.Error(), "auth.jwt.skew") {
		t.Errorf("OpenJWT with a bad skew: %v", err)
	}
}

// TestOpenJWTKeyFileErrors: a key file that cannot serve is refused, the
// error naming the configuration key and what is wrong, never the secret.
func TestOpenJWTKeyFileErrors(t *testing.T) {
	dir := t.TempDir()
	rsaKey := newRSAKey(t)
	ecKey := newECKey(t, elliptic.P256())
	privDER, err := x509.MarshalPKCS8PrivateKey(ecKey)
	if err != nil {
		t.Fatal(err)
	}
	small, err := rsa.GenerateKey(rand.Reader, 1024) // the smallest Go makes
	if err != nil {
		t.Fatal(err)
	}
	smallRSA := pemPublic(t, &small.PublicKey)
	p224, err := x509.MarshalPKIXPublicKey(&newECKey(t, elliptic.P224()).PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	goodPEM := pemPublic(t, &rsaKey.PublicKey)
	privJWK := jwk(t, "priv", "", &ecKey.PublicKey)
	d, err := ecKey.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	privJWK["d"] = b64u(d)
	encOnly := jwk(t, "enc", "", &rsaKey.PublicKey)
	encOnly["use"] = "enc"
	for _, c := range []struct {
		name string
		key  string // the JWTConfig field's key
		data []byte
		want string
	}{
		{"missing", "hmac_secret_file", nil, "no such file"},
		{"short secret", "hmac_secret_file", []byte("short-secret\n"), "HMAC secret of 12 bytes, want at least 32"},
		{"secret of a line break", "hmac_secret_file", []byte("\r\n"), "HMAC secret of 0 bytes"},
		{"empty PEM", "public_key_file", []byte{}, "no PEM block"},
		{"not PEM", "public_key_file", []byte("hello"), "no PEM block"},
		{"private key", "public_key_file", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER}), "a private key"},
		{"EC private key", "public_key_file", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: privDER}), "a private key"},
		{"RSA 1024", "public_key_file", smallRSA, "RSA key of 1024 bits, want at least 2048"},
		{"P-224", "public_key_file", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: p224}), "curve P-224"},
		{"other block", "public_key_file", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: []byte{1}}), "want PUBLIC KEY, RSA PUBLIC KEY or CERTIFICATE"},
		{"bad DER", "public_key_file", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte{1, 2}}), "PEM block 1 (PUBLIC KEY)"},
		{"second block broken", "public_key_file", append(append([]byte{}, goodPEM...), "-----BEGIN PUBLIC KEY-----\n!!!\n"...), "2 PEM blocks begin but only 1 parse"},
		{"JWKS not JSON", "jwks_file", []byte(`{"keys": [` + hmacSecret), "syntax error at byte"},
		{"JWKS a list", "jwks_file", []byte(`[1]`), "wrong type at byte"},
		{"JWKS no keys", "jwks_file", []byte(`{"keys": []}`), `no "keys"`},
		{"JWKS bad key", "jwks_file", jwksJSON(t, jwk(t, "a", "", &rsaKey.PublicKey), map[string]any{"kty": "RSA", "kid": "b"}), "key 1:"},
		{"JWKS unknown kty", "jwks_file", jwksJSON(t, map[string]any{"kty": "XYZ"}), "key 0:"},
		{"JWKS duplicate kid", "jwks_file", jwksJSON(t, jwk(t, "a", "", &rsaKey.PublicKey), jwk(t, "a", "", &ecKey.PublicKey)), `key 1: kid "a" already names key 0`},
		{"JWKS alg misfit", "jwks_file", jwksJSON(t, jwk(t, "a", "ES256", &rsaKey.PublicKey)), `alg "ES256" does not fit the key`},
		{"JWKS private key", "jwks_file", jwksJSON(t, privJWK), "a private key"},
		{"JWKS short oct", "jwks_file", jwksJSON(t, jwk(t, "h", "", []byte("0123456789"))), "HMAC secret of 10 bytes"},
		{"JWKS encryption only", "jwks_file", jwksJSON(t, encOnly), "no key that verifies signatures"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-"))
			if c.data != nil {
				writeKeyFile(t, dir, filepath.Base(path), c.data)
			}
			var cfg JWTConfig
			switch c.key {
			case "hmac_secret_file":
				cfg.HMACSecretFile = path
			case "public_key_file":
				cfg.PublicKeyFile = path
			case "jwks_file":
				cfg.JWKSFile = path
			}
			_, err := OpenJWT(cfg, fixedClock, nil)
			if err == nil {
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("%q does not say %q", err, c.want)
			}
			if c.want != "no key that verifies signatures" && !strings.HasPrefix(err.Error(), "auth.jwt."+c.key+": ") {
				t.Errorf("%q does not name auth.jwt.%s", err, c.key)
			}
			if strings.Contains(err.Error(), hmacSecret[:12]) {
				t.Errorf("%q holds the secret", err)
			}
		})
	}

	// Every file is checked, and each error named.
	_, err = OpenJWT(JWTConfig{HMACSecretFile: filepath.Join(dir, "none1"), JWKSFile: filepath.Join(dir, "none2")}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "auth.jwt.hmac_secret_file:") || !strings.Contains(err.Error(), "auth.jwt.jwks_file:") || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("two missing files: %v", err)
	}
}

// TestJWTReload: a reload to a new key refuses the old key's tokens and
// accepts the new one's; a broken file keeps the keys in force.
func TestJWTReload(t *testing.T) {
	path := writeKeyFile(t, t.TempDir(), "secret", []byte(hmacSecret))
	j, logs := openJWT(t, JWTConfig{HMACSecretFile: path})
	oldSecret, newSecret := []byte(hmacSecret), []byte(strings.ToUpper(hmacSecret))
	oldTok, newTok := sign(t, jwt.SigningMethodHS256, oldSecret, "", claims()), sign(t, jwt.SigningMethodHS256, newSecret, "", claims())
	if _, err := j.Verify(oldTok); err != nil {
		t.Fatal(err)
	}

	replaceKeyFile(t, path, newSecret)
	if err := j.Reload(); err != nil {
		t.Fatal(err)
	}
	_, err := j.Verify(oldTok)
	wantRefused(t, err, rTokenSignature)
	if _, err := j.Verify(newTok); err != nil {
		t.Fatalf("the new key's token: %v", err)
	}

	replaceKeyFile(t, path, []byte("too-short"))
	if err := j.Reload(); err == nil || !strings.Contains(err.Error(), "HMAC secret of 9 bytes") {
		t.Fatalf("Reload of a short secret: %v", err)
	}
	if _, err := j.Verify(newTok); err != nil {
		t.Fatalf("a broken file replaced the key in force: %v", err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := j.Reload(); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Reload of a missing file: %v", err)
	}
	if _, err := j.Verify(newTok); err != nil {
		t.Fatalf("a missing file dropped the key in force: %v", err)
	}
	l := logs.String()
	if !strings.Contains(l, "jwt keys reloaded") || strings.Count(l, "jwt keys not reloaded") != 2 {
		t.Errorf("the reloads are not logged:\n%s", l)
	}
	assertNoTokenText(t, l, newTok, hmacSecret, string(newSecret), "too-short")
}

// TestJWTWatch: a JWKS file replaced on disk is picked up by the watch;
// a broken version is logged once and leaves the keys in force.
func TestJWTWatch(t *testing.T) {
	a, b := newECKey(t, elliptic.P256()), newECKey(t, elliptic.P256())
	path := writeKeyFile(t, t.TempDir(), "jwks.json", jwksJSON(t, jwk(t, "a", "", &a.PublicKey)))
	j, logs := openJWT(t, JWTConfig{JWKSFile: path})
	tokA, tokB := sign(t, jwt.SigningMethodES256, a, "a", claims()), sign(t, jwt.SigningMethodES256, b, "b", claims())
	ok := func(tok []byte) bool { _, err := j.Verify(tok); return err == nil }

	testfile.Watch(t, func(ctx context.Context) { j.Watch(ctx, 5*time.Millisecond) })

	replaceKeyFile(t, path, []byte(`{"keys": [`))
	testfile.WaitFor(t, "the broken file's error in the log", func() bool {
		return strings.Contains(logs.String(), "syntax error at byte")
	})
	if !ok(tokA) || ok(tokB) {
		t.Fatal("the broken file replaced the keys in force")
	}

	replaceKeyFile(t, path, jwksJSON(t, jwk(t, "b", "", &b.PublicKey)))
	testfile.WaitFor(t, "the new key in force", func() bool { return ok(tokB) })
	if ok(tokA) {
		t.Fatal("the old key's token is still accepted")
	}

	// A rewrite in place (same inode) is seen too.
	if err := os.WriteFile(path, jwksJSON(t, jwk(t, "a", "", &a.PublicKey), jwk(t, "b", "", &b.PublicKey)), 0o600); err != nil {
		t.Fatal(err)
	}
	testfile.WaitFor(t, "the rewritten file in force", func() bool { return ok(tokA) && ok(tokB) })
}

// TestJWTPollReadsEachVersionOnce drives the watch's poll by hand.
func TestJWTPollReadsEachVersionOnce(t *testing.T) {
	dir := t.TempDir()
	secret := writeKeyFile(t, dir, "secret", []byte(hmacSecret))
	ec := newECKey(t, elliptic.P256())
	pemFile := writeKeyFile(t, dir, "key.pem", pemPublic(t, &ec.PublicKey))
	j, logs := openJWT(t, JWTConfig{HMACSecretFile: secret, PublicKeyFile: pemFile})
	j.poll()
	if strings.Contains(logs.String(), "reloaded") {
		t.Fatalf("unchanged files were reloaded:\n%s", logs)
	}

	replaceKeyFile(t, pemFile, []byte("garbage"))
	for range 3 {
		j.poll()
	}
	if n := strings.Count(logs.String(), "no PEM block"); n != 1 {
		t.Fatalf("a broken version was logged %d times, want once:\n%s", n, logs)
	}
	if err := os.Remove(secret); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		j.poll()
	}
	if n := strings.Count(logs.String(), "jwt key file unreadable"); n != 1 {
		t.Fatalf("a missing file was logged %d times, want once:\n%s", n, logs)
	}
	esTok := sign(t, jwt.SigningMethodES256, ec, "", claims())
	if _, err := j.Verify(esTok); err != nil {
		t.Fatalf("the keys in force were dropped: %v", err)
	}

	// Both files back, the PEM one with another key: loaded at once.
	other := newECKey(t, elliptic.P256())
	writeKeyFile(t, dir, "secret", []byte(hmacSecret))
	replaceKeyFile(t, pemFile, pemPublic(t, &other.PublicKey))
	j.poll()
	if _, err := j.Verify(sign(t, jwt.SigningMethodES256, other, "", claims())); err != nil {
		t.Fatalf("the restored files were not loaded: %v\n%s", err, logs)
	}
	_, err := j.Verify(esTok)
	wantRefused(t, err, rTokenSignature)
}

// TestJWTConcurrentVerifyAndReload runs verifications while the keys are
// swapped (run it with -race): a key in every version always verifies.
func TestJWTConcurrentVerifyAndReload(t *testing.T) {
	a, b := newECKey(t, elliptic.P256()), newECKey(t, elliptic.P256())
	v1 := jwksJSON(t, jwk(t, "a", "", &a.PublicKey))
	v2 := jwksJSON(t, jwk(t, "a", "", &a.PublicKey), jwk(t, "b", "", &b.PublicKey))
	path := writeKeyFile(t, t.TempDir(), "jwks.json", v1)
	j, _ := openJWT(t, JWTConfig{JWKSFile: path})
	tokA := sign(t, jwt.SigningMethodES256, a, "a", claims())

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				if _, err := j.Verify(tokA); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for i := range 50 {
		replaceKeyFile(t, path, [][]byte{v1, v2}[i%2])
		if err := j.Reload(); err != nil {
			t.Error(err)
		}
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a token of a key in every version was refused during reloads: %v", err)
	}
}
