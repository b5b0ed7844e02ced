package acl

import "strings"

// node is a level of a trie of rule filters. The masks of the rules whose
// filter ends at a node are kept there: end for a filter that ends with
// this level, hash for one that goes on with "/#".
type node struct {
	keys  []string         // literal next levels
	kids  []*node          // and their nodes
	lit   map[string]*node // the same, when there are more than smallFanout
	plus  *node            // a '+' next level
	tmpls []tmplEdge       // pattern levels holding %c or %u
	end   mask
	hash  mask
}

// smallFanout: up to this many literal next levels are compared one by one,
// which is quicker than hashing the level.
const smallFanout = 8

// bytestring is a topic as the gateway has it: a []byte of a packet or
// a string of an event. The matchers take either without converting it,
// which would allocate.
type bytestring interface{ ~string | ~[]byte }

// child returns the literal next level, or nil.
func child[T bytestring](n *node, level T) *node {
	if n.lit != nil {
		return n.lit[string(level)]
	}
	for i, k := range n.keys {
		if string(level) == k {
			return n.kids[i]
		}
	}
	return nil
}

// indexByte is bytes.IndexByte for a bytestring.
func indexByte[T bytestring](t T, c byte) int {
	for i := 0; i < len(t); i++ {
		if t[i] == c {
			return i
		}
	}
	return -1
}

// addChild returns the literal next level, added when missing.
func (n *node) addChild(level string) *node {
	if c := child(n, level); c != nil {
		return c
	}
	c := &node{}
	n.keys, n.kids = append(n.keys, level), append(n.kids, c)
	if n.lit != nil {
		n.lit[level] = c
	} else if len(n.keys) > smallFanout {
		n.lit = make(map[string]*node, len(n.keys))
		for i, k := range n.keys {
			n.lit[k] = n.kids[i]
		}
	}
	return c
}

// tmplEdge is a pattern level holding %c or %u: it matches a topic level
// equal to its parts with the client's values in place.
type tmplEdge struct {
	level string // as written, to share the edge between rules
	parts []part
	next  *node
}

// part of a template level: literal text, or the client identifier ('c')
// or user name ('u').
type part struct {
	ref byte
	s   string
}

// ident is what a pattern's %c and %u stand for.
type ident struct {
	clientID string
	user     string
	hasUser  bool
}

// insert adds a valid filter with the rule's mask. In a pattern, levels
// holding %c or %u become template edges.
func (n *node) insert(filter string, m mask, pattern bool) {
	for {
		level, rest, more := strings.Cut(filter, "/")
		switch {
		case level == "#":
			n.hash |= m
			return
		case level == "+":
			if n.plus == nil {
				n.plus = &node{}
			}
			n = n.plus
		case pattern && hasRef(level):
			n = n.tmpl(level)
		default:
			n = n.addChild(level)
		}
		if !more {
			n.end |= m
			return
		}
		filter = rest
	}
}

func (n *node) tmpl(level string) *node {
	for i := range n.tmpls {
		if n.tmpls[i].level == level {
			return n.tmpls[i].next
		}
	}
	e := tmplEdge{level: level, parts: splitRefs(level), next: &node{}}
	n.tmpls = append(n.tmpls, e)
	return e.next
}

// hasRef reports whether a pattern level substitutes anything.
func hasRef(level string) bool {
	for i := 0; i+1 < len(level); i++ {
		if level[i] == '%' && (level[i+1] == 'c' || level[i+1] == 'u') {
			return true
		}
	}
	return false
}

// splitRefs cuts a pattern level into literal text, %c and %u, scanning
// left to right as Mosquitto's substitution loop does: "%c" and "%u" are
// replaced, any other '%' is itself.
func splitRefs(level string) []part {
	var parts []part
	lit := 0
	for i := 0; i < len(level); i++ {
		if level[i] != '%' || i+1 == len(level) || (level[i+1] != 'c' && level[i+1] != 'u') {
			continue
		}
		if lit < i {
			parts = append(parts, part{s: level[lit:i]})
		}
		parts = append(parts, part{ref: level[i+1]})
		i++
		lit = i + 1
	}
	if lit < len(level) {
		parts = append(parts, part{s: level[lit:]})
	}
	return parts
}

