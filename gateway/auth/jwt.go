package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/golang-jwt/jwt/v5"

	"github.com/shoal-mqtt/shoal/internal/watchfile"
)

// Limits and defaults of JWT authentication.
const (
	// MaxTokenSize bounds a token: a longer password is refused before it
	// is parsed.
	MaxTokenSize = 8 << 10
	// DefaultJWTSkew is JWTConfig.Skew's default.
	DefaultJWTSkew = 30 * time.Second
	// MaxJWTSkew bounds JWTConfig.Skew.
	MaxJWTSkew = 5 * time.Minute
	// DefaultUserClaim is JWTConfig.UserClaim's default.
	DefaultUserClaim = "sub"
)

// JWTConfig configures JWT authentication: the CONNECT password carries a
// signed token. At least one key file makes it configured.
type JWTConfig struct {
	// HMACSecretFile holds an HMAC secret (HS256, HS384, HS512), at least
	// 32 bytes: the file's bytes but one trailing line break (\n or \r\n,
	// as editors add), dropped; white space before it is the secret's, and
	// the load warns of it.
	HMACSecretFile string `yaml:"hmac_secret_file"`
	// PublicKeyFile holds PEM public keys or certificates: RSA (RS256,
	// RS384, RS512, PS256, PS384, PS512), ECDSA (ES256, ES384, ES512 by
	// curve) or Ed25519 (EdDSA).
	PublicKeyFile string `yaml:"public_key_file"`
	// JWKSFile holds a JSON Web Key Set; a token's "kid" selects the key.
	JWKSFile string `yaml:"jwks_file"`
	// Issuer, when set, must be the token's "iss".
	Issuer string `yaml:"issuer"`
	// Audience, when set, must be one of the token's "aud".
	Audience string `yaml:"audience"`
	// Skew is the leeway on exp, nbf and iat: 0 means DefaultJWTSkew, at
	// most MaxJWTSkew.
	Skew time.Duration `yaml:"skew"`
	// UserClaim names the claim that is the user (DefaultUserClaim when
	// empty): a non-empty string.
	UserClaim string `yaml:"user_claim"`
	// TenantClaim, when set, names the claim that is the tenant (a
	// non-empty string the token must have); when empty the token says
	// nothing about the tenant, and the gateway takes it from the user.
	TenantClaim string `yaml:"tenant_claim"`
}

// jwtFile is one configured key file: its configuration key and path.
type jwtFile struct {
	key, path string
}

// files returns the configured key files, always in the same order.
func (c JWTConfig) files() []jwtFile {
	var fs []jwtFile
	for _, f := range []jwtFile{
		{hmacSecretKey, c.HMACSecretFile},
		{publicKeyKey, c.PublicKeyFile},
		{jwksFileKey, c.JWKSFile},
	} {
		if f.path != "" {
			fs = append(fs, f)
		}
	}
	return fs
}

// Configured reports whether JWT authentication is on: a key file is set.
func (c JWTConfig) Configured() bool { return len(c.files()) > 0 }

// Validate checks the settings, not the files (OpenJWT reads them), and
// returns one error per bad key, each naming it as auth.jwt.<key>.
func (c JWTConfig) Validate() error {
	if !c.Configured() {
		var errs []error
		for _, s := range []struct{ key, val string }{
			{"issuer", c.Issuer}, {"audience", c.Audience},
			{"user_claim", c.UserClaim}, {"tenant_claim", c.TenantClaim},
		} {
			if s.val != "" {
				errs = append(errs, fmt.Errorf("auth.jwt.%s: set, but no key file is (auth.jwt.hmac_secret_file, public_key_file or jwks_file)", s.key))
			}
		}
		if c.Skew != 0 {
			errs = append(errs, errors.New("auth.jwt.skew: set, but no key file is (auth.jwt.hmac_secret_file, public_key_file or jwks_file)"))
		}
		return errors.Join(errs...)
	}
	var errs []error
	if c.Skew < 0 || c.Skew > MaxJWTSkew {
		errs = append(errs, fmt.Errorf("auth.jwt.skew: must be from 0 (the default, %s) to %s, is %s", DefaultJWTSkew, MaxJWTSkew, c.Skew))
	}
	for _, s := range []struct{ key, val string }{{"user_claim", c.UserClaim}, {"tenant_claim", c.TenantClaim}} {
		if s.val != "" && strings.TrimSpace(s.val) != s.val {
			errs = append(errs, fmt.Errorf("auth.jwt.%s: %q starts or ends with a blank", s.key, s.val))
		}
	}
	return errors.Join(errs...)
}

