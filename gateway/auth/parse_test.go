package auth

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Valid lines, made by the real tools (testdata/README.md).
const (
	lineAlice7  = `acme-alice:$7$101$YwgcD5YLeBNvOUOV$VuBiQskw4LBQgeqbYCFxuHcQMKT9f1AyooQ3hQnTs5HkTklW9zOO7d3jeisMi53j7e4Rq4sqUWQwreLIi7GTVw==`
	lineCarol6  = `legacy-carol:$6$KkPn3mGEv9IbaThU$Hw/PyS8fA3yZbmIP1AuCXVx3csdIVIIsuMp9jFwgENc7RVRvP4ELJW6Tk02wKyaMDSe7DoiZDV10sg0cb7hqIw==`
	lineErin2y  = `acme-erin:$2y$05$jDylo2W1UKnnT58j..9VHuOvznzi/D8d4GW8BV7ZfX9gjA3XFAMOO`
	lineFrankID = `acme-frank:$argon2id$v=19$m=1024,t=2,p=1$aFFLQ3lSQjYwbjcyaEU4RA$vJ0eEl5sCH9r9xpMEdaaAhJpJMUimc41pwKCAdiaMBQ`

	salt12 = "YwgcD5YLeBNvOUOV" // base64 of 12 bytes
	hash64 = "VuBiQskw4LBQgeqbYCFxuHcQMKT9f1AyooQ3hQnTs5HkTklW9zOO7d3jeisMi53j7e4Rq4sqUWQwreLIi7GTVw=="
	argonS = "aFFLQ3lSQjYwbjcyaEU4RA"
	argonH = "vJ0eEl5sCH9r9xpMEdaaAhJpJMUimc41pwKCAdiaMBQ"
)