// matches reports whether a topic level equals the template with id's
// values in place. A %u never matches without a user name (Mosquitto skips
// such a pattern for a client without one).
func tmplMatches[T bytestring](e *tmplEdge, level T, id *ident) bool {
	for _, p := range e.parts {
		s := p.s
		switch p.ref {
		case 'c':
			s = id.clientID
		case 'u':
			if !id.hasUser {
				return false
			}
			s = id.user
		}
		if len(level) < len(s) || string(level[:len(s)]) != s {
			return false
		}
		level = level[len(s):]
	}
	return len(level) == 0
}

// match returns acc with the masks of every rule whose filter matches the
// topic t from the level starting at i (i > len(t): every level is
// consumed). It stops early once a deny is found. It does not allocate.
func match[T bytestring](n *node, t T, i int, id *ident, acc mask) mask {
	if i > len(t) {
		return acc | n.end | n.hash
	}
	// [MQTT-4.7.2-1]: a leading wildcard does not match a '$' topic.
	dollar := i == 0 && len(t) > 0 && t[0] == '$'
	if !dollar {
		acc |= n.hash
	}
	if acc&mDeny != 0 {
		return acc
	}
	j := indexByte(t[i:], '/')
	if j < 0 {
		j = len(t)
	} else {
		j += i
	}
	level := t[i:j]
	if c := child(n, level); c != nil {
		if acc = match(c, t, j+1, id, acc); acc&mDeny != 0 {
			return acc
		}
	}
	if n.plus != nil && !dollar {
		if acc = match(n.plus, t, j+1, id, acc); acc&mDeny != 0 {
			return acc
		}
	}
	for k := range n.tmpls {
		e := &n.tmpls[k]
		if tmplMatches(e, level, id) {
			if acc = match(e.next, t, j+1, id, acc); acc&mDeny != 0 {
				return acc
			}
		}
	}
	return acc
}

// cover returns acc with the masks of every rule whose filter covers the
// topic filter f from the level starting at i: matches every topic name
// f matches. A literal level of f is covered as match covers a topic
// level; a '+' only by a '+' (or a '#' above it); a '#' only by a '#'. It
// stops early once a deny is found. It does not allocate.
func cover[T bytestring](n *node, f T, i int, id *ident, acc mask) mask {
	if i > len(f) {
		return acc | n.end | n.hash
	}
	// [MQTT-4.7.2-1]: a leading wildcard does not match a '$' topic.
	dollar := i == 0 && len(f) > 0 && f[0] == '$'
	if !dollar {
		acc |= n.hash
	}
	if acc&mDeny != 0 {
		return acc
	}
	j := indexByte(f[i:], '/')
	if j < 0 {
		j = len(f)
	} else {
		j += i
	}
	level := f[i:j]
	switch string(level) {
	case "#":
		return acc // only a rule's '#' here covers it: taken above
	case "+":
		if n.plus != nil {
			acc = cover(n.plus, f, j+1, id, acc)
		}
		return acc
	}
	if c := child(n, level); c != nil {
		if acc = cover(c, f, j+1, id, acc); acc&mDeny != 0 {
			return acc
		}
	}
	if n.plus != nil && !dollar {
		if acc = cover(n.plus, f, j+1, id, acc); acc&mDeny != 0 {
			return acc
		}
	}
	for k := range n.tmpls {
		e := &n.tmpls[k]
		if tmplMatches(e, level, id) {
			if acc = cover(e.next, f, j+1, id, acc); acc&mDeny != 0 {
				return acc
			}
		}
	}
	return acc
}
