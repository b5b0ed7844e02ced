package auth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/shoal-mqtt/shoal/internal/testutil/testlog"
)

// jwtNow is the tests' clock: a whole second, so that claims (whole
// seconds) land exactly on the edges the tests probe.
var jwtNow = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

func fixedClock() time.Time { return jwtNow }

// hmacSecret is a 64-byte test secret (every HS algorithm) made of a
// distinctive text, so that the tests can look for it in errors and logs.
const hmacSecret = "hmac-secret-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGHIJKLMN"

func newRSAKey(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newECKey(t testing.TB, c elliptic.Curve) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(c, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newEd25519Key(t testing.TB) ed25519.PrivateKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// pemPublic returns the PEM "PUBLIC KEY" of pub.
func pemPublic(t testing.TB, pub any) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// writeKeyFile writes data to a new file name in dir and returns its path.
func writeKeyFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// replaceKeyFile replaces path by a rename, as a deployment would.
func replaceKeyFile(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func b64u(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// jwk is one JSON Web Key written by hand (not by the library under
// test): the public part of key, or the secret bytes of an "oct" key.
func jwk(t testing.TB, kid, alg string, key any) map[string]any {
	t.Helper()
	m := map[string]any{}
	switch k := key.(type) {
	case *rsa.PublicKey:
		m["kty"], m["n"], m["e"] = "RSA", b64u(k.N.Bytes()), b64u(big.NewInt(int64(k.E)).Bytes())
	case *ecdsa.PublicKey:
		size := (k.Curve.Params().BitSize + 7) / 8
		raw, err := k.Bytes() // uncompressed point 0x04 || X || Y
		if err != nil {
			t.Fatal(err)
		}
		m["kty"], m["crv"] = "EC", k.Curve.Params().Name
		m["x"], m["y"] = b64u(raw[1:1+size]), b64u(raw[1+size:])
	case ed25519.PublicKey:
		m["kty"], m["crv"], m["x"] = "OKP", "Ed25519", b64u(k)
	case []byte:
		m["kty"], m["k"] = "oct", b64u(k)
	default:
		t.Fatalf("jwk: %T", key)
	}
	if kid != "" {
		m["kid"] = kid
	}
	if alg != "" {
		m["alg"] = alg
	}
	return m
}

func jwksJSON(t testing.TB, keys ...map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// claims returns valid claims for user acme-alice, expiring in an hour.
func claims() jwt.MapClaims {
	return jwt.MapClaims{
		"sub": "acme-alice",
		"iat": jwtNow.Unix(),
		"exp": jwtNow.Add(time.Hour).Unix(),
	}
}

// sign signs c with key by method; kid, when set, goes in the header.
func sign(t testing.TB, method jwt.SigningMethod, key any, kid string, c jwt.MapClaims) []byte {
	t.Helper()
	tok := jwt.NewWithClaims(method, c)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(s)
}

// rawToken assembles a token from a header and claims as given, with sig
// as its signature: for tokens no library would sign.
func rawToken(t testing.TB, header, c map[string]any, sig []byte) []byte {
	t.Helper()
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	p, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(b64u(h) + "." + b64u(p) + "." + b64u(sig))
}

// openJWT opens a verifier on cfg with the fixed clock and a captured log.
func openJWT(t testing.TB, cfg JWTConfig) (*JWT, *testlog.Buffer) {
	t.Helper()
	logs, log := testlog.NewLogger()
	j, err := OpenJWT(cfg, fixedClock, log)
	if err != nil {
		t.Fatalf("OpenJWT: %v", err)
	}
	return j, logs
}

// tokenReasons is every reason a token may be refused for.
var tokenReasons = []reason{
	rTokenTooLong, rTokenMalformed, rTokenAlgorithm, rTokenCrit, rTokenKID, rTokenKeyAlg,
	rTokenSignature, rTokenNoExp, rTokenClaimType, rTokenExpired, rTokenNotYet,
	rTokenIssuedLater, rTokenIssuer, rTokenAudience, rTokenUser, rTokenTenant, rTokenControl,
}

// wantRefused fails unless err is a refusal for why: a bad-credentials
// error whose text is exactly that fixed reason.
func wantRefused(t testing.TB, err error, why reason) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted, want refused: %s", why)
	}
	if !errors.Is(err, ErrBadCredentials) {
		t.Errorf("%v does not wrap ErrBadCredentials", err)
	}
	if want := "verify token: " + string(why); err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
}

// assertNoTokenText fails when text holds a piece (8 characters or more)
// of the token's payload or signature, or of the secrets.
func assertNoTokenText(t testing.TB, text string, token []byte, secrets ...string) {
	t.Helper()
	parts := strings.Split(string(token), ".")
	pieces := append([]string(nil), secrets...)
	for _, p := range parts[1:] {
		pieces = append(pieces, p)
		if d, err := base64.RawURLEncoding.DecodeString(p); err == nil {
			pieces = append(pieces, string(d))
		}
	}
	for _, p := range pieces {
		for i := 0; i+8 <= len(p); i++ {
			if strings.Contains(text, p[i:i+8]) {
				t.Fatalf("%q holds %q, a piece of the token or a secret", text, p[i:i+8])
			}
		}
	}
}
