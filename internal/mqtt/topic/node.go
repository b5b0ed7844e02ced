package topic

// node is one level of a filter. Its literal children are found by level
// key (see levelHasher): in small while there are at most smallKids of
// them, in a hash table in ext beyond that. The '+' and '#' children have
// dedicated fields so that Match never looks them up.
//
// The fields are ordered for Match: the first 64 bytes hold what it reads at
// every node it passes through, the next 64 what it reads at a node whose
// entries it collects. With K a string and V a byte a node is 128 bytes,
// and the Go allocator places 128-byte objects on 128-byte boundaries, so
// each group is one cache line (TestNodeLayout checks the sizes).
type node[K comparable, V any] struct {
	hash  *node[K, V]    // the '#' child, a leaf: '#' is always the last level
	plus  *node[K, V]    // the '+' child
	ext   *nodeExt[K, V] // nil unless a child table or an entry index is needed
	nkids int32          // literal children, in small or in ext.kids
	small [smallKids]kid[K, V]

	entries []Entry[K, V]  // iterated by Match; backed by one while it holds one
	one     [1]Entry[K, V] // holds the only entry, saving an allocation and a cache miss
	level   string         // "+" or "#" for the wildcard nodes
}

// nodeExt holds the parts of a node that few nodes need.
type nodeExt[K comparable, V any] struct {
	kids  []kid[K, V] // hash table of the literal children once there are more than smallKids
	shift uint8       // 64 - log2(len(kids))
	index map[K]int   // key → position in entries, once len(entries) > indexAt
}

// smallKids is how many literal children a node holds without a table.
const smallKids = 2

// indexAt is the number of entries a node holds before it keeps a K→index
// map; below it a linear scan of the entry slice is as fast and saves the
// map's memory on the common node with one or two subscribers.
const indexAt = 8

func (n *node[K, V]) empty() bool {
	return len(n.entries) == 0 && n.nkids == 0 && n.plus == nil && n.hash == nil
}

// tidyExt drops ext once it holds nothing.
func (n *node[K, V]) tidyExt() {
	if n.ext != nil && n.ext.kids == nil && n.ext.index == nil {
		n.ext = nil
	}
}

func (n *node[K, V]) find(key K) int {
	if n.ext != nil && n.ext.index != nil {
		if i, ok := n.ext.index[key]; ok {
			return i
		}
		return -1
	}
	for i := range n.entries {
		if n.entries[i].Key == key {
			return i
		}
	}
	return -1
}

// add appends a new entry. cap(n.entries) == 1 exactly when the entries
// live in n.one: append grows a slice to a capacity of at least 2.
func (n *node[K, V]) add(key K, val V) {
	e := Entry[K, V]{Key: key, Val: val}
	if len(n.entries) == 0 {
		n.one[0] = e
		n.entries = n.one[:]
		return
	}
	inline := cap(n.entries) == 1
	n.entries = append(n.entries, e)
	if inline {
		n.one[0] = Entry[K, V]{} // moved out; release what it points to
	}
	switch {
	case n.ext != nil && n.ext.index != nil:
		n.ext.index[key] = len(n.entries) - 1
	case len(n.entries) > indexAt:
		if n.ext == nil {
			n.ext = new(nodeExt[K, V])
		}
		n.ext.index = make(map[K]int, len(n.entries))
		for i := range n.entries {
			n.ext.index[n.entries[i].Key] = i
		}
	}
}

// remove swap-removes entry i, keeping the index in step.
func (n *node[K, V]) remove(i int) {
	last := len(n.entries) - 1
	if n.ext != nil && n.ext.index != nil {
		index := n.ext.index
		delete(index, n.entries[i].Key)
		if i != last {
			index[n.entries[last].Key] = i
		}
		if last <= indexAt/2 {
			n.ext.index = nil
			n.tidyExt()
		}
	}
	n.entries[i] = n.entries[last]
	n.entries[last] = Entry[K, V]{} // release what K and V point to
	n.entries = n.entries[:last]
	switch {
	case last == 0:
		n.entries = nil
	case last == 1 && cap(n.entries) > 1:
		n.one[0] = n.entries[0]
		n.entries = n.one[:]
	case cap(n.entries) >= 32 && last*4 <= cap(n.entries):
		n.entries = append(make([]Entry[K, V], 0, 2*last), n.entries...)
	}
}

// appendLeaf appends the entries matching a name whose last level is n: n's
// own and, by the parent rule, those of n's '#' child.
func (n *node[K, V]) appendLeaf(dst []Entry[K, V]) []Entry[K, V] {
	dst = appendEntries(dst, n.entries)
	if n.hash != nil {
		dst = appendEntries(dst, n.hash.entries)
	}
	return dst
}

// appendEntries is append(dst, es...), faster for the few entries a node
// usually holds: it appends them one by one rather than calling the
// runtime's bulk copy, which pays off only for longer runs.
func appendEntries[K comparable, V any](dst, es []Entry[K, V]) []Entry[K, V] {
	for i := range es { //nolint:staticcheck // S1011: append(dst, es...) calls typedslicecopy, slower for 1-2 entries
		dst = append(dst, es[i])
	}
	return dst
}
