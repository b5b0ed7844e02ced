package topic

import "math/bits"

// A node's literal children sit in node.small while there are at most
// smallKids of them, and otherwise in node.ext.kids, an open-addressing hash
// table with linear probing indexed by levelHasher.slot. The table is a
// power of two in size and at most half full, so probes are short and always
// end at an empty slot; deletes shift entries back instead of leaving
// tombstones; the table shrinks when mostly empty and goes back to small at
// one child, so churn does not grow it.

// kid is one child slot; n is nil for an empty slot.
type kid[K comparable, V any] struct {
	key uint64 // the child's level key, see levelHasher
	n   *node[K, V]
}

// table returns n's child table, or nil while the children are in small.
func (n *node[K, V]) table() []kid[K, V] {
	if n.ext == nil {
		return nil
	}
	return n.ext.kids
}

// child returns the literal child for level, whose key is key, or nil.
func (n *node[K, V]) child(lh *levelHasher, key uint64, level string) *node[K, V] {
	kids := n.table()
	if kids == nil {
		for i := range n.small {
			if k := &n.small[i]; k.key == key && k.n != nil && (isShortKey(key) || k.n.level == level) {
				return k.n
			}
		}
		return nil
	}
	mask := uint64(len(kids) - 1)
	for i := lh.slot(key, n.ext.shift); ; i = (i + 1) & mask {
		k := &kids[i]
		if k.n == nil {
			return nil
		}
		if k.key == key && (isShortKey(key) || k.n.level == level) {
			return k.n
		}
	}
}

// childAt is child for level d of a name being matched. It repeats child so
// that Match cuts the level's text out of the name only when a long key has
// to be confirmed.
func (n *node[K, V]) childAt(lv *nameLevels, d int) *node[K, V] {
	key := lv.key[d]
	kids := n.table()
	if kids == nil {
		for i := range n.small {
			if k := &n.small[i]; k.key == key && k.n != nil && (isShortKey(key) || k.n.level == lv.text(d)) {
				return k.n
			}
		}
		return nil
	}
	mask := uint64(len(kids) - 1)
	for i := lv.hasher.slot(key, n.ext.shift); ; i = (i + 1) & mask {
		k := &kids[i]
		if k.n == nil {
			return nil
		}
		if k.key == key && (isShortKey(key) || k.n.level == lv.text(d)) {
			return k.n
		}
	}
}

// addChild inserts c, whose level has key key and is not yet a child.
func (n *node[K, V]) addChild(lh *levelHasher, key uint64, c *node[K, V]) {
	k := kid[K, V]{key: key, n: c}
	n.nkids++
	switch kids := n.table(); {
	case kids == nil && int(n.nkids) <= smallKids:
		for i := range n.small {
			if n.small[i].n == nil {
				n.small[i] = k
				return
			}
		}
	case kids == nil:
		n.resizeKids(lh, 4*smallKids)
	case int(n.nkids)*2 > len(kids):
		n.resizeKids(lh, 2*len(kids))
	}
	n.insertKid(lh, k)
}

// removeChild deletes the child c, whose level has key key.
func (n *node[K, V]) removeChild(lh *levelHasher, key uint64, c *node[K, V]) {
	n.nkids--
	kids := n.table()
	if kids == nil {
		for i := range n.small {
			if n.small[i].n == c {
				n.small[i] = kid[K, V]{}
				return
			}
		}
		panic("topic: removing a child that is not there")
	}
	mask := uint64(len(kids) - 1)
	shift := n.ext.shift
	i := lh.slot(key, shift)
	for kids[i].n != c {
		i = (i + 1) & mask
	}
	// Backward-shift deletion: move later entries of the probe run into
	// the hole unless that would put them before their home slot.
	for j := (i + 1) & mask; kids[j].n != nil; j = (j + 1) & mask {
		home := lh.slot(kids[j].key, shift)
		if (j-home)&mask >= (j-i)&mask {
			kids[i] = kids[j]
			i = j
		}
	}
	kids[i] = kid[K, V]{}
	switch {
	case n.nkids <= 1:
		n.ext.kids, n.ext.shift = nil, 0
		n.tidyExt()
		for _, k := range kids {
			if k.n != nil {
				n.small[0] = k
			}
		}
	case len(kids) > 4*smallKids && int(n.nkids)*8 <= len(kids):
		n.resizeKids(lh, len(kids)/2)
	}
}

// resizeKids moves the children, from small or the old table, into a new
// table of size slots, a power of two.
func (n *node[K, V]) resizeKids(lh *levelHasher, size int) {
	if n.ext == nil {
		n.ext = new(nodeExt[K, V])
	}
	old := n.ext.kids
	n.ext.kids = make([]kid[K, V], size)
	n.ext.shift = uint8(64 - bits.TrailingZeros(uint(size)))
	for _, k := range old {
		if k.n != nil {
			n.insertKid(lh, k)
		}
	}
	for i, k := range n.small {
		if k.n != nil {
			n.insertKid(lh, k)
			n.small[i] = kid[K, V]{}
		}
	}
}

func (n *node[K, V]) insertKid(lh *levelHasher, k kid[K, V]) {
	kids := n.ext.kids
	mask := uint64(len(kids) - 1)
	i := lh.slot(k.key, n.ext.shift)
	for kids[i].n != nil {
		i = (i + 1) & mask
	}
	kids[i] = k
}
