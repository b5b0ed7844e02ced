package auth

import (
	"strconv"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// TestJWTHMACSecretFileLineBreak: the secret is the file's bytes but one
// trailing line break (\n or \r\n, as editors and echo add): spaces and
// any further line break are the secret's, which the load warns of. The
// load logs the secret's length, to compare with the issuer's.
func TestJWTHMACSecretFileLineBreak(t *testing.T) {
	for _, tc := range []struct {
		name, file, secret string
		warn               bool
	}{
		{"no line break", hmacSecret, hmacSecret, false},
		{"a newline", hmacSecret + "\n", hmacSecret, false},
		{"a CRLF", hmacSecret + "\r\n", hmacSecret, false},
		{"two newlines", hmacSecret + "\n\n", hmacSecret + "\n", true},
		{"a lone CR", hmacSecret + "\r", hmacSecret + "\r", true},
		{"a space before the newline", hmacSecret + " \n", hmacSecret + " ", true},
		{"inner line break", hmacSecret[:40] + "\n" + hmacSecret[40:] + "\n", hmacSecret[:40] + "\n" + hmacSecret[40:], false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, logs := openJWT(t, JWTConfig{HMACSecretFile: writeKeyFile(t, t.TempDir(), "secret", []byte(tc.file))})
			if _, err := j.Verify(sign(t, jwt.SigningMethodHS256, []byte(tc.secret), "", claims())); err != nil {
				t.Errorf("a token signed with the file's bytes %q but the line break: %v", tc.secret, err)
			}
			for _, other := range []string{tc.file, strings.TrimRight(tc.file, "\r\n ")} {
				if other == tc.secret || len(other) < minHMACSecret {
					continue
				}
				_, err := j.Verify(sign(t, jwt.SigningMethodHS256, []byte(other), "", claims()))
				wantRefused(t, err, rTokenSignature)
			}
			loaded := logs.Lines("jwt keys loaded")
			if len(loaded) != 1 || !strings.Contains(loaded[0], " hmac_secret_bytes="+strconv.Itoa(len(tc.secret))) {
				t.Errorf("load logged %q, want hmac_secret_bytes=%d", loaded, len(tc.secret))
			}
			warned := logs.Lines("level=WARN")
			if tc.warn != (len(warned) == 1) || (tc.warn && !strings.Contains(warned[0], "auth.jwt.hmac_secret_file")) {
				t.Errorf("warnings %q, want one naming auth.jwt.hmac_secret_file: %v", warned, tc.warn)
			}
			if strings.Contains(logs.String(), hmacSecret[:12]) {
				t.Errorf("the log holds the secret:\n%s", logs)
			}
		})
	}
}
