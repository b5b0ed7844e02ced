package auth

import (
	"bytes"
	"crypto/elliptic"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

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
