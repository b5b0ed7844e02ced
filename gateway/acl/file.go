package acl

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/shoal-mqtt/shoal/internal/mqtt/topic"
)

// Bounds on what Parse reads.
const (
	// MaxLineLen is the longest line, without its '\n': room for the
	// longest filter or user name MQTT allows (65535 bytes) with its keyword,
	// access word and blanks.
	MaxLineLen = 65 << 10
	// MaxFileSize is the longest file.
	MaxFileSize = 16 << 20
	// maxSeparators is Mosquitto's TOPIC_HIERARCHY_LIMIT: a filter with more
	// '/' is invalid there.
	maxSeparators = 200
)

// mask is what a rule does: grant read, grant write, or deny.
type mask uint8

const (
	mRead  mask = 1 << iota // MOSQ_ACL_READ
	mWrite                  // MOSQ_ACL_WRITE
	mDeny                   // MOSQ_ACL_NONE: the rule denies
)

// rule is one topic or pattern line, kept for File.String and the tests.
type rule struct {
	line    int
	pattern bool   // a pattern line (else a topic line)
	anon    bool   // a topic line of the anonymous section
	user    string // a topic line's section, when not anon
	access  mask
	filter  string
}

// File is a parsed ACL file. It is immutable and safe for concurrent use.
type File struct {
	anon     *node            // the anonymous section; nil when it is empty
	users    map[string]*node // each user's section
	patterns *node            // the pattern lines; nil when there are none
	rules    []rule
}

// LineError is a line the parser refused: its 1-based number and why.
type LineError struct {
	Line   int
	Reason string
}

func (e *LineError) Error() string { return fmt.Sprintf("acl line %d: %s", e.Line, e.Reason) }

// errTooBig reports a file longer than MaxFileSize.
var errTooBig = fmt.Errorf("acl file longer than %d bytes", MaxFileSize)

// Parse reads an ACL file (the package documentation describes the format).
// An error for a line is a *LineError.
func Parse(r io.Reader) (*File, error) {
	cr := &countingReader{r: io.LimitReader(r, MaxFileSize+1)}
	sc := bufio.NewScanner(cr)
	sc.Buffer(make([]byte, 0, 4096), MaxLineLen+1) // the line and its '\n'
	p := parser{f: &File{users: make(map[string]*node)}}
	for sc.Scan() {
		p.line++
		if cr.n > MaxFileSize {
			return nil, errTooBig
		}
		if err := p.parseLine(sc.Text()); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			if cr.n > MaxFileSize {
				return nil, errTooBig
			}
			return nil, &LineError{p.line + 1, fmt.Sprintf("longer than %d bytes", MaxLineLen)}
		}
		return nil, fmt.Errorf("read acl: %w", err)
	}
	if cr.n > MaxFileSize {
		return nil, errTooBig
	}
	return p.f, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// parser holds the state between lines: the current section.
type parser struct {
	f       *File
	line    int
	user    string
	hasUser bool // a "user" line was read: topic lines go to user
}

func (p *parser) fail(format string, args ...any) error {
	return &LineError{p.line, fmt.Sprintf(format, args...)}
}

