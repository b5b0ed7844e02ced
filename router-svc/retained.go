package routersvc

import (
	"strings"

	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// retained is one retained message: the Publish envelope that set it,
// owned by the shard and never modified (a new retained message replaces
// the pointer).
type retained struct {
	env       *eventspb.Envelope
	topic     string
	expiresMs int64 // Message.expires_at_ms; 0 never
	tenant    *tenant
	node      *rnode // where it is stored; nil once removed
	hidx      int    // index in the expiry heap, or -1
}

// expired reports whether the message has expired at nowMs.
func (r *retained) expired(nowMs int64) bool {
	return r.expiresMs != 0 && r.expiresMs < nowMs
}

func (r *retained) message() *eventspb.Message {
	return r.env.GetPublish().GetMessage()
}

// rnode is one level of a tenant's retained topic tree. A filter is
// matched by walking only the branches its levels select, so a new
// subscription costs the size of what it matches, not the number of
// retained topics.
type rnode struct {
	parent *rnode
	level  string
	kids   map[string]*rnode
	msg    *retained
}

// retainedTree holds a tenant's retained messages by topic.
type retainedTree struct {
	root rnode
	n    int
	sys  int // of n, those on topics starting with '$': the broker's ($SYS), not the tenant's (quota.go)
}

// get returns the retained message of name, or nil.
func (t *retainedTree) get(name string) *retained {
	n := &t.root
	for {
		level, rest, more := strings.Cut(name, "/")
		n = n.kids[level]
		if n == nil {
			return nil
		}
		if !more {
			return n.msg
		}
		name = rest
	}
}

// set stores r as the retained message of name, replacing any, and
// returns the one replaced.
func (t *retainedTree) set(name string, r *retained) *retained {
	n := &t.root
	for {
		level, rest, more := strings.Cut(name, "/")
		c := n.kids[level]
		if c == nil {
			if n.kids == nil {
				n.kids = make(map[string]*rnode)
			}
			c = &rnode{parent: n, level: level}
			n.kids[level] = c
		}
		n = c
		if !more {
			break
		}
		name = rest
	}
	old := n.msg
	if old == nil {
		t.n++
		if strings.HasPrefix(r.topic, "$") {
			t.sys++
		}
	} else {
		old.node = nil
	}
	n.msg, r.node = r, n
	return old
}

// remove deletes r, which is stored in the tree, and frees the nodes left
// empty.
func (t *retainedTree) remove(r *retained) {
	n := r.node
	if n == nil || n.msg != r {
		return
	}
	n.msg, r.node = nil, nil
	t.n--
	if strings.HasPrefix(r.topic, "$") {
		t.sys--
	}
	for n != &t.root && n.msg == nil && len(n.kids) == 0 {
		delete(n.parent.kids, n.level)
		n, n.parent = n.parent, nil
	}
}

// match appends to dst the retained messages whose topic filter matches,
// with the '$' rule: a first level of '+' or '#' does not match topics
// starting with '$'.
func (t *retainedTree) match(filter string, dst []*retained) []*retained {
	return t.root.match(filter, true, dst)
}

func (n *rnode) match(filter string, top bool, dst []*retained) []*retained {
	level, rest, more := strings.Cut(filter, "/")
	switch level {
	case "#":
		if !top && n.msg != nil {
			// The parent rule: "a/#" matches "a".
			dst = append(dst, n.msg)
		}
		for name, c := range n.kids {
			if top && strings.HasPrefix(name, "$") {
				continue
			}
			dst = c.all(dst)
		}
		return dst
	case "+":
		for name, c := range n.kids {
			if top && strings.HasPrefix(name, "$") {
				continue
			}
			dst = c.matchRest(rest, more, dst)
		}
		return dst
	}
	if c := n.kids[level]; c != nil {
		dst = c.matchRest(rest, more, dst)
	}
	return dst
}

// matchRest continues a match at n, the node of the level just matched.
func (n *rnode) matchRest(rest string, more bool, dst []*retained) []*retained {
	if !more {
		if n.msg != nil {
			dst = append(dst, n.msg)
		}
		return dst
	}
	return n.match(rest, false, dst)
}

// all appends every retained message of n's subtree.
func (n *rnode) all(dst []*retained) []*retained {
	if n.msg != nil {
		dst = append(dst, n.msg)
	}
	for _, c := range n.kids {
		dst = c.all(dst)
	}
	return dst
}

// expiryHeap is a min-heap by expiry time of the retained messages that
// expire, indexed (retained.hidx) so that a message replaced or deleted
// leaves the heap at once.
type expiryHeap []*retained

func (h *expiryHeap) push(r *retained) {
	r.hidx = len(*h)
	*h = append(*h, r)
	h.up(r.hidx)
}

// remove takes r out of the heap if it is in it.
func (h *expiryHeap) remove(r *retained) {
	i := r.hidx
	if i < 0 || i >= len(*h) || (*h)[i] != r {
		return
	}
	a := *h
	last := len(a) - 1
	if i != last {
		h.swap(i, last)
	}
	a[last] = nil
	*h = a[:last]
	r.hidx = -1
	if i != last {
		h.down(i)
		h.up(i)
	}
}

// peek returns the message that expires first, or nil.
func (h expiryHeap) peek() *retained {
	if len(h) == 0 {
		return nil
	}
	return h[0]
}

func (h expiryHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hidx, h[j].hidx = i, j
}

func (h expiryHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h[p].expiresMs <= h[i].expiresMs {
			return
		}
		h.swap(p, i)
		i = p
	}
}

func (h expiryHeap) down(i int) {
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h) && h[l].expiresMs < h[m].expiresMs {
			m = l
		}
		if r < len(h) && h[r].expiresMs < h[m].expiresMs {
			m = r
		}
		if m == i {
			return
		}
		h.swap(i, m)
		i = m
	}
}