// parseCases is the one table of raw password files: it drives
// TestParsePasswordFile and seeds FuzzParsePasswordFile.
var parseCases = []struct {
	name    string
	in      string
	users   int    // when valid
	errLine int    // when not: the line the error names
	errHas  string // and part of what it says
}{
	{name: "empty", in: "", users: 0},
	{name: "pbkdf2", in: lineAlice7 + "\n", users: 1},
	{name: "sha512", in: lineCarol6, users: 1},
	{name: "bcrypt 2y", in: lineErin2y, users: 1},
	{name: "bcrypt 2a", in: "u:$2a$" + lineErin2y[len("acme-erin:$2y$"):], users: 1},
	{name: "bcrypt 2b", in: "u:$2b$" + lineErin2y[len("acme-erin:$2y$"):], users: 1},
	{name: "argon2id", in: lineFrankID, users: 1},
	{name: "all four", in: strings.Join([]string{lineAlice7, lineCarol6, lineErin2y, lineFrankID}, "\n"), users: 4},
	{name: "comments and blanks", in: "# users\n\n   \n\t# indented comment\n" + lineAlice7 + "\n\n# end\n", users: 1},
	{name: "crlf", in: lineAlice7 + "\r\n" + lineCarol6 + "\r\n", users: 2},
	{name: "blanks around fields", in: "  acme-alice :\t" + lineAlice7[len("acme-alice:"):] + "  \n", users: 1},
	{name: "unpadded mosquitto base64", in: "u:$7$101$" + salt12 + "$" + strings.TrimRight(hash64, "="), users: 1},
	{name: "salt of 64 bytes", in: "u:$7$101$" + strings.TrimRight(hash64, "=") + "$" + hash64, users: 1},
	{name: "unicode user", in: "ålice:$7$101$" + salt12 + "$" + hash64, users: 1},
	{name: "hash contains a colon", in: "u:$7$101$" + salt12 + "$" + hash64 + ":extra", errLine: 1, errHas: "hash is not base64"},

	{name: "no colon", in: "\n" + "acme-alice correct horse\n", errLine: 2, errHas: "no ':'"},
	{name: "plain text password", in: "alice:correct horse battery", errLine: 1, errHas: "unknown hash format"},
	{name: "empty user", in: ":$7$101$" + salt12 + "$" + hash64, errLine: 1, errHas: "empty user name"},
	{name: "empty hash", in: "# c\nalice:\n", errLine: 2, errHas: "empty hash"},
	{name: "blank hash", in: "alice: \t", errLine: 1, errHas: "empty hash"},
	{name: "unknown scheme 5", in: "alice:$5$rounds=5000$salt$hashhashhash", errLine: 1, errHas: "unknown hash format"},
	{name: "bcrypt 2x", in: "u:$2x$" + lineErin2y[len("acme-erin:$2y$"):], errLine: 1, errHas: "unknown hash format"},
	{name: "duplicate user", in: lineAlice7 + "\n" + lineCarol6 + "\n" + lineAlice7 + "\n", errLine: 3, errHas: "earlier line"},
	{name: "user not UTF-8", in: "\xffalice:$7$101$" + salt12 + "$" + hash64, errLine: 1, errHas: "UTF-8"},
	{name: "user with NUL", in: "al\x00ice:$7$101$" + salt12 + "$" + hash64, errLine: 1, errHas: "NUL"},
	{name: "line too long", in: lineAlice7 + "\n" + "u:" + strings.Repeat("A", maxLineLen+10) + "\n", errLine: 2, errHas: "longer than"},

	{name: "7 missing fields", in: "u:$7$101$" + salt12, errLine: 1, errHas: "malformed $7$"},
	{name: "7 extra field", in: "u:$7$101$" + salt12 + "$" + hash64 + "$x", errLine: 1, errHas: "malformed $7$"},
	{name: "7 iterations not a number", in: "u:$7$abc$" + salt12 + "$" + hash64, errLine: 1, errHas: "iterations"},
	{name: "7 iterations zero", in: "u:$7$0$" + salt12 + "$" + hash64, errLine: 1, errHas: "iterations"},
	{name: "7 iterations negative", in: "u:$7$-1$" + salt12 + "$" + hash64, errLine: 1, errHas: "iterations"},
	{name: "7 iterations leading zero", in: "u:$7$0101$" + salt12 + "$" + hash64, errLine: 1, errHas: "iterations"},
	{name: "7 iterations too many", in: "u:$7$99999999999$" + salt12 + "$" + hash64, errLine: 1, errHas: "iterations"},
	{name: "7 iterations overflow", in: "u:$7$999999999999999999999999$" + salt12 + "$" + hash64, errLine: 1, errHas: "iterations"},
	{name: "7 salt not base64", in: "u:$7$101$not*base64!$" + hash64, errLine: 1, errHas: "salt"},
	{name: "7 salt empty", in: "u:$7$101$$" + hash64, errLine: 1, errHas: "salt"},
	{name: "7 hash short", in: "u:$7$101$" + salt12 + "$" + salt12, errLine: 1, errHas: "64 bytes"},
	{name: "7 hash not base64", in: "u:$7$101$" + salt12 + "$" + strings.Repeat("#", 88), errLine: 1, errHas: "64 bytes"},
	{name: "6 missing hash", in: "u:$6$" + salt12, errLine: 1, errHas: "malformed $6$"},
	{name: "6 with iterations", in: "u:$6$101$" + salt12 + "$" + hash64, errLine: 1, errHas: "malformed $6$"},
	{name: "6 hash short", in: "u:$6$" + salt12 + "$" + salt12, errLine: 1, errHas: "64 bytes"},
	{name: "bcrypt truncated", in: "u:$2y$05$jDylo2W1UKnnT58j", errLine: 1, errHas: "bcrypt"},
	{name: "bcrypt bad cost", in: "u:$2y$99$" + lineErin2y[len("acme-erin:$2y$05$"):], errLine: 1, errHas: "bcrypt"},
	{name: "argon2i", in: "u:$argon2i$v=19$m=1024,t=2,p=1$" + argonS + "$" + argonH, errLine: 1, errHas: "unknown hash format"},
	{name: "argon2id v16", in: "u:$argon2id$v=16$m=1024,t=2,p=1$" + argonS + "$" + argonH, errLine: 1, errHas: "v=19"},
	{name: "argon2id no version", in: "u:$argon2id$m=1024,t=2,p=1$" + argonS + "$" + argonH, errLine: 1, errHas: "malformed $argon2id$"},
	{name: "argon2id params reordered", in: "u:$argon2id$v=19$t=2,m=1024,p=1$" + argonS + "$" + argonH, errLine: 1, errHas: "malformed $argon2id$"},
	{name: "argon2id t zero", in: "u:$argon2id$v=19$m=1024,t=0,p=1$" + argonS + "$" + argonH, errLine: 1, errHas: "out of range"},
	{name: "argon2id p 256", in: "u:$argon2id$v=19$m=4096,t=1,p=256$" + argonS + "$" + argonH, errLine: 1, errHas: "out of range"},
	{name: "argon2id memory huge", in: "u:$argon2id$v=19$m=99999999,t=1,p=1$" + argonS + "$" + argonH, errLine: 1, errHas: "out of range"},
	{name: "argon2id memory below 8p", in: "u:$argon2id$v=19$m=15,t=1,p=2$" + argonS + "$" + argonH, errLine: 1, errHas: "out of range"},
	{name: "argon2id padded salt", in: "u:$argon2id$v=19$m=1024,t=2,p=1$" + argonS + "==$" + argonH, errLine: 1, errHas: "salt"},
	{name: "argon2id short salt", in: "u:$argon2id$v=19$m=1024,t=2,p=1$YWJj$" + argonH, errLine: 1, errHas: "salt"},
	{name: "argon2id hash missing", in: "u:$argon2id$v=19$m=1024,t=2,p=1$" + argonS, errLine: 1, errHas: "malformed $argon2id$"},
	{name: "argon2id hash not base64", in: "u:$argon2id$v=19$m=1024,t=2,p=1$" + argonS + "$!!!!", errLine: 1, errHas: "hash is not"},
}

