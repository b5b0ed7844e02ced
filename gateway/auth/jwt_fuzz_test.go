package auth

import (
	"bytes"
	"crypto/elliptic"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// FuzzVerify: no input panics; a refusal is exactly one of the fixed
// reasons (so it cannot echo the input); an acceptance proves a clean,
// non-empty user and an expiry not yet past. The seeds are valid tokens of
// every key kind, the fixtures, and broken variants of them.
func FuzzVerify(f *testing.F) {
	dir := f.TempDir()
	rsaKey := newRSAKey(f)
	ec := newECKey(f, elliptic.P256())
	j, _ := openJWT(f, JWTConfig{
		HMACSecretFile: writeKeyFile(f, dir, "secret", []byte(hmacSecret)),
		PublicKeyFile:  writeKeyFile(f, dir, "key.pem", pemPublic(f, &rsaKey.PublicKey)),
		JWKSFile:       writeKeyFile(f, dir, "jwks.json", jwksJSON(f, jwk(f, "ec", "", &ec.PublicKey))),
		TenantClaim:    "tenant",
	})

	c := claims()
	c["tenant"] = "acme"
	seeds := [][]byte{
		sign(f, jwt.SigningMethodHS256, []byte(hmacSecret), "", c),
		sign(f, jwt.SigningMethodHS512, []byte(hmacSecret), "x", c),
		sign(f, jwt.SigningMethodRS256, rsaKey, "", c),
		sign(f, jwt.SigningMethodPS384, rsaKey, "", c),
		sign(f, jwt.SigningMethodES256, ec, "ec", c),
		sign(f, jwt.SigningMethodES256, ec, "", c),
		sign(f, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "", c),
		[]byte(""), []byte(".."), []byte("a.b.c"),
	}
	for _, name := range []string{"rs256.jwt", "es256.jwt"} {
		if b, err := os.ReadFile(filepath.Join("testdata", "jwt", name)); err == nil {
			seeds = append(seeds, bytes.TrimSpace(b))
		}
	}
	for _, s := range seeds {
		f.Add(s)
		if i := bytes.LastIndexByte(s, '.'); i > 0 {
			f.Add(s[:i+1])                                      // signature dropped
			f.Add(append(bytes.Clone(s[:i]), ".AAAA"...))       // another signature
			f.Add(bytes.Replace(s, []byte("."), []byte(""), 1)) // a segment lost
		}
	}

	f.Fuzz(func(t *testing.T, token []byte) {
		id, err := j.Verify(token)
		if err != nil {
			if !errors.Is(err, ErrBadCredentials) {
				t.Fatalf("%v does not wrap ErrBadCredentials", err)
			}
			for _, r := range tokenReasons {
				if err.Error() == "verify token: "+string(r) {
					return
				}
			}
			t.Fatalf("%q is not one of the fixed reasons", err)
		}
		if id.User == "" || strings.ContainsFunc(id.User+id.Tenant, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			t.Fatalf("accepted with user %q, tenant %q", id.User, id.Tenant)
		}
		if !id.HasTenant || id.Tenant == "" {
			t.Fatalf("accepted without the tenant claim: %+v", id)
		}
		if !id.Expires.After(jwtNow.Add(-DefaultJWTSkew)) {
			t.Fatalf("accepted a token that expired at %v", id.Expires)
		}
		if len(token) > MaxTokenSize {
			t.Fatalf("accepted a token of %d bytes", len(token))
		}
	})
}
