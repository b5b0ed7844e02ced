package acl

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// parseCases is the one table of raw ACL files: it drives TestParse and
// seeds FuzzParse.
var parseCases = []struct {
	name    string
	in      string
	rules   int    // when valid
	users   int    // when valid
	errLine int    // when not: the line the error names
	errHas  string // and part of what it says
	// mosquitto: Mosquitto 2.0 loads the file iff Parse accepts it, but
	// for mosqRefuses and mosqAccepts (TestMosquittoParsesAlike).
	mosquitto mosqParse
}{
	{name: "empty", in: ""},
	{name: "comments and blanks", in: "# a comment\n\n   \n\t\n  # indented comment\n\t# tab comment\n", mosquitto: mosqRefuses},
	{name: "mosquitto example", in: "# This affects access control for clients with no username.\ntopic read $SYS/#\n\n" +
		"# This only affects clients with username \"roger\".\nuser roger\ntopic foo/bar\n\n" +
		"# This affects all clients.\npattern write $SYS/broker/connection/%c/state\n", rules: 3, users: 1},
	{name: "every access word", in: "topic read a\ntopic write b\ntopic readwrite c\ntopic deny d\ntopic e\n", rules: 5},
	{name: "patterns", in: "pattern read a/%c\npattern write b/%u/#\npattern deny c/x%cy%u/+\npattern readwrite plain/#\n", rules: 4},
	{name: "user sections", in: "user acme-alice\ntopic a/#\nuser acme-bob\ntopic b/#\nuser acme-alice\ntopic c\n", rules: 3, users: 2},
	{name: "user without rules", in: "user acme-alice\nuser acme-bob\ntopic b\n", rules: 1, users: 1},
	{name: "user name with spaces", in: "user  Jane Q. Public  \ntopic a\n", rules: 1, users: 1},
	{name: "crlf", in: "user acme-alice\r\ntopic read a/#\r\n", rules: 1, users: 1},
	{name: "no final newline", in: "topic read a/#", rules: 1},
	{name: "extra spaces", in: "   topic    read     a/b   \n\ttopic  deny  x\n", rules: 2, mosquitto: mosqRefuses},
	{name: "filter with spaces", in: "topic read a b/c d\n", rules: 1},
	{name: "filter with a tab inside", in: "topic read a\tb\n", rules: 1},
	{name: "blank before filter", in: "topic read \ta/b\n", rules: 1},
	{name: "wildcards", in: "topic read +\ntopic read #\ntopic read +/+/#\ntopic read /\ntopic read a//b\n", rules: 5},
	{name: "dollar filters", in: "topic read $SYS/#\ntopic write $foo/+\n", rules: 2},
	{name: "unicode", in: "user jürgen\ntopic read häuser/°C\n", rules: 1, users: 1},
	{name: "percent literal", in: "pattern read 100%/%x/%\n", rules: 1},
	{name: "200 separators", in: "topic read " + strings.Repeat("a/", 200) + "a\n", rules: 1},
	{name: "longest filter", in: "pattern readwrite " + strings.Repeat("a", 65535) + "\r\n", rules: 1},
	{name: "longest line", in: "topic read " + strings.Repeat("a", MaxLineLen-len("topic read ")), errLine: 1, errHas: "bad filter"},
	{name: "longest line with comment", in: "# " + strings.Repeat("a", MaxLineLen-2) + "\ntopic a\n", rules: 1},

	{name: "unknown access", in: "# c\n\ntopic rwx a/b\n", errLine: 3, errHas: `unknown access "rwx"`},
	{name: "access upper case", in: "topic READ a\n", errLine: 1, errHas: `unknown access "READ"`},
	{name: "unknown keyword", in: "topic a\nsubscribe a\n", errLine: 2, errHas: `unknown keyword "subscribe"`},
	{name: "keyword upper case", in: "Topic a\n", errLine: 1, errHas: "unknown keyword"},
	{name: "tab after keyword", in: "topic\tread a\n", errLine: 1, errHas: "separated by spaces"},
	{name: "tab after access", in: "topic read\ta/b\n", errLine: 1, errHas: "separated by spaces", mosquitto: mosqAccepts},
	{name: "carriage return in a lone filter", in: "pattern \r/0\n", errLine: 1, errHas: "separated by spaces", mosquitto: mosqAccepts},
	{name: "tab after user", in: "user\talice\n", errLine: 1, errHas: "separated by spaces"},
	{name: "lone access word", in: "topic read\n", errLine: 1, errHas: "without a filter", mosquitto: mosqAccepts},
	{name: "lone deny", in: "pattern deny\n", errLine: 1, errHas: "without a filter", mosquitto: mosqAccepts},
	{name: "topic alone", in: "topic\n", errLine: 1, errHas: "topic without a filter"},
	{name: "pattern alone", in: "topic a\npattern   \n", errLine: 2, errHas: "pattern without a filter"},
	{name: "user alone", in: "user\n", errLine: 1, errHas: "user without a name"},
	{name: "user blanks", in: "user    \t \n", errLine: 1, errHas: "user without a name"},
	{name: "hash in the middle", in: "topic read a/#/b\n", errLine: 1, errHas: "bad filter"},
	{name: "plus inside a level", in: "topic read +x\n", errLine: 1, errHas: "bad filter"},
	{name: "hash inside a level", in: "pattern read a/%c#\n", errLine: 1, errHas: "bad filter"},
	{name: "comment after filter", in: "topic read a/# # all of a\n", errLine: 1, errHas: "bad filter"},
	{name: "filter not UTF-8", in: "topic read a/\xff\n", errLine: 1, errHas: "bad filter", mosquitto: mosqAccepts},
	{name: "user not UTF-8", in: "user j\xfcrgen\n", errLine: 1, errHas: "not valid UTF-8", mosquitto: mosqAccepts},
	{name: "NUL", in: "topic a\ntopic read a\x00b\n", errLine: 2, errHas: "NUL", mosquitto: mosqAccepts},
	{name: "201 separators", in: "topic read " + strings.Repeat("a/", 201) + "a\n", errLine: 1, errHas: "more than 201 levels"},
	{name: "line too long", in: "topic a\n" + "# " + strings.Repeat("a", MaxLineLen-1) + "\n", errLine: 2, errHas: "longer than", mosquitto: mosqAccepts},
}

