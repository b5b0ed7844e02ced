package topic

import "sync"

// Entry is one subscription held by a [Trie]: the subscriber's key and the
// value stored with it.
type Entry[K comparable, V any] struct {
	Key K
	Val V
}

// Trie indexes subscriptions by topic filter and finds every subscription
// matching a topic name. It holds at most one entry per (filter, key) pair.
//
// Filters are stored verbatim, level by level: a shared subscription must be
// split with [ParseShared] first and stored under its inner filter, with the
// share group folded into K (for example K = struct{ Group, Client string }),
// so that Match returns each group's members together.
//
// Filters are expected to have passed [ValidateFilter]; an invalid filter is
// stored and removed like any other, but what it matches is unspecified. The
// trie keeps substrings of the filters it is given.
//
// Match costs one node visit per level along each path the name can take
// (the literal level, and the '+' child where there is one), not one per
// subscription. It finds the name's levels and their keys in one pass, then
// looks children up in per-node tables keyed by those (see levelHasher in
// hash.go and kids.go). A node takes 128 bytes when K is a string and V a
// byte; the entries of a filter with one subscriber live inside its node.
//
// The zero value is an empty trie ready to use. A Trie must not be copied
// after first use. All methods are safe for concurrent use: Match, Lookup,
// Len and Walk take a read lock, Subscribe and Unsubscribe the write lock.
type Trie[K comparable, V any] struct {
	mu     sync.RWMutex
	root   node[K, V] // level "" above the first level; never holds entries
	hasher levelHasher
	seeded bool // hasher is keyed; set by the first Subscribe
	len    int  // entries
	nodes  int  // nodes below root, for tests of pruning
}

// New returns an empty trie; it is equivalent to new(Trie[K, V]).
func New[K comparable, V any]() *Trie[K, V] {
	return new(Trie[K, V])
}

// Len returns the number of entries, that is of (filter, key) pairs.
func (t *Trie[K, V]) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.len
}

// Subscribe stores val for (filter, key). If the pair is already present its
// value is replaced and replaced is true: in MQTT a new subscription with the
// same filter replaces the client's existing one [MQTT-3.8.4-3].
func (t *Trie[K, V]) Subscribe(filter string, key K, val V) (replaced bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.seeded {
		t.hasher, t.seeded = newLevelHasher(), true
	}
	n := &t.root
	for start := 0; ; {
		end, h := t.hasher.next(filter, start)
		n = t.descend(n, filter[start:end], h)
		if end == len(filter) {
			break
		}
		start = end + 1
	}
	if i := n.find(key); i >= 0 {
		n.entries[i].Val = val
		return true
	}
	n.add(key, val)
	t.len++
	return false
}

// Unsubscribe removes the entry for (filter, key) and reports whether there
// was one. Nodes left without entries or children are freed, so memory
// follows the live subscriptions, not their history.
func (t *Trie[K, V]) Unsubscribe(filter string, key K) (removed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.seeded || !t.unsubscribe(&t.root, filter, 0, key) {
		return false
	}
	t.len--
	return true
}

// Lookup returns the value stored for (filter, key), if any.
func (t *Trie[K, V]) Lookup(filter string, key K) (val V, ok bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	n := t.lookup(filter)
	if n == nil {
		return val, false
	}
	i := n.find(key)
	if i < 0 {
		return val, false
	}
	return n.entries[i].Val, true
}

// Match appends to dst every entry whose filter matches name, by the rules of
// [Match] (including the '$' rule), and returns the extended slice. A key
// subscribed through several matching filters appears once per filter; the
// order is unspecified. Match does not allocate when dst has room for the
// result.
func (t *Trie[K, V]) Match(name string, dst []Entry[K, V]) []Entry[K, V] {
	// No defer: Match is the hot path and the code below cannot panic on
	// a consistent trie.
	t.mu.RLock()
	dst = t.match(name, dst)
	t.mu.RUnlock()
	return dst
}

// match is Match under the read lock.
func (t *Trie[K, V]) match(name string, dst []Entry[K, V]) []Entry[K, V] {
	lv := nameLevels{name: name, hasher: &t.hasher}
	lv.scan()
	if len(name) > 0 && name[0] == '$' {
		// [MQTT-4.7.2-1]: '+' and '#' at the first level do not match
		// names starting with '$', so only the literal child can.
		c := t.root.childAt(&lv, 0)
		if c == nil {
			return dst
		}
		if lv.last(0) {
			return c.appendLeaf(dst)
		}
		return c.match(&lv, 1, dst)
	}
	return t.root.match(&lv, 0, dst)
}

// Walk calls fn for every entry with its filter, in unspecified order, until
// fn returns false. It holds the read lock throughout, so fn must not call
// any method of the same trie (a read lock taken again can deadlock behind a
// waiting writer). Walk allocates one filter string per node holding
// entries.
func (t *Trie[K, V]) Walk(fn func(filter string, e Entry[K, V]) bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	t.root.walk(make([]byte, 0, 64), true, fn)
}

