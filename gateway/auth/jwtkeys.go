package auth

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"

	"github.com/shoal-mqtt/shoal/internal/watchfile"
)

// Limits on key files.
const (
	maxKeyFileSize = 1 << 20 // a key file is small; a larger one is a mistake
	minHMACSecret  = 32      // RFC 7518 §3.2: a key at least as long as the hash (HS256)
	minRSABits     = 2048    // RFC 7518 §3.3
)

// The key files' configuration keys (under auth.jwt).
const (
	hmacSecretKey = "hmac_secret_file"
	publicKeyKey  = "public_key_file"
	jwksFileKey   = "jwks_file"
)

// Names in token headers and PEM files.
const (
	headerKID       = "kid"
	headerCrit      = "crit"
	pemBegin        = "-----BEGIN "
	pemPublicKey    = "PUBLIC KEY"
	pemRSAPublicKey = "RSA PUBLIC KEY"
	pemCertificate  = "CERTIFICATE"
)

// verifier is one key and the algorithms it may verify.
type verifier struct {
	kid  string // a JWKS key's "kid"; "" for the others
	key  any    // []byte, *rsa.PublicKey, *ecdsa.PublicKey or ed25519.PublicKey
	algs []string
}

// jwtKeys is one loaded version of the key files, immutable once built:
// JWT swaps it whole on reload.
type jwtKeys struct {
	keys    []verifier
	byKID   map[string]*verifier
	algs    []string // every algorithm some key takes, sorted
	skipped int      // JWKS keys for encryption, not signatures
	parser  *jwt.Parser

	// hmacBytes is the length of hmac_secret_file's secret (0: none),
	// logged to compare with the issuer's; hmacSpace says that it ends
	// in white space, which is kept (hmacSecretOf).
	hmacBytes int
	hmacSpace bool
}

// newJWTKeys indexes vs and builds the parser that accepts their
// algorithms and checks the claims cfg asks for.
func newJWTKeys(vs []verifier, skipped int, cfg JWTConfig, clock func() time.Time) (*jwtKeys, error) {
	ks := &jwtKeys{keys: vs, byKID: make(map[string]*verifier), skipped: skipped}
	for i := range ks.keys {
		v := &ks.keys[i]
		if v.kid != "" {
			ks.byKID[v.kid] = v
		}
		for _, a := range v.algs {
			if !slices.Contains(ks.algs, a) {
				ks.algs = append(ks.algs, a)
			}
		}
	}
	if len(ks.algs) == 0 {
		return nil, errors.New("auth.jwt: the key files hold no key that verifies signatures")
	}
	slices.Sort(ks.algs)
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(ks.algs),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(cfg.Skew),
		jwt.WithTimeFunc(clock),
		jwt.WithStrictDecoding(),
	}
	if cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.Issuer))
	}
	if cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(cfg.Audience))
	}
	ks.parser = jwt.NewParser(opts...)
	return ks, nil
}

func (ks *jwtKeys) logAttrs() []any {
	attrs := []any{"keys", len(ks.keys), "algorithms", strings.Join(ks.algs, ","), "skipped_encryption_keys", ks.skipped}
	if ks.hmacBytes > 0 {
		attrs = append(attrs, "hmac_secret_bytes", ks.hmacBytes)
	}
	return attrs
}

// logLoaded logs a load of ks (msg), and warns of an HMAC secret that
// ends in white space: an editor's second line break, or a space, that
// the issuer's secret may not have.
func (ks *jwtKeys) logLoaded(log *slog.Logger, msg string) {
	log.Info(msg, ks.logAttrs()...)
	if ks.hmacSpace {
		log.Warn("jwt hmac secret ends in white space, which is part of it: only one trailing line break is dropped",
			"key", "auth.jwt."+hmacSecretKey, "hmac_secret_bytes", ks.hmacBytes)
	}
}

// keyFor is the parser's key function; the parser has checked that the
// algorithm is one some key takes. A token naming a JWKS key (kid) is
// checked with that key only, which must take the algorithm. Otherwise
// every key that takes the algorithm is tried: the HMAC secret and the PEM
// keys, and the JWKS keys when the token names none (a JWKS key with a kid
// answers only to its kid or to a token without one). A key never meets
// an algorithm of another type, so an HMAC secret cannot verify an RS or
// ES token, nor a public key serve as an HMAC secret.
func (ks *jwtKeys) keyFor(t *jwt.Token) (any, error) {
	if _, ok := t.Header[headerCrit]; ok {
		return nil, refused(rTokenCrit)
	}
	alg := t.Method.Alg()
	var kid string
	kidV, hasKID := t.Header[headerKID]
	if hasKID {
		s, ok := kidV.(string)
		if !ok {
			return nil, refused(rTokenMalformed)
		}
		kid = s
		if v, ok := ks.byKID[kid]; ok {
			if !slices.Contains(v.algs, alg) {
				return nil, refused(rTokenKeyAlg)
			}
			return v.key, nil
		}
	}
	var set jwt.VerificationKeySet
	for i := range ks.keys {
		v := &ks.keys[i]
		if hasKID && v.kid != "" {
			continue
		}
		if slices.Contains(v.algs, alg) {
			set.Keys = append(set.Keys, v.key)
		}
	}
	switch {
	case len(set.Keys) == 1:
		return set.Keys[0], nil
	case len(set.Keys) > 1:
		return set, nil
	case hasKID:
		return nil, refused(rTokenKID)
	}
	return nil, refused(rTokenAlgorithm)
}