// withDefaults returns c with its zero values replaced by the defaults.
func (c JWTConfig) withDefaults() JWTConfig {
	if c.Skew == 0 {
		c.Skew = DefaultJWTSkew
	}
	if c.UserClaim == "" {
		c.UserClaim = DefaultUserClaim
	}
	return c
}

// Identity is what a verified token proves.
type Identity struct {
	User string
	// Tenant is the tenant claim's value; HasTenant says whether there was
	// one to read (JWTConfig.TenantClaim is set). Without it the gateway
	// decides the tenant from User.
	Tenant    string
	HasTenant bool
	// Expires is the token's "exp", in UTC (never zero: exp is
	// required): the session can be cut off then.
	Expires time.Time
}

// JWT verifies tokens against the keys of its key files and reloads them:
// Reload (on SIGHUP), and Watch, which polls the files. A version of the
// files that fails to load keeps the previous keys in force. Safe for
// concurrent use.
type JWT struct {
	cfg   JWTConfig // with defaults
	files []jwtFile
	clock func() time.Time
	log   *slog.Logger
	keys  atomic.Pointer[jwtKeys]

	mu         sync.Mutex        // serialises loads; guards the fields below
	seen       []watchfile.Stamp // per file, the version last read, whether it loaded or not
	statFailed bool              // the last poll could not stat a file (logged once)
}

// OpenJWT checks cfg and loads its key files; this first load must
// succeed. clock is time.Now when nil; log receives reloads and their
// errors (nil: discarded).
func OpenJWT(cfg JWTConfig, clock func() time.Time, log *slog.Logger) (*JWT, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.Configured() {
		return nil, errors.New("auth.jwt: no key file (hmac_secret_file, public_key_file or jwks_file)")
	}
	if clock == nil {
		clock = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	j := &JWT{cfg: cfg.withDefaults(), files: cfg.files(), clock: clock, log: log}
	ks, st, err := j.load()
	if err != nil {
		return nil, err
	}
	j.keys.Store(ks)
	j.seen = st
	ks.logLoaded(log, "jwt keys loaded")
	return j, nil
}

// Verify checks token (the CONNECT password) and returns the identity it
// proves. An error wraps ErrBadCredentials and says why in a fixed text
// that never holds any part of the token or of a key.
func (j *JWT) Verify(token []byte) (Identity, error) {
	if len(token) > MaxTokenSize {
		return Identity{}, refused(rTokenTooLong)
	}
	ks := j.keys.Load()
	claims := jwt.MapClaims{}
	tok, err := ks.parser.ParseWithClaims(string(token), claims, ks.keyFor)
	if err != nil {
		return Identity{}, refused(j.why(ks, tok, claims, err))
	}
	user, ok := claimString(claims, j.cfg.UserClaim)
	if !ok {
		return Identity{}, refused(rTokenUser)
	}
	id := Identity{User: user}
	if j.cfg.TenantClaim != "" {
		if id.Tenant, ok = claimString(claims, j.cfg.TenantClaim); !ok {
			return Identity{}, refused(rTokenTenant)
		}
		id.HasTenant = true
	}
	if hasControl(id.User) || hasControl(id.Tenant) {
		return Identity{}, refused(rTokenControl)
	}
	exp, err := claims.GetExpirationTime()
	if err != nil || exp == nil { // the parser requires exp; checked again rather than trusted
		return Identity{}, refused(rTokenNoExp)
	}
	id.Expires = exp.UTC()
	return id, nil
}

// claimString returns claim name of claims when it is a non-empty string.
func claimString(claims jwt.MapClaims, name string) (string, bool) {
	s, ok := claims[name].(string)
	return s, ok && s != ""
}

// hasControl reports whether s holds a control character (U+0000 to
// U+001F, U+007F to U+009F), which the MQTT specification says a string
// should not and a log line should not.
func hasControl(s string) bool { return strings.ContainsFunc(s, unicode.IsControl) }

// why turns the parser's error into a fixed reason. The parser checks in
// this order: shape and encoding, algorithm, key, signature, claims; so a
// claim is judged only once the signature holds.
func (j *JWT) why(ks *jwtKeys, tok *jwt.Token, claims jwt.MapClaims, err error) reason {
	var te *tokenError
	if errors.As(err, &te) { // from keyFor
		return te.why
	}
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return rTokenMalformed
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		// The parser says the same for an algorithm outside the list.
		if tok == nil || tok.Method == nil || !slices.Contains(ks.algs, tok.Method.Alg()) {
			return rTokenAlgorithm
		}
		return rTokenSignature
	case errors.Is(err, jwt.ErrTokenUnverifiable): // no alg, or one the library does not know
		return rTokenAlgorithm
	case errors.Is(err, jwt.ErrTokenInvalidClaims):
		return j.claimsWhy(claims, err)
	}
	return rTokenMalformed
}

