package topic

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzMatch checks Trie.Match against the reference Match over every
// filter. The first input is a set of filters separated by U+0000 (which no
// valid filter contains); invalid filters and names are skipped.
func FuzzMatch(f *testing.F) {
	for _, tt := range matchTests {
		f.Add(tt.filter, tt.name)
	}
	f.Add("sport/tennis/player1/#\x00sport/#\x00#\x00+/+\x00/+\x00sport/+\x00$SYS/#", "sport/tennis/player1")
	f.Add("+/+\x00/+\x00+\x00#\x00/#", "/finance")
	f.Add("#\x00+/monitor/Clients\x00$SYS/#\x00$SYS/monitor/+", "$SYS/monitor/Clients")
	f.Add("a/b\x00a/b\x00a/+\x00a/+\x00a/#\x00a/#\x00+/#\x00+/b", "a/b")
	f.Add("a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/#\x00a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/+/q/+/s\x00+/+/+/+/+/+/+/+/+/+/+/+/+/+/+/+/+/+/+", "a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s")
	f.Add("t1/site/s1/device/d1/status\x00t1/site/s1/device/+/status\x00+/site/s1/device/d1/cmd\x00t1/site/s1/#", "t1/site/s1/device/d1/status")
	f.Fuzz(checkFilterSet)
}

// checkFilterSet is the body of FuzzMatch: filterSet holds filters separated
// by U+0000.
func checkFilterSet(t *testing.T, filterSet, name string) {
	// Long inputs add nothing the short ones miss (levels longer than
	// a word, names deeper than cachedLevels) and slow minimization.
	if len(filterSet) > 4096 || len(name) > 1024 || ValidateName(name) != nil {
		return
	}
	filters := strings.Split(filterSet, "\x00")
	if len(filters) > 64 {
		filters = filters[:64]
	}
	tr := New[string, int]()
	m := model{}
	for i, filter := range filters {
		if ValidateFilter(filter) != nil {
			continue
		}
		// Three keys, so repeated filters replace and overlapping
		// filters share a key.
		key := "k" + strconv.Itoa(i%3)
		fk := [2]string{filter, key}
		_, had := m[fk]
		if got := tr.Subscribe(filter, key, i); got != had {
			t.Fatalf("Subscribe(%q, %q) replaced = %v, want %v", filter, key, got, had)
		}
		m[fk] = i
	}
	checkMatch(t, tr, m, name)

	// Drop about a third, match again, then drop the rest.
	fks := make([][2]string, 0, len(m))
	for fk := range m {
		fks = append(fks, fk)
	}
	slices.SortFunc(fks, func(a, b [2]string) int {
		return strings.Compare(a[0]+"\x00"+a[1], b[0]+"\x00"+b[1])
	})
	for i, fk := range fks {
		if i%3 == 2 {
			if !tr.Unsubscribe(fk[0], fk[1]) {
				t.Fatalf("Unsubscribe(%q, %q) found nothing", fk[0], fk[1])
			}
			delete(m, fk)
		}
	}
	checkMatch(t, tr, m, name)
	checkInvariants(t, tr)
	for fk := range m {
		if !tr.Unsubscribe(fk[0], fk[1]) {
			t.Fatalf("Unsubscribe(%q, %q) found nothing", fk[0], fk[1])
		}
	}
	if n := checkInvariants(t, tr); n != 0 || tr.Len() != 0 {
		t.Fatalf("after unsubscribing all: %d nodes, Len %d", n, tr.Len())
	}
}

// naiveValidName and naiveValidFilter restate §4.7 by splitting into levels,
// independently of the byte scanners in validate.go.
func naiveValidName(s string) bool {
	return s != "" && len(s) <= MaxLen && !strings.ContainsAny(s, "+#\x00") && utf8.ValidString(s)
}

func naiveValidFilter(s string) bool {
	if s == "" || len(s) > MaxLen || strings.ContainsRune(s, 0) || !utf8.ValidString(s) {
		return false
	}
	levels := strings.Split(s, "/")
	for i, l := range levels {
		if strings.Contains(l, "#") && (l != "#" || i != len(levels)-1) {
			return false
		}
		if strings.Contains(l, "+") && l != "+" {
			return false
		}
	}
	return true
}

