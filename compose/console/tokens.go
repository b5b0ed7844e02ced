package console

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The tenants' console tokens file: one line per token,
//
//	TENANT:sha256:HEX
//
// HEX being the SHA-256 of the token (64 hex digits); blank lines and
// lines starting with # are skipped. The file holds no token, only its
// hash: a token is 32 random bytes (NewToken), so a fast hash is as good
// as a slow one, and a login finds its tenant in one lookup. A tenant may
// have several tokens (one per person, or one being replaced). The
// default tenant is the empty name (":sha256:…").

// TokenPrefix starts every tenant console token NewToken makes, so that
// a token found in a log or a paste can be told apart.
const TokenPrefix = "shoal-ct-"

// TenantTokens are a tokens file's entries: a token's hash → its tenant.
type TenantTokens struct {
	byHash map[[sha256.Size]byte]string
}

// Len is the number of tokens.
func (t *TenantTokens) Len() int { return len(t.byHash) }

// Lookup returns the tenant of token.
func (t *TenantTokens) Lookup(token string) (string, bool) {
	if t == nil || token == "" {
		return "", false
	}
	tenant, ok := t.byHash[sha256.Sum256([]byte(token))]
	return tenant, ok
}

// knows reports whether the token of hash h is still in the file, for
// tenant.
func (t *TenantTokens) knows(h [sha256.Size]byte, tenant string) bool {
	if t == nil {
		return false
	}
	got, ok := t.byHash[h]
	return ok && got == tenant
}

// ParseTenantTokens reads a tokens file; an error names the line.
func ParseTenantTokens(r io.Reader) (*TenantTokens, error) {
	t := &TenantTokens{byHash: map[[sha256.Size]byte]string{}}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndex(line, ":sha256:")
		if i < 0 {
			return nil, fmt.Errorf("line %d: not TENANT:sha256:HEX", n)
		}
		tenant, digest := line[:i], line[i+len(":sha256:"):]
		raw, err := hex.DecodeString(digest)
		if err != nil || len(raw) != sha256.Size {
			return nil, fmt.Errorf("line %d: the hash is not 64 hex digits", n)
		}
		h := [sha256.Size]byte(raw)
		if prev, dup := t.byHash[h]; dup && prev != tenant {
			return nil, fmt.Errorf("line %d: the same token is tenant %q's and %q's", n, prev, tenant)
		}
		t.byHash[h] = tenant
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return t, nil
}

// NewToken returns a new random tenant console token.
func NewToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24)
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// TokenLine is the tokens file's line for token of tenant.
func TokenLine(tenant, token string) string {
	h := sha256.Sum256([]byte(token))
	return tenant + ":sha256:" + hex.EncodeToString(h[:])
}

// AddToken makes a new token for tenant, adds its line to the tokens file
// at path (made, mode 0600, when missing; every other line kept) and
// returns the token: the one time it is shown.
func AddToken(path, tenant string) (string, error) {
	if strings.ContainsAny(tenant, "\r\n") {
		return "", fmt.Errorf("tenant %q: no line breaks", tenant)
	}
	token := NewToken()
	err := rewrite(path, func(lines []string) []string { return append(lines, TokenLine(tenant, token)) })
	return token, err
}

// RevokeTokens takes every token of tenant out of the tokens file and
// returns how many there were. The console ends their sessions at their
// next request, once it has read the file again (within seconds).
func RevokeTokens(path, tenant string) (int, error) {
	n := 0
	err := rewrite(path, func(lines []string) []string {
		out := lines[:0]
		for _, l := range lines {
			t := strings.TrimSpace(l)
			if i := strings.LastIndex(t, ":sha256:"); i >= 0 && !strings.HasPrefix(t, "#") && t[:i] == tenant {
				n++
				continue
			}
			out = append(out, l)
		}
		return out
	})
	return n, err
}

// rewrite replaces the tokens file at path with edit's lines, through a
// file renamed over it, mode 0600.
func rewrite(path string, edit func([]string) []string) error {
	var lines []string
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		lines = strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if len(b) == 0 {
			lines = nil
		}
		if _, err := ParseTenantTokens(strings.NewReader(string(b))); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	lines = edit(lines)
	tmp, err := os.CreateTemp(filepath.Dir(path), ".console-tokens-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	text := strings.Join(lines, "\n")
	if text != "" {
		text += "\n"
	}
	if _, err := tmp.WriteString(text); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