// descend returns n's child for level, whose key is key, creating it if
// needed.
func (t *Trie[K, V]) descend(n *node[K, V], level string, key uint64) *node[K, V] {
	switch level {
	case "+":
		if n.plus == nil {
			n.plus = t.newNode(level)
		}
		return n.plus
	case "#":
		if n.hash == nil {
			n.hash = t.newNode(level)
		}
		return n.hash
	}
	if c := n.child(&t.hasher, key, level); c != nil {
		return c
	}
	c := t.newNode(level)
	n.addChild(&t.hasher, key, c)
	return c
}

func (t *Trie[K, V]) newNode(level string) *node[K, V] {
	t.nodes++
	return &node[K, V]{level: level}
}

// lookup returns the node holding filter's entries, or nil.
func (t *Trie[K, V]) lookup(filter string) *node[K, V] {
	if !t.seeded {
		return nil
	}
	n := &t.root
	for start := 0; n != nil; {
		end, key := t.hasher.next(filter, start)
		n = n.step(&t.hasher, filter[start:end], key)
		if end == len(filter) {
			return n
		}
		start = end + 1
	}
	return nil
}

// step returns n's child for a filter level, wildcard or literal, or nil.
func (n *node[K, V]) step(lh *levelHasher, level string, key uint64) *node[K, V] {
	switch level {
	case "+":
		return n.plus
	case "#":
		return n.hash
	}
	return n.child(lh, key, level)
}

// unsubscribe removes key from the node of filter[start:] below n, and
// frees the nodes on the way that are left empty.
func (t *Trie[K, V]) unsubscribe(n *node[K, V], filter string, start int, key K) bool {
	end, lkey := t.hasher.next(filter, start)
	level := filter[start:end]
	c := n.step(&t.hasher, level, lkey)
	if c == nil {
		return false
	}
	if end == len(filter) {
		i := c.find(key)
		if i < 0 {
			return false
		}
		c.remove(i)
	} else if !t.unsubscribe(c, filter, end+1, key) {
		return false
	}
	if c.empty() {
		switch c {
		case n.plus:
			n.plus = nil
		case n.hash:
			n.hash = nil
		default:
			n.removeChild(&t.hasher, lkey, c)
		}
		t.nodes--
	}
	return true
}

// match appends the entries of n's subtree matching name's levels from
// level d on, the levels after the ones n stands for.
func (n *node[K, V]) match(lv *nameLevels, d int, dst []Entry[K, V]) []Entry[K, V] {
	for {
		if d >= cachedLevels {
			return n.matchDeep(lv.hasher, lv.name, lv.end[cachedLevels-1]+1, dst)
		}
		if n.hash != nil {
			// '#' matches whatever levels remain.
			dst = appendEntries(dst, n.hash.entries)
		}
		var c *node[K, V]
		if n.nkids > 0 {
			if n.ext == nil || n.ext.kids == nil {
				// childAt's small case, inlined: most nodes have one or
				// two children.
				key := lv.key[d]
				for i := range n.small {
					if k := &n.small[i]; k.key == key && k.n != nil && (isShortKey(key) || k.n.level == lv.text(d)) {
						c = k.n
						break
					}
				}
			} else {
				c = n.childAt(lv, d)
			}
		}
		if lv.last(d) {
			if n.plus != nil {
				dst = n.plus.appendLeaf(dst)
			}
			if c != nil {
				dst = c.appendLeaf(dst)
			}
			return dst
		}
		if n.plus != nil {
			dst = n.plus.match(lv, d+1, dst)
		}
		if c == nil {
			return dst
		}
		n, d = c, d+1
	}
}

// matchDeep is match for the levels of a name past the first cachedLevels,
// which it finds and keys as it goes; start is where the level after the
// ones n stands for begins.
func (n *node[K, V]) matchDeep(lh *levelHasher, name string, start int, dst []Entry[K, V]) []Entry[K, V] {
	for {
		if n.hash != nil {
			dst = appendEntries(dst, n.hash.entries)
		}
		end, key := lh.next(name, start)
		c := n.child(lh, key, name[start:end])
		if end == len(name) {
			if n.plus != nil {
				dst = n.plus.appendLeaf(dst)
			}
			if c != nil {
				dst = c.appendLeaf(dst)
			}
			return dst
		}
		if n.plus != nil {
			dst = n.plus.matchDeep(lh, name, end+1, dst)
		}
		if c == nil {
			return dst
		}
		n, start = c, end+1
	}
}

// walk calls fn for the entries of n's subtree; path is n's filter.
func (n *node[K, V]) walk(path []byte, root bool, fn func(string, Entry[K, V]) bool) bool {
	if len(n.entries) > 0 {
		filter := string(path)
		for _, e := range n.entries {
			if !fn(filter, e) {
				return false
			}
		}
	}
	visit := func(c *node[K, V]) bool {
		p := path
		if !root {
			p = append(p, '/')
		}
		return c.walk(append(p, c.level...), false, fn)
	}
	if n.plus != nil && !visit(n.plus) {
		return false
	}
	if n.hash != nil && !visit(n.hash) {
		return false
	}
	for _, kids := range [][]kid[K, V]{n.small[:], n.table()} {
		for _, k := range kids {
			if k.n != nil && !visit(k.n) {
				return false
			}
		}
	}
	return true
}
