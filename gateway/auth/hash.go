package auth

import (
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/bcrypt"
)

// entry is one parsed hash: it checks a password against itself.
// Implementations compare in constant time.
type entry interface {
	verify(password []byte) bool
}

// Limits on the cost parameters a file may ask for. A password file is
// trusted configuration, but a typo such as an extra digit in an iteration
// count would make every CONNECT of that user (and, through the dummy, of
// unknown users) take minutes; such a line is refused instead.
const (
	mosquittoHashLen    = sha512.Size // $6$ and $7$ store a 64-byte SHA-512 output
	maxSaltLen          = 1024
	maxPBKDF2Iterations = 1 << 24 // mosquitto_passwd writes 101 by default
	minArgon2Salt       = 8       // the Argon2 specification's minimum
	minArgon2Key        = 4
	maxArgon2Key        = 1024
	maxArgon2Memory     = 1 << 22 // KiB: 4 GiB
	maxArgon2Time       = 1 << 16
)

// argon2Params are the cost parameters of an argon2id hash.
type argon2Params struct {
	memory  uint32 // KiB
	time    uint32
	threads uint8
}

// defaultArgon2 is what HashPassword uses: RFC 9106's second recommended
// option (64 MiB) with three passes, two lanes.
var defaultArgon2 = argon2Params{memory: 64 * 1024, time: 3, threads: 2}

const (
	argon2SaltLen = 16
	argon2KeyLen  = 32
)

// parseHash recognises the hash formats and returns the entry, or the
// reason it is malformed.
func parseHash(s string) (entry, reason) {
	switch {
	case strings.HasPrefix(s, "$7$"):
		return parsePBKDF2(s[len("$7$"):])
	case strings.HasPrefix(s, "$6$"):
		return parseSHA512(s[len("$6$"):])
	case strings.HasPrefix(s, "$2a$"), strings.HasPrefix(s, "$2b$"), strings.HasPrefix(s, "$2y$"):
		if _, err := bcrypt.Cost([]byte(s)); err != nil {
			return nil, rBcrypt
		}
		return &bcryptEntry{hash: []byte(s)}, rOK
	case strings.HasPrefix(s, "$argon2id$"):
		return parseArgon2id(s[len("$argon2id$"):])
	}
	return nil, rUnknownFormat
}

// decodeMosquitto64 decodes Mosquitto's base64 (OpenSSL's: standard
// alphabet, padded); unpadded input is accepted too, as some generators
// strip the padding.
func decodeMosquitto64(s string) ([]byte, bool) {
	b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(s, "="))
	return b, err == nil
}

// pbkdf2Entry is Mosquitto's $7$<iterations>$<salt>$<hash>:
// PBKDF2-HMAC-SHA512 of the password with the decoded salt, 64-byte key.
type pbkdf2Entry struct {
	iterations int
	salt, hash []byte
}

func parsePBKDF2(s string) (entry, reason) {
	parts := strings.Split(s, "$")
	if len(parts) != 3 {
		return nil, rPBKDF2Shape
	}
	iter, ok := parseDecimal(parts[0], maxPBKDF2Iterations)
	if !ok || iter < 1 {
		return nil, rPBKDF2Iter
	}
	salt, okS := decodeMosquitto64(parts[1])
	if !okS || len(salt) == 0 || len(salt) > maxSaltLen {
		return nil, rPBKDF2Salt
	}
	hash, okH := decodeMosquitto64(parts[2])
	if !okH || len(hash) != mosquittoHashLen {
		return nil, rPBKDF2Hash
	}
	return &pbkdf2Entry{iterations: int(iter), salt: salt, hash: hash}, rOK
}

func (e *pbkdf2Entry) verify(password []byte) bool {
	got, err := pbkdf2.Key(sha512.New, string(password), e.salt, e.iterations, mosquittoHashLen)
	return err == nil && subtle.ConstantTimeCompare(got, e.hash) == 1
}

// sha512Entry is Mosquitto's older $6$<salt>$<hash>: one SHA-512 over the
// password followed by the decoded salt.
type sha512Entry struct {
	salt, hash []byte
}

