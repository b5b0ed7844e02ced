package acl

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoal-mqtt/shoal/internal/testutil/testfile"
)

// hundredRules is a file in which acme-alice (client dev-1) has 100 rules:
// 60 topic lines of her own (literal, '+', '#', deny) and 40 patterns;
// other users' sections make the file bigger.
func hundredRules() string {
	var b strings.Builder
	b.WriteString("topic read public/#\n")
	for u := range 20 {
		fmt.Fprintf(&b, "user acme-user%d\n", u)
		for i := range 10 {
			fmt.Fprintf(&b, "topic readwrite user%d/area%d/#\n", u, i)
		}
	}
	b.WriteString("user acme-alice\n")
	for i := range 20 {
		fmt.Fprintf(&b, "topic read plant/line%d/+/temperature\n", i)
		fmt.Fprintf(&b, "topic write plant/line%d/cmd/#\n", i)
	}
	for i := range 10 {
		fmt.Fprintf(&b, "topic readwrite shared/room%d/#\n", i)
		fmt.Fprintf(&b, "topic deny shared/room%d/admin/#\n", i)
	}
	for i := range 10 {
		fmt.Fprintf(&b, "pattern readwrite devices/%%c/channel%d/#\n", i)
		fmt.Fprintf(&b, "pattern read users/%%u/inbox%d\n", i)
		fmt.Fprintf(&b, "pattern write tenants/x/%%u-%%c/out%d/+\n", i)
		fmt.Fprintf(&b, "pattern deny devices/%%c/channel%d/secret\n", i)
	}
	return b.String()
}

var allocCases = []struct {
	name   string
	access Access
	topic  string
	want   bool
}{
	{"publish allowed by the section", Write, "plant/line17/cmd/start/now", true},
	{"publish allowed by a pattern", Write, "devices/dev-1/channel7/data", true},
	{"publish denied by a pattern", Write, "devices/dev-1/channel7/secret", false},
	{"publish denied, no rule", Write, "nowhere/to/be/found", false},
	{"publish denied by the section", Write, "shared/room3/admin/x", false},
	{"read allowed by the section", Read, "plant/line9/press2/temperature", true},
	{"read allowed by a pattern", Read, "users/acme-alice/inbox4", true},
	{"read denied, access", Read, "plant/line17/cmd/start", false},
	{"read denied, $SYS", Read, "$SYS/broker/uptime", false},
}

func TestHundredRulesFile(t *testing.T) {
	f, err := Parse(strings.NewReader(hundredRules()))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range f.rules {
		if r.pattern || r.user == "acme-alice" {
			n++
		}
	}
	if n != 100 {
		t.Fatalf("acme-alice has %d rules, want 100", n)
	}
	c := f.For("acme-alice", "dev-1", false)
	for _, tc := range allocCases {
		if got := c.Allow(tc.access, []byte(tc.topic)); got != tc.want {
			t.Errorf("%s: Allow(%v, %q) = %v, want %v", tc.name, tc.access, tc.topic, got, tc.want)
		}
	}
}

// TestAllowAllocations: a check allocates nothing, allowed or denied, also
// through an ACL after a reload (only the first check after it does).
func TestAllowAllocations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acl")
	testfile.Replace(t, path, hundredRules())
	a, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	viaACL := a.For("acme-alice", "dev-1", false)
	viaFile := a.File().For("acme-alice", "dev-1", false)
	for round := range 2 {
		for _, tc := range allocCases {
			topic := []byte(tc.topic)
			for name, c := range map[string]*Client{"acl": viaACL, "file": viaFile} {
				var got bool
				allocs := testing.AllocsPerRun(100, func() {
					if tc.access == Write {
						got = c.AllowPublish(topic)
					} else {
						got = c.AllowRead(topic)
					}
				})
				if got != tc.want {
					t.Errorf("round %d %s %s: %v, want %v", round, name, tc.name, got, tc.want)
				}
				if allocs != 0 {
					t.Errorf("round %d %s %s: %.1f allocations per check, want 0", round, name, tc.name, allocs)
				}
				if tc.access == Read {
					if allocs := testing.AllocsPerRun(100, func() { got = c.AllowSubscribe(topic) }); allocs != 0 {
						t.Errorf("round %d %s %s: %.1f allocations per subscribe check, want 0", round, name, tc.name, allocs)
					}
					s := tc.topic
					if allocs := testing.AllocsPerRun(100, func() { got = c.AllowReadString(s) || c.AllowSubscribeString(s) }); allocs != 0 {
						t.Errorf("round %d %s %s: %.1f allocations per check of a string, want 0", round, name, tc.name, allocs)
					}
					if c.AllowReadString(s) != tc.want {
						t.Errorf("round %d %s %s: AllowReadString %v, want %v", round, name, tc.name, !tc.want, tc.want)
					}
				}
			}
		}
		if err := a.Reload(); err != nil {
			t.Fatal(err)
		}
	}
}

func BenchmarkAllowPublish(b *testing.B) {
	path := filepath.Join(b.TempDir(), "acl")
	if err := os.WriteFile(path, []byte(hundredRules()), 0o600); err != nil {
		b.Fatal(err)
	}
	a, err := Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	c := a.For("acme-alice", "dev-1", false)
	for _, tc := range allocCases {
		if tc.access != Write {
			continue
		}
		topic := []byte(tc.topic)
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if c.AllowPublish(topic) != tc.want {
					b.Fatal("wrong answer")
				}
			}
		})
	}
}

func BenchmarkAllowRead(b *testing.B) {
	f, err := Parse(strings.NewReader(hundredRules()))
	if err != nil {
		b.Fatal(err)
	}
	c := f.For("acme-alice", "dev-1", false)
	topic := []byte("users/acme-alice/inbox4")
	b.ReportAllocs()
	for b.Loop() {
		if !c.AllowRead(topic) {
			b.Fatal("wrong answer")
		}
	}
}