// algorithmsFor returns the algorithms key may verify, or why it cannot
// be used.
func algorithmsFor(key any) ([]string, error) {
	switch k := key.(type) {
	case []byte:
		if len(k) < minHMACSecret {
			return nil, fmt.Errorf("HMAC secret of %d bytes, want at least %d", len(k), minHMACSecret)
		}
		algs := []string{"HS256"}
		if len(k) >= 48 {
			algs = append(algs, "HS384")
		}
		if len(k) >= 64 {
			algs = append(algs, "HS512")
		}
		return algs, nil
	case *rsa.PublicKey:
		if k.N.BitLen() < minRSABits {
			return nil, fmt.Errorf("RSA key of %d bits, want at least %d", k.N.BitLen(), minRSABits)
		}
		return []string{"PS256", "PS384", "PS512", "RS256", "RS384", "RS512"}, nil
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return []string{"ES256"}, nil
		case elliptic.P384():
			return []string{"ES384"}, nil
		case elliptic.P521():
			return []string{"ES512"}, nil
		}
		return nil, fmt.Errorf("ECDSA key on curve %s, want P-256, P-384 or P-521", k.Curve.Params().Name)
	case ed25519.PublicKey:
		return []string{"EdDSA"}, nil
	case *rsa.PrivateKey, *ecdsa.PrivateKey, ed25519.PrivateKey, *ecdh.PrivateKey:
		return nil, errors.New("a private key: give the broker the public key only")
	}
	return nil, fmt.Errorf("a %T key cannot verify signatures", key)
}

// readKeyFile reads the file at path, at most maxKeyFileSize bytes, and
// its stamp (zero when it could not be opened), taken before reading, so
// that a change made while it is read is seen by the next poll.
func readKeyFile(path string) ([]byte, watchfile.Stamp, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, watchfile.Stamp{}, err // *fs.PathError: names the path
	}
	defer fh.Close() //nolint:errcheck // a file opened for reading; nothing to do on error
	fi, err := fh.Stat()
	if err != nil {
		return nil, watchfile.Stamp{}, err
	}
	st := watchfile.StampOf(fi)
	data, err := io.ReadAll(io.LimitReader(fh, maxKeyFileSize+1))
	if err != nil {
		return nil, st, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > maxKeyFileSize {
		return nil, st, fmt.Errorf("%s: longer than %d bytes", path, maxKeyFileSize)
	}
	return data, st, nil
}

// load reads and parses every key file. Each error names the file's
// configuration key and path, never key material.
func (j *JWT) load() (*jwtKeys, []watchfile.Stamp, error) {
	st := make([]watchfile.Stamp, len(j.files))
	var (
		vs                 []verifier
		skipped, hmacBytes int
		hmacSpace          bool
		errs               []error
	)
	for i, f := range j.files {
		data, s, err := readKeyFile(f.path)
		st[i] = s
		if err != nil {
			errs = append(errs, fmt.Errorf("auth.jwt.%s: %w", f.key, err))
			continue
		}
		got, n, err := parseKeyFile(f.key, data)
		if err != nil {
			errs = append(errs, fmt.Errorf("auth.jwt.%s: %s: %w", f.key, f.path, err))
			continue
		}
		vs = append(vs, got...)
		skipped += n
		if f.key == hmacSecretKey {
			secret := hmacSecretOf(data)
			hmacBytes = len(secret)
			hmacSpace = len(bytes.TrimRight(secret, " \t\r\n")) < len(secret)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, st, err
	}
	ks, err := newJWTKeys(vs, skipped, j.cfg, j.clock)
	if err != nil {
		return nil, st, err
	}
	ks.hmacBytes, ks.hmacSpace = hmacBytes, hmacSpace
	return ks, st, nil
}

// parseKeyFile parses the contents of the key file of configuration key
// key; skipped counts the JWKS keys meant for encryption.
func parseKeyFile(key string, data []byte) (vs []verifier, skipped int, err error) {
	switch key {
	case hmacSecretKey:
		secret := hmacSecretOf(data)
		algs, err := algorithmsFor(secret)
		if err != nil {
			return nil, 0, err
		}
		return []verifier{{key: secret, algs: algs}}, 0, nil
	case publicKeyKey:
		vs, err := parsePEMKeys(data)
		return vs, 0, err
	case jwksFileKey:
		return parseJWKS(data)
	}
	return nil, 0, fmt.Errorf("unknown key file %s", key)
}

// hmacSecretOf returns the secret of an HMAC secret file: its bytes but
// one trailing line break (\n or \r\n), which editors and echo add and
// an issuer's secret seldom has. Every other byte is the secret's, white
// space and further line breaks too, so that any secret can be written
// (a binary one that ends in \n with one more).
func hmacSecretOf(data []byte) []byte {
	if s, ok := bytes.CutSuffix(data, []byte("\r\n")); ok {
		return s
	}
	s, _ := bytes.CutSuffix(data, []byte("\n"))
	return s
}

// parsePEMKeys parses every PEM block of data: PUBLIC KEY (PKIX), RSA
// PUBLIC KEY (PKCS #1) or CERTIFICATE (its key; the certificate's dates
// and chain are not checked). Text around the blocks is ignored; a
// malformed block, a private key or another block type is an error.
func parsePEMKeys(data []byte) ([]verifier, error) {
	begins := bytes.Count(data, []byte(pemBegin))
	var vs []verifier
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		key, err := pemKey(b)
		if err == nil {
			var algs []string
			if algs, err = algorithmsFor(key); err == nil {
				vs = append(vs, verifier{key: key, algs: algs})
				continue
			}
		}
		return nil, fmt.Errorf("PEM block %d (%s): %w", len(vs)+1, b.Type, err)
	}
	switch {
	case len(vs) == 0:
		return nil, errors.New("no PEM block")
	case len(vs) < begins:
		return nil, fmt.Errorf("%d PEM blocks begin but only %d parse", begins, len(vs))
	}
	return vs, nil
}

