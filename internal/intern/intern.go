package intern

import "strings"

// Table maps a string to its kept copy. It keeps at most its limit of
// strings; beyond that it returns a fresh copy each time, so that a flood
// of distinct values cannot grow it. A Table is not safe for concurrent
// use.
type Table struct {
	m     map[string]string
	limit int
}

// New returns a table that keeps up to limit strings.
func New(limit int) *Table { return &Table{m: make(map[string]string), limit: limit} }

// Get returns a copy of s that the caller may keep (s may alias a buffer
// that is reused): the table's own, which it makes when s is new and it
// has room.
func (t *Table) Get(s string) string {
	if s == "" {
		return ""
	}
	if k, ok := t.m[s]; ok {
		return k
	}
	k := strings.Clone(s)
	if len(t.m) < t.limit {
		t.m[k] = k
	}
	return k
}