// claimsWhy is the reason a signed token's claims were refused, the most
// telling first when several fail.
func (j *JWT) claimsWhy(claims jwt.MapClaims, err error) reason {
	exp, expErr := claims.GetExpirationTime()
	switch {
	case expErr == nil && exp == nil:
		return rTokenNoExp
	case errors.Is(err, jwt.ErrInvalidType):
		return rTokenClaimType
	case errors.Is(err, jwt.ErrTokenExpired):
		return rTokenExpired
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return rTokenNotYet
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return rTokenIssuedLater
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return rTokenIssuer
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return rTokenAudience
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		if iss, _ := claims.GetIssuer(); j.cfg.Issuer != "" && iss == "" {
			return rTokenIssuer
		}
		return rTokenAudience
	}
	return rTokenClaimType
}

// Reload reads the key files again. When one cannot be read or holds no
// usable key, the previous keys stay in force; the error is logged here as
// well as returned, so a caller may drop it.
func (j *JWT) Reload() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.reloadLocked()
}

func (j *JWT) reloadLocked() error {
	ks, st, err := j.load()
	for i, s := range st {
		if s != (watchfile.Stamp{}) {
			j.seen[i] = s
		}
	}
	if err != nil {
		j.log.Error("jwt keys not reloaded, the previous ones stay in force", "err", err)
		return err
	}
	j.keys.Store(ks)
	ks.logLoaded(j.log, "jwt keys reloaded")
	return nil
}

// Watch polls the key files every interval (a second when interval ≤ 0)
// and reloads them when one's size, modification time or inode changed.
// Each version is read once: a broken file is logged once, not every
// interval. It returns when ctx ends.
func (j *JWT) Watch(ctx context.Context, interval time.Duration) {
	watchfile.Every(ctx, interval, j.poll)
}

func (j *JWT) poll() {
	st := make([]watchfile.Stamp, len(j.files))
	var statErr error
	for i, f := range j.files {
		fi, err := os.Stat(f.path)
		if err != nil {
			statErr = fmt.Errorf("auth.jwt.%s: %w", f.key, err)
			break
		}
		st[i] = watchfile.StampOf(fi)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if statErr != nil {
		if !j.statFailed {
			j.statFailed = true
			j.log.Warn("jwt key file unreadable, the previous keys stay in force", "err", statErr)
		}
		return
	}
	j.statFailed = false
	if !slices.Equal(st, j.seen) {
		copy(j.seen, st)
		_ = j.reloadLocked() // logged there
	}
}

// tokenError is why a token was refused: always one of the rToken
// reasons, never text from the token. It wraps ErrBadCredentials.
type tokenError struct{ why reason }

func refused(why reason) error { return &tokenError{why} }

func (e *tokenError) Error() string { return "verify token: " + string(e.why) }

func (e *tokenError) Unwrap() error { return ErrBadCredentials }

// Why a token is refused. Every reason is a constant, so that an error
// cannot carry the token (a bearer credential) or a key:
// TestJWTErrorsHoldNoSecret checks errors against this list.
const (
	rTokenTooLong     reason = "token longer than 8192 bytes" // MaxTokenSize
	rTokenMalformed   reason = "malformed token"
	rTokenAlgorithm   reason = "signing algorithm not accepted"
	rTokenCrit        reason = "token has critical header extensions (crit), none is supported"
	rTokenKID         reason = "no key with the token's key id (kid)"
	rTokenKeyAlg      reason = "the key the token names (kid) does not take its algorithm"
	rTokenSignature   reason = "signature does not verify"
	rTokenNoExp       reason = "token has no expiry (exp)"
	rTokenClaimType   reason = "a registered claim (exp, nbf, iat, iss, aud) has the wrong type"
	rTokenExpired     reason = "token expired (exp)"
	rTokenNotYet      reason = "token not valid yet (nbf)"
	rTokenIssuedLater reason = "token issued in the future (iat)"
	rTokenIssuer      reason = "issuer (iss) missing or not the one configured"
	rTokenAudience    reason = "audience (aud) missing or without the one configured"
	rTokenUser        reason = "user claim missing, empty or not a string"
	rTokenTenant      reason = "tenant claim missing, empty or not a string"
	rTokenControl     reason = "user or tenant holds a control character"
)