// isSpace is C's isspace, which Mosquitto trims lines and fields with.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func trimSpace(s string) string {
	for len(s) > 0 && isSpace(s[0]) {
		s = s[1:]
	}
	for len(s) > 0 && isSpace(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

// nextField splits s at its first run of spaces, as strtok_r(s, " ")
// does: the field, and the rest after the spaces that end it.
func nextField(s string) (field, rest string) {
	s = strings.TrimLeft(s, " ")
	field, rest, _ = strings.Cut(s, " ")
	return field, strings.TrimLeft(rest, " ")
}

// quote shows text from the file in an error, cut to a readable length.
func quote(s string) string {
	const max = 64
	if len(s) > max {
		return fmt.Sprintf("%q…", s[:max])
	}
	return fmt.Sprintf("%q", s)
}

func (p *parser) parseLine(s string) error {
	s = trimSpace(s)
	if s == "" || s[0] == '#' {
		return nil
	}
	if strings.IndexByte(s, 0) >= 0 {
		return p.fail("contains a NUL byte")
	}
	keyword, rest := nextField(s)
	switch keyword {
	case "user":
		name := trimSpace(rest)
		switch {
		case name == "":
			return p.fail("user without a name")
		case !utf8.ValidString(name):
			return p.fail("user name is not valid UTF-8")
		case len(name) > topic.MaxLen:
			return p.fail("user name longer than %d bytes", topic.MaxLen)
		}
		p.user, p.hasUser = name, true
		return nil
	case "topic", "pattern":
		return p.parseRule(keyword == "pattern", rest)
	}
	if strings.ContainsFunc(keyword, func(r rune) bool { return r < 0x80 && isSpace(byte(r)) }) {
		return p.fail("unknown keyword %s: fields are separated by spaces", quote(keyword))
	}
	return p.fail("unknown keyword %s (want topic, pattern or user)", quote(keyword))
}

// parseAccess reads an access word.
func parseAccess(s string) (mask, bool) {
	switch s {
	case "read":
		return mRead, true
	case "write":
		return mWrite, true
	case "readwrite":
		return mRead | mWrite, true
	case "deny":
		return mDeny, true
	}
	return 0, false
}

// accessWord is the access word of m.
func accessWord(m mask) string {
	switch m {
	case mRead:
		return "read"
	case mWrite:
		return "write"
	case mRead | mWrite:
		return "readwrite"
	}
	return "deny"
}

// parseRule reads what follows "topic" or "pattern": an optional access
// word and the filter, the rest of the line.
func (p *parser) parseRule(pattern bool, s string) error {
	kind := "topic"
	if pattern {
		kind = "pattern"
	}
	first, rest := nextField(s)
	var access mask
	var filter string
	switch {
	case first == "":
		return p.fail("%s without a filter", kind)
	case rest == "":
		// One field: the filter, granting readwrite (Mosquitto).
		if _, ok := parseAccess(first); ok {
			return p.fail("%s %s without a filter (Mosquitto would take %s for the filter)", kind, first, quote(first))
		}
		if strings.ContainsAny(first, "\t\v\f\r") {
			return p.fail("%s %s: a blank that is not a space; fields are separated by spaces (write the access word before the filter)", kind, quote(first))
		}
		access, filter = mRead|mWrite, first
	default:
		a, ok := parseAccess(first)
		if !ok {
			return p.fail("unknown access %s (want read, write, readwrite or deny)", quote(first))
		}
		access, filter = a, trimSpace(rest)
	}
	if err := topic.ValidateFilter(filter); err != nil {
		return p.fail("bad filter %s: %v", quote(filter), err)
	}
	if strings.Count(filter, "/") > maxSeparators {
		return p.fail("bad filter %s: more than %d levels", quote(filter), maxSeparators+1)
	}
	r := rule{line: p.line, pattern: pattern, access: access, filter: filter}
	f := p.f
	switch {
	case pattern:
		if f.patterns == nil {
			f.patterns = &node{}
		}
		f.patterns.insert(filter, access, true)
	case p.hasUser:
		r.user = p.user
		n := f.users[p.user]
		if n == nil {
			n = &node{}
			f.users[p.user] = n
		}
		n.insert(filter, access, false)
	default:
		r.anon = true
		if f.anon == nil {
			f.anon = &node{}
		}
		f.anon.insert(filter, access, false)
	}
	f.rules = append(f.rules, r)
	return nil
}

// Rules returns the number of topic and pattern lines.
func (f *File) Rules() int { return len(f.rules) }

// Users returns the number of users with a section.
func (f *File) Users() int { return len(f.users) }

// section returns the trie of topic lines that applies to a client: the
// user's, or the anonymous section's. Nil when there is none.
func (f *File) section(user string, anonymous bool) *node {
	if anonymous {
		return f.anon
	}
	return f.users[user]
}

// String writes the file's rules back in ACL file syntax, one section
// after the other (anonymous first, then each user in the order of its
// first line, then the patterns), each rule with its access word. Parsing
// the result gives a file with the same answers.
func (f *File) String() string {
	var b strings.Builder
	word := accessWord
	for _, r := range f.rules {
		if r.anon {
			fmt.Fprintf(&b, "topic %s %s\n", word(r.access), r.filter)
		}
	}
	done := make(map[string]bool)
	for _, r := range f.rules {
		if r.pattern || r.anon || done[r.user] {
			continue
		}
		done[r.user] = true
		fmt.Fprintf(&b, "user %s\n", r.user)
		for _, q := range f.rules {
			if !q.pattern && !q.anon && q.user == r.user {
				fmt.Fprintf(&b, "topic %s %s\n", word(q.access), q.filter)
			}
		}
	}
	for _, r := range f.rules {
		if r.pattern {
			fmt.Fprintf(&b, "pattern %s %s\n", word(r.access), r.filter)
		}
	}
	return b.String()
}
