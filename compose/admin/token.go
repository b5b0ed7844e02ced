package admin

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// TokenFileName is the token `shoal all` makes in its data directory when
// no admin.token_file is configured; `shoal ctl --data-dir` reads it.
const TokenFileName = "admin.token"

// ReadToken reads a token file: its first line, without surrounding
// white space. Its errors name the file, never the token.
func ReadToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read admin token: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	tok := strings.TrimSpace(line)
	if tok == "" {
		return "", fmt.Errorf("read admin token: %s is empty", path)
	}
	return tok, nil
}

// LoadOrCreateToken reads dataDir/admin.token, or makes a random token of
// 256 bits and writes it there with mode 0600 when the file does not exist
// yet (through a temporary file renamed into place, so that a reader never
// sees half of it). It returns the token and the file's path.
func LoadOrCreateToken(dataDir string) (token, path string, err error) {
	path = filepath.Join(dataDir, TokenFileName)
	tok, err := ReadToken(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return tok, path, err
	}
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return "", path, fmt.Errorf("make admin token: %w", err)
	}
	tok = base64.RawURLEncoding.EncodeToString(secret[:])
	f, err := os.CreateTemp(dataDir, ".admin-token-") // mode 0600
	if err != nil {
		return "", path, fmt.Errorf("make admin token: %w", err)
	}
	tmp := f.Name()
	_, werr := f.WriteString(tok + "\n")
	if werr == nil {
		werr = f.Sync()
	}
	if err := errors.Join(werr, f.Close()); err != nil {
		_ = os.Remove(tmp)
		return "", path, fmt.Errorf("make admin token: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return "", path, fmt.Errorf("make admin token: %w", err)
	}
	return tok, path, nil
}

// tokenMatches compares a presented token with the expected one in
// constant time (for tokens of equal length; the length is not secret).
func tokenMatches(got, want string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}