// allReasons is every reason the parser may give (reasons.go): an error is
// "line N: " and one of them, so it cannot carry text from the file.
var allReasons = []reason{
	rNoColon, rEmptyHash, rDuplicate, rLineTooLong, rEmptyUser, rUserTooLong, rUserUTF8, rUserChars,
	rUserComment, rUserBlank, rUnknownFormat, rBcrypt, rPBKDF2Shape, rPBKDF2Iter, rPBKDF2Salt,
	rPBKDF2Hash, rSHA512Shape, rSHA512Salt, rSHA512Hash, rArgon2Shape, rArgon2Version, rArgon2Params,
	rArgon2Salt, rArgon2Hash,
}

var lineNumber = regexp.MustCompile(`^line [1-9][0-9]*: `)

func TestParsePasswordFile(t *testing.T) {
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParsePasswordFile(strings.NewReader(tc.in))
			if tc.errHas == "" {
				if err != nil {
					t.Fatalf("ParsePasswordFile: %v", err)
				}
				if f.Len() != tc.users {
					t.Fatalf("Len() = %d, want %d", f.Len(), tc.users)
				}
				return
			}
			if err == nil {
				t.Fatalf("ParsePasswordFile accepted %q", tc.in)
			}
			msg := err.Error()
			if want := fmt.Sprintf("line %d: ", tc.errLine); !strings.HasPrefix(msg, want) {
				t.Errorf("error %q does not start with %q", msg, want)
			}
			if !strings.Contains(msg, tc.errHas) {
				t.Errorf("error %q does not say %q", msg, tc.errHas)
			}
			var le *lineError
			if !errors.As(err, &le) || le.line != tc.errLine {
				t.Errorf("error %v is not a *lineError for line %d", err, tc.errLine)
			}
			assertNoSecret(t, msg, tc.in)
		})
	}
}

