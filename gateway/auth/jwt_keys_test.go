package auth

import (
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
	"testing/synctest"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/shoal-mqtt/shoal/internal/testutil/testfile"
)

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
// a broken version is logged once and leaves the keys in force. It runs in
// a synctest bubble: the watch's polls, and the waits for what they load,
// are on the bubble's clock.
func TestJWTWatch(t *testing.T) { synctest.Test(t, testJWTWatch) }

func testJWTWatch(t *testing.T) {
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