// mosqParse says where Mosquitto 2.0 parses a file otherwise than Parse.
type mosqParse uint8

const (
	mosqAlike   mosqParse = iota
	mosqRefuses           // Parse accepts what Mosquitto refuses
	mosqAccepts           // Parse refuses what Mosquitto accepts
)

func TestParse(t *testing.T) {
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse(strings.NewReader(tc.in))
			if tc.errHas == "" {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if f.Rules() != tc.rules || f.Users() != tc.users {
					t.Fatalf("Rules() = %d, Users() = %d, want %d, %d", f.Rules(), f.Users(), tc.rules, tc.users)
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse accepted %.80q", tc.in)
			}
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("error %v (%T) is not a *LineError", err, err)
			}
			if le.Line != tc.errLine {
				t.Errorf("error names line %d, want %d: %v", le.Line, tc.errLine, err)
			}
			if !strings.Contains(err.Error(), tc.errHas) {
				t.Errorf("error %q does not say %q", err, tc.errHas)
			}
			if want := "acl line "; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %q does not start with %q", err, want)
			}
			if len(err.Error()) > 300 {
				t.Errorf("error of %d bytes: the file's text is not cut short", len(err.Error()))
			}
		})
	}
}

// TestParseSections checks which section each line went to.
func TestParseSections(t *testing.T) {
	f, err := Parse(strings.NewReader("topic a\npattern p/%c\nuser  Jane Q. Public \ntopic b\nuser x\npattern q\nuser Jane Q. Public\ntopic write c\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []rule{
		{line: 1, anon: true, access: mRead | mWrite, filter: "a"},
		{line: 2, pattern: true, access: mRead | mWrite, filter: "p/%c"},
		{line: 4, user: "Jane Q. Public", access: mRead | mWrite, filter: "b"},
		{line: 6, pattern: true, access: mRead | mWrite, filter: "q"},
		{line: 8, user: "Jane Q. Public", access: mWrite, filter: "c"},
	}
	if len(f.rules) != len(want) {
		t.Fatalf("rules %+v, want %+v", f.rules, want)
	}
	for i := range want {
		if f.rules[i] != want[i] {
			t.Errorf("rule %d = %+v, want %+v", i, f.rules[i], want[i])
		}
	}
	if f.Users() != 1 {
		t.Errorf("Users() = %d, want 1 (x has no topic line)", f.Users())
	}
}

// TestParseFileSize refuses a file over MaxFileSize without reading on.
func TestParseFileSize(t *testing.T) {
	line := "topic read " + strings.Repeat("a", 1000) + "\n"
	n := MaxFileSize/len(line) + 1
	r := &repeatReader{line: line, n: n}
	_, err := Parse(r)
	if err == nil || !strings.Contains(err.Error(), "longer than 16777216 bytes") {
		t.Fatalf("a file of %d bytes: %v, want refused for its size", n*len(line), err)
	}
	if r.read > MaxFileSize+len(line)+64<<10 {
		t.Errorf("read %d bytes of a file over the limit", r.read)
	}
	// Just under the limit is fine.
	if _, err := Parse(&repeatReader{line: line, n: MaxFileSize / len(line)}); err != nil {
		t.Fatalf("a file under the limit: %v", err)
	}
}

type repeatReader struct {
	line    string
	n, read int
	off     int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	total := 0
	for len(p) > 0 {
		if r.n == 0 {
			if total == 0 {
				return 0, io.EOF
			}
			break
		}
		c := copy(p, r.line[r.off:])
		p, total, r.off = p[c:], total+c, r.off+c
		if r.off == len(r.line) {
			r.off, r.n = 0, r.n-1
		}
	}
	r.read += total
	return total, nil
}

// TestOpenErrors: a missing file and a broken one are refused at the
// first load, the broken one with its line number and path.
func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(filepath.Join(dir, "missing"), nil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v, want ErrNotExist", err)
	}
	path := filepath.Join(dir, "acl")
	if err := os.WriteFile(path, []byte("topic a\n\ntopic rwx b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path, nil)
	var le *LineError
	if !errors.As(err, &le) || le.Line != 3 || !strings.Contains(err.Error(), path) {
		t.Fatalf("broken file: %v, want a *LineError for line 3 naming the path", err)
	}
	if err := os.WriteFile(path, []byte("topic a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := Open(path, nil)
	if err != nil || a.File().Rules() != 1 {
		t.Fatalf("Open = %v, %v", a, err)
	}
}

// TestString: the rules written back parse to a file with the same rules
// in each section.
func TestString(t *testing.T) {
	in := "topic read a\nuser u 1\ntopic deny b\npattern write c/%c\nuser u 2\ntopic d\nuser u 1\ntopic write e\n"
	f, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := "topic read a\nuser u 1\ntopic deny b\ntopic write e\nuser u 2\ntopic readwrite d\npattern write c/%c\n"
	if got := f.String(); got != want {
		t.Fatalf("String() =\n%s\nwant\n%s", got, want)
	}
}

// TestLoadExample reads testdata/example.acl, the file the package
// documentation shows.
func TestLoadExample(t *testing.T) {
	a, err := Open(filepath.Join("testdata", "example.acl"), nil)
	if err != nil {
		t.Fatal(err)
	}
	f := a.File()
	if f.Rules() != 6 || f.Users() != 2 {
		t.Fatalf("Rules() = %d, Users() = %d, want 6, 2", f.Rules(), f.Users())
	}
	for _, c := range []check{
		{anon, Read, "$SYS/broker/uptime", true},
		{alice, Write, "sensors/a", true},
		{alice, Read, "sensors/secret", false},
		{who{user: "acme-Jane Q. Public", clientID: "j"}, Read, "reports/q3", true},
		{who{user: "acme-Jane Q. Public", clientID: "j"}, Write, "devices/j/status", true},
		{bob, Read, "users/acme-bob/x", true},
		{bob, Read, "users/acme-alice/x", false},
	} {
		if got := f.For(c.who.user, c.who.clientID, c.who.anonymous).Allow(c.access, []byte(c.topic)); got != c.want {
			t.Errorf("%+v %v %q = %v, want %v", c.who, c.access, c.topic, got, c.want)
		}
	}
}
