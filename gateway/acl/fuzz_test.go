package acl

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// fuzzClients are the identities FuzzParse checks each parsed file for.
var fuzzClients = []who{
	{user: "acme-alice", clientID: "dev-1"},
	{user: "roger", clientID: "c1"},
	{clientID: "anon-1", anonymous: true},
	{user: "acme-alice", clientID: "d+"},
}

// FuzzParse: Parse never panics; it refuses with a *LineError (or for the
// size); the same bytes read in pieces parse the same; a parsed file
// written back with String parses to one that answers the same; and the
// answers agree with the oracle on topics made from the file's own rules.
func FuzzParse(f *testing.F) {
	for _, tc := range parseCases {
		if len(tc.in) < 4096 {
			f.Add(tc.in)
		}
	}
	for _, tc := range matchCases {
		f.Add(tc.file)
	}
	f.Fuzz(func(t *testing.T, in string) {
		file, err := Parse(strings.NewReader(in))
		split := len(in) / 3
		again, err2 := Parse(io.MultiReader(iotest.OneByteReader(strings.NewReader(in[:split])), strings.NewReader(in[split:])))
		if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
			t.Fatalf("read whole: %v; read in pieces: %v", err, err2)
		}
		if err != nil {
			var le *LineError
			if !errors.As(err, &le) || le.Line < 1 || le.Line > strings.Count(in, "\n")+1 {
				t.Fatalf("error %v is not a *LineError with a line of the file", err)
			}
			return
		}
		if again.String() != file.String() {
			t.Fatal("reading in pieces changed the rules")
		}
		text := file.String()
		back, err := Parse(strings.NewReader(text))
		if err != nil {
			t.Fatalf("String() does not parse: %v\n%s", err, text)
		}
		if back.Rules() != file.Rules() || back.Users() != file.Users() {
			t.Fatalf("String() parses to %d rules, %d users, want %d, %d", back.Rules(), back.Users(), file.Rules(), file.Users())
		}
		topics := topicsOf(file)
		for _, w := range fuzzClients {
			c, cb := file.For(w.user, w.clientID, w.anonymous), back.For(w.user, w.clientID, w.anonymous)
			for _, tp := range topics {
				for _, a := range []Access{Read, Write} {
					got := c.Allow(a, []byte(tp))
					if want := mosquittoCheck(file, w, a, tp); got != want {
						t.Fatalf("%+v %v %q = %v, the oracle says %v\n%s", w, a, tp, got, want, in)
					}
					if cb.Allow(a, []byte(tp)) != got {
						t.Fatalf("%+v %v %q: String()'s file answers otherwise\n%s", w, a, tp, text)
					}
				}
			}
		}
	})
}

// topicsOf makes topic names from a file's first rules: wildcards filled
// in, %c and %u replaced by the fuzz clients' values and kept as text.
func topicsOf(f *File) []string {
	out := []string{"a", "$SYS/x", "public/x"}
	for i, r := range f.rules {
		if i == 16 {
			break
		}
		t := strings.ReplaceAll(r.filter, "+", "p")
		t = strings.TrimSuffix(strings.TrimSuffix(t, "#"), "/")
		if t == "" || t == "#" {
			t = "x"
		}
		out = append(out, t, t+"/more")
		for _, w := range fuzzClients[:2] {
			out = append(out, substitute(t, w))
		}
	}
	return out
}
