package load

import (
	"strings"
	"testing"
)

func TestMatchFilter(t *testing.T) {
	cases := []struct {
		filter, name string
		want         bool
	}{
		{"a/b/c", "a/b/c", true},
		{"a/b/c", "a/b", false},
		{"a/b", "a/b/c", false},
		{"a/+/c", "a/x/c", true},
		{"a/+/c", "a/x/y", false},
		{"a/+", "a/", true},
		{"+/+", "a/b", true},
		{"+", "a/b", false},
		{"a/#", "a", true},
		{"a/#", "a/b/c", true},
		{"#", "a/b", true},
		{"a/b/#", "a/c", false},
		{"bench/w/+/d3/+", "bench/w/s3/d3/t", true},
		{"bench/w/+/d3/+", "bench/w/s3/d13/t", false},
	}
	for _, c := range cases {
		if got := matchFilter(c.filter, c.name); got != c.want {
			t.Errorf("matchFilter(%q, %q) = %v, want %v", c.filter, c.name, got, c.want)
		}
	}
}

func TestPlanPairsAndFanout(t *testing.T) {
	p, err := newPlan(ScenarioPairs, "bench", 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.pubs) != 3 || len(p.subs) != 3 || p.pubs[2].clientID != "bench-p-2" || p.subs[2].clientID != "bench-s-2" ||
		p.subs[2].filters[0] != p.pubs[2].topic || p.pubs[2].fanout != 1 || p.subs[2].pubs[0] != 2 {
		t.Errorf("pairs plan: %+v", p)
	}
	p, err = newPlan(ScenarioFanout, "x", 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.pubs) != 1 || p.pubs[0].fanout != 4 || len(p.subs) != 4 || p.subs[3].filters[0] != "x/fanout" {
		t.Errorf("fan-out plan: %+v", p)
	}
	p, err = newPlan(ScenarioConnections, "x", 10, 0)
	if err != nil || p.idle != 10 || len(p.pubs)+len(p.subs) != 0 {
		t.Errorf("connections plan: %+v, %v", p, err)
	}
	if _, err := newPlan("nope", "x", 1, 1); err == nil || !strings.Contains(err.Error(), "unknown scenario") {
		t.Errorf("unknown scenario: err = %v", err)
	}
}

// TestPlanWildcards checks the wildcard mix: each kind of filter is
// present and the expected fan-out of each publisher is the number of
// filters that match its topic.
func TestPlanWildcards(t *testing.T) {
	p, err := newPlan(ScenarioWildcards, "bench", 50, 50)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	total := 0
	for _, s := range p.subs {
		f := s.filters[0]
		switch {
		case f == "bench/#":
			kinds["all"]++
		case strings.HasSuffix(f, "/#"):
			kinds["site#"]++
		case strings.Contains(f, "/+/d"):
			kinds["+dev+"]++
		case strings.Contains(f, "+"):
			kinds["site+"]++
		default:
			kinds["exact"]++
		}
		total += len(s.pubs)
	}
	want := map[string]int{"exact": 20, "site+": 10, "site#": 10, "+dev+": 5, "all": 5}
	for k, n := range want {
		if kinds[k] != n {
			t.Errorf("%d %s filters, want %d (all: %v)", kinds[k], k, n, kinds)
		}
	}
	fan := 0
	for i, pub := range p.pubs {
		fan += pub.fanout
		n := 0
		for _, s := range p.subs {
			if matchFilter(s.filters[0], pub.topic) {
				n++
			}
		}
		if n != pub.fanout {
			t.Errorf("publisher %d: fan-out %d, %d filters match", i, pub.fanout, n)
		}
	}
	// 20 exact (1 each) + 10 site+ and 10 site# (10 each) + 5 dev (1) + 5 all (50).
	if fan != total || fan != 20+100+100+5+250 {
		t.Errorf("deliveries per round: %d by publisher, %d by subscriber, want 475", fan, total)
	}
}