func parseSHA512(s string) (entry, reason) {
	parts := strings.Split(s, "$")
	if len(parts) != 2 {
		return nil, rSHA512Shape
	}
	salt, okS := decodeMosquitto64(parts[0])
	if !okS || len(salt) == 0 || len(salt) > maxSaltLen {
		return nil, rSHA512Salt
	}
	hash, okH := decodeMosquitto64(parts[1])
	if !okH || len(hash) != mosquittoHashLen {
		return nil, rSHA512Hash
	}
	return &sha512Entry{salt: salt, hash: hash}, rOK
}

func (e *sha512Entry) verify(password []byte) bool {
	h := sha512.New()
	h.Write(password)
	h.Write(e.salt)
	return subtle.ConstantTimeCompare(h.Sum(nil), e.hash) == 1
}

// bcryptEntry is a $2a$, $2b$ or $2y$ hash, checked by x/crypto/bcrypt
// (which compares in constant time).
type bcryptEntry struct{ hash []byte }

func (e *bcryptEntry) verify(password []byte) bool {
	return bcrypt.CompareHashAndPassword(e.hash, password) == nil
}

// argon2Entry is a PHC string $argon2id$v=19$m=<KiB>,t=<passes>,p=<lanes>$<salt>$<hash>
// with unpadded standard base64.
type argon2Entry struct {
	params     argon2Params
	salt, hash []byte
}

func parseArgon2id(s string) (entry, reason) {
	parts := strings.Split(s, "$")
	if len(parts) != 4 {
		return nil, rArgon2Shape
	}
	if parts[0] != "v=19" {
		return nil, rArgon2Version
	}
	ps := strings.Split(parts[1], ",")
	if len(ps) != 3 || !strings.HasPrefix(ps[0], "m=") || !strings.HasPrefix(ps[1], "t=") || !strings.HasPrefix(ps[2], "p=") {
		return nil, rArgon2Shape
	}
	m, okM := parseDecimal(ps[0][2:], maxArgon2Memory)
	t, okT := parseDecimal(ps[1][2:], maxArgon2Time)
	p, okP := parseDecimal(ps[2][2:], 255)
	if !okM || !okT || !okP || t < 1 || p < 1 || m < 8*p {
		return nil, rArgon2Params
	}
	salt, err := base64.RawStdEncoding.Strict().DecodeString(parts[2])
	if err != nil || len(salt) < minArgon2Salt || len(salt) > maxSaltLen {
		return nil, rArgon2Salt
	}
	hash, err := base64.RawStdEncoding.Strict().DecodeString(parts[3])
	if err != nil || len(hash) < minArgon2Key || len(hash) > maxArgon2Key {
		return nil, rArgon2Hash
	}
	return &argon2Entry{
		params: argon2Params{memory: uint32(m), time: uint32(t), threads: uint8(p)},
		salt:   salt,
		hash:   hash,
	}, rOK
}

func (e *argon2Entry) verify(password []byte) bool {
	got := argon2.IDKey(password, e.salt, e.params.time, e.params.memory, e.params.threads, uint32(len(e.hash)))
	return subtle.ConstantTimeCompare(got, e.hash) == 1
}

// parseDecimal parses a plain decimal number (digits only, no sign, no
// leading zeros beyond "0" itself) of at most max.
func parseDecimal(s string, max uint64) (uint64, bool) {
	if s == "" || len(s) > 20 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil && n <= max
}

// HashPassword returns a new argon2id PHC string for password:
// $argon2id$v=19$m=65536,t=3,p=2$<salt>$<hash>, with a random 16-byte salt,
// a 32-byte hash and unpadded standard base64 as the PHC format specifies.
func HashPassword(password []byte) (string, error) {
	return hashArgon2id(password, defaultArgon2)
}

func hashArgon2id(password []byte, p argon2Params) (string, error) {
	salt := make([]byte, argon2SaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("hash password: salt: %w", err)
	}
	key := argon2.IDKey(password, salt, p.time, p.memory, p.threads, argon2KeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, p.memory, p.time, p.threads,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key)), nil
}
