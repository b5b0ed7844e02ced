package acl

import (
	"strings"
	"testing"
)

// who is a connected client.
type who struct {
	user, clientID string
	anonymous      bool
}

var (
	anon  = who{clientID: "anon-1", anonymous: true}
	alice = who{user: "acme-alice", clientID: "dev-1"}
	bob   = who{user: "acme-bob", clientID: "dev-2"}
	carol = who{user: "acme-carol", clientID: "dev-3"} // no section
)

// check is one question and its answer.
type check struct {
	who    who
	access Access
	topic  string
	want   bool
}

// matchCases: each file and what it answers; the file is also compared
// with Mosquitto itself in TestMosquittoAgrees.
var matchCases = []struct {
	name   string
	file   string
	checks []check
}{
	{
		name: "empty file denies everything",
		file: "",
		checks: []check{
			{anon, Read, "a", false}, {anon, Write, "a", false},
			{alice, Read, "a", false}, {alice, Write, "a", false},
		},
	},
	{
		name: "access words",
		file: "user acme-alice\ntopic read r/#\ntopic write w/#\ntopic readwrite rw/#\ntopic both/#\ntopic deny d/#\n",
		checks: []check{
			{alice, Read, "r/x", true}, {alice, Write, "r/x", false},
			{alice, Read, "w/x", false}, {alice, Write, "w/x", true},
			{alice, Read, "rw/x", true}, {alice, Write, "rw/x", true},
			{alice, Read, "both/x", true}, {alice, Write, "both/x", true},
			{alice, Read, "d/x", false}, {alice, Write, "d/x", false},
			{alice, Read, "other", false}, {alice, Write, "other", false},
		},
	},
	{
		name: "sections: anonymous, per user, no fallback",
		file: "topic readwrite anon/#\nuser acme-alice\ntopic readwrite alice/#\nuser acme-bob\ntopic readwrite bob/#\n",
		checks: []check{
			{anon, Write, "anon/x", true}, {anon, Write, "alice/x", false},
			{alice, Write, "alice/x", true}, {alice, Write, "bob/x", false}, {alice, Write, "anon/x", false},
			{bob, Read, "bob/x", true}, {bob, Read, "alice/x", false},
			{carol, Read, "anon/x", false}, {carol, Read, "alice/x", false},
		},
	},
	{
		name: "user sections add up",
		file: "user acme-alice\ntopic read a\nuser acme-bob\ntopic read b\nuser acme-alice\ntopic read c\n",
		checks: []check{
			{alice, Read, "a", true}, {alice, Read, "c", true}, {alice, Read, "b", false}, {bob, Read, "c", false},
		},
	},
	{
		name: "deny wins over grant in the section, whatever the order",
		file: "user acme-alice\ntopic read a/#\ntopic deny a/secret\ntopic deny b/secret\ntopic read b/#\ntopic deny c/+/x\ntopic readwrite c/#\n",
		checks: []check{
			{alice, Read, "a/x", true}, {alice, Read, "a/secret", false}, {alice, Read, "a/secret/more", true},
			{alice, Read, "b/x", true}, {alice, Read, "b/secret", false}, {alice, Read, "a", true},
			{alice, Write, "c/y", true}, {alice, Write, "c/y/x", false}, {alice, Read, "c/y/x", false}, {alice, Write, "c/y/x/z", true},
		},
	},
	{
		name: "wildcards",
		file: "user acme-alice\ntopic read a/+/c\ntopic read h/#\ntopic read p/+\ntopic read x/+/#\ntopic read /lead\ntopic read e//e\n",
		checks: []check{
			{alice, Read, "a/b/c", true}, {alice, Read, "a//c", true}, {alice, Read, "a/b/c/d", false}, {alice, Read, "a/c", false},
			{alice, Read, "h", true}, {alice, Read, "h/1/2/3", true}, {alice, Read, "hh", false},
			{alice, Read, "p/", true}, {alice, Read, "p", false}, {alice, Read, "p/1/2", false},
			{alice, Read, "x/1", true}, {alice, Read, "x", false}, {alice, Read, "x/1/2", true},
			{alice, Read, "/lead", true}, {alice, Read, "lead", false},
			{alice, Read, "e//e", true}, {alice, Read, "e/e", false},
		},
	},
	{
		name: "$ topics",
		file: "user acme-alice\ntopic readwrite #\nuser acme-bob\ntopic readwrite +/#\ntopic readwrite $SYS/#\ntopic readwrite $share/#\ntopic readwrite $app/#\n",
		checks: []check{
			{alice, Read, "a/b", true}, {alice, Read, "$SYS/broker/uptime", false}, {alice, Read, "$app/x", false},
			{bob, Read, "a/b", true}, {bob, Read, "$SYS/broker/uptime", true}, {bob, Write, "$SYS/broker/uptime", false},
			{bob, Write, "$SYSTEM/x", false}, {bob, Read, "$share/g/x", false}, {bob, Write, "$share/g/x", false},
			{bob, Read, "$app/x", true}, {bob, Write, "$app/x", true}, {bob, Write, "$other", false},
		},
	},
	{
		name: "patterns with %c and %u",
		file: "pattern readwrite dev/%c/#\npattern read users/%u/#\npattern write in/x%c-%u/y\npattern read lit/%x/%\n",
		checks: []check{
			{alice, Write, "dev/dev-1/status", true}, {alice, Write, "dev/dev-1", true}, {alice, Write, "dev/dev-2/status", false},
			{alice, Read, "users/acme-alice/inbox", true}, {alice, Write, "users/acme-alice/inbox", false}, {alice, Read, "users/acme-bob/inbox", false},
			{alice, Write, "in/xdev-1-acme-alice/y", true}, {alice, Write, "in/xdev-1-acme-bob/y", false}, {alice, Write, "in/dev-1-acme-alice/y", false},
			{alice, Read, "lit/%x/%", true},
			{anon, Write, "dev/anon-1/a", true}, {anon, Read, "users//inbox", false}, {anon, Read, "users/%u/inbox", false},
			{carol, Read, "users/acme-carol/x", true},
		},
	},
	{
		name: "the section decides before the patterns",
		file: "user acme-alice\ntopic read a/#\ntopic deny b/#\npattern deny a/%u\npattern read b/%u\npattern read c/%u\npattern deny c/%u/x\n",
		checks: []check{
			{alice, Read, "a/acme-alice", true}, // a section grant is final: the deny pattern is not reached
			{alice, Read, "b/acme-alice", false},
			{alice, Read, "c/acme-alice", true}, {alice, Read, "c/acme-alice/x", false},
			{bob, Read, "a/acme-bob", false}, {bob, Read, "b/acme-bob", true},
		},
	},
	{
		name: "a section rule without the access asked for goes on to the patterns",
		file: "user acme-alice\ntopic write a/#\npattern read a/%c\n",
		checks: []check{
			{alice, Read, "a/dev-1", true}, {alice, Write, "a/dev-1", true}, {alice, Read, "a/x", false},
		},
	},
	{
		name: "wildcards in identifiers turn patterns off",
		file: "user acme-alice\ntopic read own/#\npattern readwrite dev/%c/#\npattern read public/#\n",
		checks: []check{
			{who{"acme-alice", "dev-1", false}, Read, "public/x", true},
			{who{"acme-alice", "+", false}, Read, "dev/other/x", false},
			{who{"acme-alice", "#", false}, Read, "dev/x", false},
			{who{"acme-alice", "d#", false}, Read, "public/x", false},
			{who{"acme-alice", "a/b", false}, Read, "dev/a/b/x", false},
			{who{"acme-alice", "a/b", false}, Read, "public/x", false},
			{who{"acme-alice", "+", false}, Read, "own/x", true}, // the section still answers
			{who{"acme+x", "dev-1", false}, Read, "dev/dev-1/x", false},
			{who{"acme/x", "dev-1", false}, Read, "public/x", false},
			{who{"acme+x", "dev-1", true}, Read, "dev/dev-1/x", true}, // an anonymous client's user name is not looked at
		},
	},
	{
		name: "a pattern with %u is skipped for anonymous clients, deny included",
		file: "pattern deny x/%u\npattern read x/#\n",
		checks: []check{
			{anon, Read, "x/", true}, {anon, Read, "x/y", true}, {alice, Read, "x/acme-alice", false}, {alice, Read, "x/y", true},
		},
	},
	{
		name: "a substituted value may start with $",
		file: "pattern read %c/#\n",
		checks: []check{
			{who{"u", "$SYS", false}, Read, "$SYS/broker/uptime", true},
			{who{"u", "dev", false}, Read, "$SYS/broker/uptime", false},
		},
	},
	{
		name: "readme example",
		file: "topic read $SYS/#\n\nuser acme-alice\ntopic readwrite sensors/#\ntopic deny sensors/secret\n\npattern write devices/%c/status\npattern read users/%u/#\n",
		checks: []check{
			{anon, Read, "$SYS/broker/uptime", true}, {anon, Read, "sensors/x", false},
			{alice, Read, "sensors/x", true}, {alice, Write, "sensors/x", true}, {alice, Read, "sensors/secret", false},
			{alice, Write, "devices/dev-1/status", true}, {alice, Write, "devices/dev-2/status", false},
			{bob, Write, "devices/dev-2/status", true}, {bob, Read, "users/acme-bob/x", true}, {bob, Read, "sensors/x", false},
		},
	},
}

