package acl

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/shoal-mqtt/shoal/internal/mqtt/topic"
)

// mosquittoCheck is the oracle: mosquitto_acl_check and
// mosquitto_acl_check_default of Mosquitto 2.0 transcribed step by step
// over the parsed rules, with patterns substituted into strings and matched
// by topic.Match, not by the trie. The one change is the package's: '/' in
// an identifier turns patterns off as '+' and '#' do.
func mosquittoCheck(f *File, w who, a Access, t string) bool {
	return oracle(f, w, a, t, "+#/")
}

// mosquitto20Check is the oracle without that change: what Mosquitto 2.0
// itself answers.
func mosquitto20Check(f *File, w who, a Access, t string) bool {
	return oracle(f, w, a, t, "+#")
}

// oracle turns patterns off for identifiers holding any of dangerous.
func oracle(f *File, w who, a Access, t, dangerous string) bool {
	if t == "" {
		return false
	}
	// acl__check_dollar.
	if strings.HasPrefix(t, "$SYS") && a == Write || strings.HasPrefix(t, "$share") {
		return false
	}
	// The client's list, deny rules first (add__acl puts them in front).
	var list []rule
	for _, deny := range []bool{true, false} {
		for _, r := range f.rules {
			if r.pattern || (r.access == mDeny) != deny {
				continue
			}
			if (w.anonymous && r.anon) || (!w.anonymous && !r.anon && r.user == w.user) {
				list = append(list, r)
			}
		}
	}
	for _, r := range list {
		if mosquittoMatch(r.filter, t) {
			if r.access == mDeny {
				return false
			}
			if r.access&mask(a) != 0 {
				return true
			}
		}
	}
	var patterns []rule
	for _, deny := range []bool{true, false} {
		for _, r := range f.rules {
			if r.pattern && (r.access == mDeny) == deny {
				patterns = append(patterns, r)
			}
		}
	}
	if len(patterns) == 0 {
		return false
	}
	if strings.ContainsAny(w.clientID, dangerous) || (!w.anonymous && strings.ContainsAny(w.user, dangerous)) {
		return false
	}
	for _, r := range patterns {
		if strings.Contains(r.filter, "%u") && w.anonymous {
			continue
		}
		if mosquittoMatch(substitute(r.filter, w), t) {
			if r.access == mDeny {
				return false
			}
			if r.access&mask(a) != 0 {
				return true
			}
		}
	}
	return false
}

// substitute is Mosquitto's loop: "%c" and "%u" replaced left to right.
func substitute(filter string, w who) string {
	var b strings.Builder
	for i := 0; i < len(filter); i++ {
		if i < len(filter)-1 && filter[i] == '%' {
			switch {
			case filter[i+1] == 'c':
				b.WriteString(w.clientID)
				i++
				continue
			case filter[i+1] == 'u' && !w.anonymous:
				b.WriteString(w.user)
				i++
				continue
			}
		}
		b.WriteByte(filter[i])
	}
	return b.String()
}

// mosquittoMatch is mosquitto_topic_matches_sub's '$' rule (a filter and
// a topic match only if both or neither start with '$') and MQTT matching.
func mosquittoMatch(filter, t string) bool {
	if filter == "" || (filter[0] == '$') != (t[0] == '$') {
		return false
	}
	return topic.Match(filter, t)
}

// randomFile writes a file from a small vocabulary so that rules overlap.
func randomFile(rng *rand.Rand) string {
	levels := []string{"a", "b", "+", "%c", "%u", "x%cy", "$SYS", ""}
	words := []string{"", "read ", "write ", "readwrite ", "readwrite ", "deny "}
	users := []string{"u1", "u2", "u+", "u/x"}
	var b strings.Builder
	for range rng.IntN(16) {
		switch rng.IntN(6) {
		case 0:
			fmt.Fprintf(&b, "user %s\n", users[rng.IntN(len(users))])
			continue
		case 1, 2:
			b.WriteString("pattern ")
		default:
			b.WriteString("topic ")
		}
		b.WriteString(words[rng.IntN(len(words))])
		n := 1 + rng.IntN(3)
		for i := range n {
			if i > 0 {
				b.WriteByte('/')
			}
			l := levels[rng.IntN(len(levels))]
			if n == 1 && l == "" {
				l = "a"
			}
			b.WriteString(l)
		}
		if rng.IntN(3) == 0 {
			b.WriteString("/#")
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// probeTopics are topics that the random files' rules may match, for the
// identities of probeClients.
func probeTopics() []string {
	levels := []string{"a", "b", "c", "id1", "u1", "xid1y", "xu1y", "$SYS", "", "%c"}
	var out []string
	var gen func(prefix string, depth int)
	gen = func(prefix string, depth int) {
		for _, l := range levels {
			t := l
			if prefix != "" || depth > 0 {
				t = prefix + "/" + l
			}
			if t != "" {
				out = append(out, t)
			}
			if depth < 2 {
				gen(t, depth+1)
			}
		}
	}
	gen("", 0)
	return out
}

var probeClients = []who{
	{user: "u1", clientID: "id1"},
	{user: "u2", clientID: "id1"},
	{user: "u1", clientID: "id+"},
	{user: "u/x", clientID: "id1"},
	{user: "u+", clientID: "id1"},
	{clientID: "id1", anonymous: true},
	{user: "u1", clientID: ""},
	{user: "", clientID: "$SYS"},
}

// TestAgainstOracle compares the trie with the oracle on random files.
func TestAgainstOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	topics := probeTopics()
	files := 100
	if testing.Short() {
		files = 10
	}
	checked, allowed := 0, 0
	for range files {
		src := randomFile(rng)
		f, err := Parse(strings.NewReader(src))
		if err != nil {
			t.Fatalf("random file refused: %v\n%s", err, src)
		}
		n, y := compareWithOracle(t, f, src, topics)
		checked, allowed = checked+n, allowed+y
	}
	// The files must say yes and no often enough to tell answers apart.
	if allowed < checked/100 || allowed > checked/2 {
		t.Fatalf("%d of %d checks allowed: the random files are too one-sided", allowed, checked)
	}
	t.Logf("%d checks, %d allowed", checked, allowed)
}

// compareWithOracle checks every probe client on every topic and returns
// how many checks it made and how many were allowed.
func compareWithOracle(t *testing.T, f *File, src string, topics []string) (n, allowed int) {
	t.Helper()
	for _, w := range probeClients {
		c := f.For(w.user, w.clientID, w.anonymous)
		for _, tp := range topics {
			for _, a := range []Access{Read, Write} {
				n++
				got, want := c.Allow(a, []byte(tp)), mosquittoCheck(f, w, a, tp)
				if got != want {
					t.Fatalf("file:\n%s\n%+v %v %q = %v, the oracle says %v", src, w, a, tp, got, want)
				}
				if got {
					allowed++
				}
			}
		}
	}
	return n, allowed
}
