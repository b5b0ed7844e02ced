package acl

import (
	"strconv"
	"strings"
	"sync/atomic"
)

// Access is what a client asks to do on a topic.
type Access uint8

const (
	// Read: receive a message published on the topic (MOSQ_ACL_READ).
	Read Access = Access(mRead)
	// Write: publish on the topic (MOSQ_ACL_WRITE).
	Write Access = Access(mWrite)
)

func (a Access) String() string {
	switch a {
	case Read:
		return "read"
	case Write:
		return "write"
	}
	return "access(" + strconv.Itoa(int(a)) + ")"
}

// Client answers for one connection: a user name (or none) and a client
// identifier, fixed at CONNECT. Safe for concurrent use.
type Client struct {
	acl         *ACL // nil when bound to one File
	id          ident
	anonymous   bool
	patternsOff bool // the identifier or user name holds '+', '#' or '/'
	view        atomic.Pointer[view]
}

// view is a client's part of one file.
type view struct {
	file    *File
	section *node
}

// For returns the checks of a client of the file in force: the user name
// as sent in CONNECT, or anonymous for a client without one (then user is
// ignored), and the client identifier (the one the broker assigned when the
// client sent none). After a Reload the client sees the new file.
func (a *ACL) For(user, clientID string, anonymous bool) *Client {
	c := newClient(user, clientID, anonymous)
	c.acl = a
	c.view.Store(c.viewOf(a.File()))
	return c
}

// For returns the checks of a client of this file, as ACL.For does, bound
// to this file for good.
func (f *File) For(user, clientID string, anonymous bool) *Client {
	c := newClient(user, clientID, anonymous)
	c.view.Store(c.viewOf(f))
	return c
}

func newClient(user, clientID string, anonymous bool) *Client {
	if anonymous {
		user = ""
	}
	return &Client{
		id:          ident{clientID: clientID, user: user, hasUser: !anonymous},
		anonymous:   anonymous,
		patternsOff: strings.ContainsAny(clientID, "+#/") || strings.ContainsAny(user, "+#/"),
	}
}

func (c *Client) viewOf(f *File) *view {
	return &view{file: f, section: f.section(c.id.user, c.anonymous)}
}

// current returns the client's view of the file in force, renewing it
// after a reload (the only allocation of a check).
func (c *Client) current() *view {
	v := c.view.Load()
	if c.acl == nil {
		return v
	}
	if f := c.acl.File(); f != v.file {
		v = c.viewOf(f)
		c.view.Store(v) // a racing check stores an equal view
	}
	return v
}

// AllowPublish reports whether the client may publish on topic, a valid
// topic name relative to its tenant. It does not allocate.
func (c *Client) AllowPublish(topic []byte) bool { return allow(c, Write, topic) }

// AllowRead reports whether the client may receive a message published on
// topic, a valid topic name relative to its tenant: the gateway asks before
// it sends each message, retained ones included. It does not allocate.
func (c *Client) AllowRead(topic []byte) bool { return allow(c, Read, topic) }

// AllowReadString is AllowRead of a topic held as a string (a delivery's
// event), without converting it.
func (c *Client) AllowReadString(topic string) bool { return allow(c, Read, topic) }

// AllowSubscribe reports whether the client may subscribe to filter, a
// valid topic filter relative to its tenant (the filter of a shared
// subscription without its "$share/group/"). Mosquitto 2.0's ACL file
// grants every subscription; Shoal answers it as Mosquitto 2.1's
// dynamic security does (mosquitto_sub_matches_acl): the client's section,
// then the patterns, each a deny first, must hold a read rule whose filter
// covers the subscription's, every topic it matches. With "topic read
// a/+/t" a subscription to a/x/t or a/+/t is granted, one to a/# is not.
// A deny of part of a granted filter ("topic deny a/secret" under "topic
// read a/#") leaves the subscription granted: AllowRead keeps those
// messages out. It does not allocate.
func (c *Client) AllowSubscribe(filter []byte) bool { return allowSubscribe(c, filter) }

// AllowSubscribeString is AllowSubscribe of a filter held as a string.
func (c *Client) AllowSubscribeString(filter string) bool { return allowSubscribe(c, filter) }

func allowSubscribe[T bytestring](c *Client, filter T) bool {
	if len(filter) == 0 || hasPrefix(filter, "$share") {
		return false
	}
	return decide(c, mask(Read), filter, cover[T])
}

// decide asks the rules as mosquitto_acl_check does: the client's section
// first, then the patterns, each answering with a deny before a grant of
// want. walk is match (topic names) or cover (subscription filters).
func decide[T bytestring](c *Client, want mask, t T, walk func(*node, T, int, *ident, mask) mask) bool {
	v := c.current()
	if v.section != nil {
		m := walk(v.section, t, 0, &c.id, 0)
		if m&mDeny != 0 {
			return false
		}
		if m&want != 0 {
			return true
		}
	}
	if v.file.patterns == nil || c.patternsOff {
		return false
	}
	m := walk(v.file.patterns, t, 0, &c.id, 0)
	return m&mDeny == 0 && m&want != 0
}

// hasPrefix is bytes.HasPrefix with a string prefix, without a conversion
// that allocates.
func hasPrefix[T bytestring](b T, prefix string) bool {
	return len(b) >= len(prefix) && string(b[:len(prefix)]) == prefix
}

// Allow reports whether the client has access a (Read or Write) to topic,
// following mosquitto_acl_check: the '$' topics first, then the client's
// section, then the patterns. It does not allocate.
func (c *Client) Allow(a Access, topic []byte) bool { return allow(c, a, topic) }

func allow[T bytestring](c *Client, a Access, topic T) bool {
	if len(topic) == 0 {
		return false
	}
	if topic[0] == '$' {
		// acl__check_dollar, by prefix as Mosquitto compares.
		if hasPrefix(topic, "$share") || (a == Write && hasPrefix(topic, "$SYS")) {
			return false
		}
	}
	return decide(c, mask(a), topic, match[T])
}