func TestAllow(t *testing.T) {
	for _, tc := range matchCases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse(strings.NewReader(tc.file))
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range tc.checks {
				cl := f.For(c.who.user, c.who.clientID, c.who.anonymous)
				if got := cl.Allow(c.access, []byte(c.topic)); got != c.want {
					t.Errorf("%+v %v %q = %v, want %v", c.who, c.access, c.topic, got, c.want)
				}
				// The oracle agrees with the table, so it is an oracle.
				if got := mosquittoCheck(f, c.who, c.access, c.topic); got != c.want {
					t.Errorf("oracle: %+v %v %q = %v, want %v", c.who, c.access, c.topic, got, c.want)
				}
				var got bool
				switch c.access {
				case Read:
					got = cl.AllowRead([]byte(c.topic))
				case Write:
					got = cl.AllowPublish([]byte(c.topic))
				}
				if got != c.want {
					t.Errorf("Allow%v %+v %q = %v, want %v", c.access, c.who, c.topic, got, c.want)
				}
			}
		})
	}
}

// TestAllowSubscribe: a subscription is granted when a read rule covers
// its filter, and no deny does; the deliveries are then checked one by
// one.
func TestAllowSubscribe(t *testing.T) {
	f, err := Parse(strings.NewReader("user acme-alice\ntopic read a/#\ntopic deny a/secret\ntopic read s/+/t\ntopic read $SYS/#\n" +
		"pattern read dev/%c/#\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := f.For(alice.user, alice.clientID, false)
	for filter, want := range map[string]bool{
		"a/#": true, "a": true, "a/+": true, "a/x/y": true, "a/+/#": true,
		"a/secret": false, "#": false, "+/x": false, "b/+": false,
		"s/x/t": true, "s/+/t": true, "s/#": false, "s/x/#": false, "s/x/+": false,
		"$SYS/#": true, "$SYS/broker": true, "$share/g/a/#": false,
		// Patterns are not the user's section: alice has one, so they
		// are asked only when it grants nothing.
		"dev/" + alice.clientID + "/x": true, "dev/+/x": false,
	} {
		if got := c.AllowSubscribe([]byte(filter)); got != want {
			t.Errorf("AllowSubscribe(%q) = %v, want %v", filter, got, want)
		}
	}
	anon, err := Parse(strings.NewReader("topic read #\n"))
	if err != nil {
		t.Fatal(err)
	}
	if ac := anon.For("", "x", true); !ac.AllowSubscribe([]byte("#")) || ac.AllowSubscribe([]byte("$SYS/#")) {
		t.Error("read # must cover # and not $SYS/#")
	}
	// What a subscriber of a/# receives.
	for topic, want := range map[string]bool{"a": true, "a/x": true, "a/secret": false, "a/secret/x": true} {
		if got := c.AllowRead([]byte(topic)); got != want {
			t.Errorf("AllowRead(%q) = %v, want %v", topic, got, want)
		}
	}
}

func TestAllowOddInput(t *testing.T) {
	f, err := Parse(strings.NewReader("topic readwrite #\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := f.For("", "x", true)
	if c.Allow(Read, nil) || c.Allow(Write, []byte{}) {
		t.Error("an empty topic is allowed")
	}
	if c.Allow(0, []byte("a")) {
		t.Error("no access asked for, yet allowed")
	}
	if !c.Allow(Read, []byte("a")) || !c.Allow(Write, []byte("a")) {
		t.Error("readwrite # does not allow a")
	}
	if Read.String() != "read" || Write.String() != "write" || Access(7).String() != "access(7)" {
		t.Errorf("Access strings: %v %v %v", Read, Write, Access(7))
	}
}