// FuzzValidate checks that the validators never panic, agree with the
// naive ones, and that every valid filter round-trips through the trie.
func FuzzValidate(f *testing.F) {
	for _, tt := range filterTests {
		if len(tt.in) < 1000 {
			f.Add(tt.in)
		}
	}
	for _, tt := range sharedTests {
		if len(tt.in) < 1000 {
			f.Add(tt.in)
		}
	}
	for _, tt := range matchTests {
		f.Add(tt.name)
	}
	f.Fuzz(func(t *testing.T, s string) {
		nameErr := ValidateName(s)
		if (nameErr == nil) != naiveValidName(s) {
			t.Fatalf("ValidateName(%q) = %v, naive says valid = %v", s, nameErr, naiveValidName(s))
		}
		filterErr := ValidateFilter(s)
		if (filterErr == nil) != naiveValidFilter(s) {
			t.Fatalf("ValidateFilter(%q) = %v, naive says valid = %v", s, filterErr, naiveValidFilter(s))
		}
		if nameErr == nil && filterErr != nil {
			t.Fatalf("%q is a valid name but not a valid filter: %v", s, filterErr)
		}

		group, inner, shared, err := ParseShared(s)
		wantGroup, wantInner, wantShared, wantOK := naiveParseShared(s)
		if shared != wantShared || (err == nil) != wantOK {
			t.Fatalf("ParseShared(%q) = shared %v, err %v; naive: shared %v, ok %v", s, shared, err, wantShared, wantOK)
		}
		if err == nil && (group != wantGroup || inner != wantInner) {
			t.Fatalf("ParseShared(%q) = %q, %q; naive %q, %q", s, group, inner, wantGroup, wantInner)
		}
		if err != nil && (group != "" || inner != "") {
			t.Fatalf("ParseShared(%q) returned %q, %q with error %v", s, group, inner, err)
		}
		if err != nil && !isFilterError(err) {
			t.Fatalf("ParseShared(%q) error %v is not a topic filter error", s, err)
		}
		if filterErr != nil && !isFilterError(filterErr) {
			t.Fatalf("ValidateFilter(%q) error %v is not a topic filter error", s, filterErr)
		}

		checkLevels(t, newLevelHasher(), s)
		_ = Match(s, s) // must not panic, whatever s is
		if nameErr == nil && !Match(s, s) {
			t.Fatalf("name %q does not match itself", s)
		}
		for _, filter := range []string{s, inner} {
			if filter == "" || ValidateFilter(filter) != nil {
				continue
			}
			tr := New[string, int]()
			tr.Subscribe(filter, "k", 1)
			if v, ok := tr.Lookup(filter, "k"); !ok || v != 1 || tr.Len() != 1 {
				t.Fatalf("Lookup(%q) after Subscribe = %d, %v; Len %d", filter, v, ok, tr.Len())
			}
			if nameErr == nil && filter == s && len(tr.Match(s, nil)) != 1 {
				t.Fatalf("trie with %q does not match it as a name", s)
			}
			if !tr.Unsubscribe(filter, "k") {
				t.Fatalf("Unsubscribe(%q) found nothing", filter)
			}
			if n := checkInvariants(t, tr); n != 0 || tr.Len() != 0 {
				t.Fatalf("filter %q left %d nodes, Len %d", filter, n, tr.Len())
			}
		}
	})
}

func naiveParseShared(s string) (group, inner string, shared, ok bool) {
	rest, shared := strings.CutPrefix(s, "$share/")
	if !shared {
		return "", s, false, naiveValidFilter(s)
	}
	group, inner, found := strings.Cut(rest, "/")
	ok = found && len(s) <= MaxLen && group != "" && !strings.ContainsAny(group, "+#\x00") &&
		utf8.ValidString(group) && naiveValidFilter(inner)
	return group, inner, true, ok
}

func isFilterError(err error) bool {
	var te *Error
	return errors.As(err, &te) && te.ReasonCode() == ReasonFilterInvalid
}