// assertNoSecret fails unless msg is "line N: " and a known reason, and
// when it quotes the text after a ':' of any line of in (the first check
// implies the second; the second says what the first is for).
func assertNoSecret(t *testing.T, msg, in string) {
	t.Helper()
	loc := lineNumber.FindStringIndex(msg)
	if loc == nil || !slices.Contains(allReasons, reason(msg[loc[1]:])) {
		t.Errorf("error %q is not \"line N: <known reason>\"", msg)
	}
	for _, line := range strings.Split(in, "\n") {
		if _, after, ok := strings.Cut(line, ":"); ok {
			after = strings.TrimSpace(after)
			if len(after) >= 8 && strings.Contains(msg, after) && !inVocabulary(after) {
				t.Errorf("error %q quotes %q from the file", msg, after)
			}
		}
	}
}

// inVocabulary reports whether s is part of some reason's own text (a file
// may hold "$argon2i", which the reason for unknown formats also says).
func inVocabulary(s string) bool {
	return slices.ContainsFunc(allReasons, func(r reason) bool { return strings.Contains(string(r), s) })
}

func TestReasonsNameTheLimits(t *testing.T) {
	for r, n := range map[reason]int{rLineTooLong: maxLineLen, rPBKDF2Iter: maxPBKDF2Iterations, rArgon2Params: maxArgon2Memory} {
		if !strings.Contains(string(r), strconv.Itoa(n)) {
			t.Errorf("reason %q does not say the limit %d", r, n)
		}
	}
}

func TestVerifyFixtureFormats(t *testing.T) {
	in := strings.Join([]string{lineAlice7, lineCarol6, lineErin2y, lineFrankID}, "\n")
	f, err := ParsePasswordFile(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ user, pass string }{
		{"acme-alice", "correct horse"},
		{"legacy-carol", "sha512 only"},
		{"acme-erin", "bcrypt pass"},
		{"acme-frank", "argon pass"},
	} {
		if !f.Verify(c.user, []byte(c.pass)) {
			t.Errorf("Verify(%s, right password) = false", c.user)
		}
		for _, wrong := range []string{"", c.pass + " ", c.pass[:len(c.pass)-1], strings.ToUpper(c.pass)} {
			if f.Verify(c.user, []byte(wrong)) {
				t.Errorf("Verify(%s, %q) = true", c.user, wrong)
			}
		}
	}
	if f.Verify("acme-nobody", []byte("correct horse")) {
		t.Error("an unknown user with another user's password verified")
	}
}

func FuzzParsePasswordFile(f *testing.F) {
	for _, tc := range parseCases {
		f.Add(tc.in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		pf, err := ParsePasswordFile(strings.NewReader(in))
		if err != nil {
			if pf != nil {
				t.Fatal("a file and an error")
			}
			assertNoSecret(t, err.Error(), in)
			return
		}
		if pf.Len() > strings.Count(in, "\n")+1 {
			t.Fatalf("%d users from %d lines", pf.Len(), strings.Count(in, "\n")+1)
		}
	})
}

// spyEntry counts its checks and accepts every password.
type spyEntry struct{ n int }

func (s *spyEntry) verify([]byte) bool { s.n++; return true }

// TestUnknownUserSpendsOneHash: an unknown user's attempt checks the
// dummy (the file's first entry) once and is refused whatever it answers.
func TestUnknownUserSpendsOneHash(t *testing.T) {
	f, err := ParsePasswordFile(strings.NewReader("# c\n" + lineErin2y + "\n" + lineAlice7 + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if f.dummy != f.entries["acme-erin"] {
		t.Fatal("the dummy is not the file's first entry")
	}
	spy := &spyEntry{}
	f.dummy = spy
	if f.Verify("nobody", []byte("anything")) {
		t.Fatal("an unknown user verified")
	}
	if spy.n != 1 {
		t.Fatalf("an unknown user cost %d hashes, want 1", spy.n)
	}
	if !f.Verify("acme-alice", []byte("correct horse")) || spy.n != 1 {
		t.Fatal("a known user went through the dummy")
	}
}