func pemKey(b *pem.Block) (any, error) {
	switch b.Type {
	case pemPublicKey:
		return x509.ParsePKIXPublicKey(b.Bytes)
	case pemRSAPublicKey:
		return x509.ParsePKCS1PublicKey(b.Bytes)
	case pemCertificate:
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, err
		}
		return c.PublicKey, nil
	}
	if strings.Contains(b.Type, "PRIVATE KEY") {
		return nil, errors.New("a private key: give the broker the public key only")
	}
	return nil, fmt.Errorf("want %s, %s or %s", pemPublicKey, pemRSAPublicKey, pemCertificate)
}

// parseJWKS parses a JSON Web Key Set (RFC 7517) with keyfunc, from the
// file's bytes only: nothing is fetched (an x5u URL is not followed). Keys
// whose "use" is "enc", or whose "key_ops" lack "verify", are skipped and
// counted. A key's "alg", when set, is the only algorithm it takes and
// must fit its type. Two keys with one "kid", an asymmetric private key,
// or a key that cannot verify signatures make the file an error.
func parseJWKS(data []byte) ([]verifier, int, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, 0, jsonError(err)
	}
	if len(set.Keys) == 0 {
		return nil, 0, errors.New(`no "keys"`)
	}
	kf, err := keyfunc.NewJWKSetJSON(data)
	if err != nil {
		// Name the key that keyfunc refused.
		for i, raw := range set.Keys {
			if _, kerr := jwkset.NewJWKFromRawJSON(raw, jwkset.JWKMarshalOptions{Private: true}, jwkset.JWKValidateOptions{}); kerr != nil {
				return nil, 0, fmt.Errorf("key %d: %w", i, kerr)
			}
		}
		return nil, 0, err
	}
	jwks, err := kf.Storage().KeyReadAll(context.Background())
	if err != nil {
		return nil, 0, err
	}
	var (
		vs      []verifier
		skipped int
		kids    = make(map[string]int)
	)
	for i, k := range jwks {
		m := k.Marshal()
		if err := k.Validate(); err != nil {
			return nil, 0, fmt.Errorf("key %d: %w", i, err)
		}
		if m.KID != "" {
			if first, dup := kids[m.KID]; dup {
				return nil, 0, fmt.Errorf("key %d: kid %q already names key %d", i, m.KID, first)
			}
			kids[m.KID] = i
		}
		if m.USE == jwkset.UseEnc || (len(m.KEYOPS) > 0 && !slices.Contains(m.KEYOPS, jwkset.KeyOpsVerify)) {
			skipped++
			continue
		}
		algs, err := algorithmsFor(k.Key())
		if err != nil {
			return nil, 0, fmt.Errorf("key %d (kid %q): %w", i, m.KID, err)
		}
		if a := m.ALG.String(); a != "" {
			if !slices.Contains(algs, a) {
				return nil, 0, fmt.Errorf("key %d (kid %q): alg %q does not fit the key (it takes %s)", i, m.KID, a, strings.Join(algs, ", "))
			}
			algs = []string{a}
		}
		vs = append(vs, verifier{kid: m.KID, key: k.Key(), algs: algs})
	}
	return vs, skipped, nil
}

// jsonError describes a JSON error by its byte offset, without quoting the
// file (a JWKS may hold a symmetric secret).
func jsonError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Errorf("not JSON: syntax error at byte %d", syn.Offset)
	case errors.As(err, &typ):
		return fmt.Errorf("not a JSON Web Key Set: a value of the wrong type at byte %d", typ.Offset)
	}
	return errors.New("not a JSON Web Key Set")
}
