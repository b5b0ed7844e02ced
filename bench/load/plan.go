package load

import (
	"fmt"
	"slices"
	"strings"
)

// Scenario names.
const (
	ScenarioPairs       = "pairs"
	ScenarioFanout      = "fanout"
	ScenarioConnections = "connections"
	ScenarioWildcards   = "wildcards"
	ScenarioLatency     = "latency"
	// ScenarioOffline is pairs of persistent sessions whose subscribers
	// are offline while their publishers send Config.Queued messages
	// each, then come back for them.
	ScenarioOffline = "offline"
)

// Scenarios lists the scenario names, for flag help.
func Scenarios() []string {
	return []string{ScenarioPairs, ScenarioFanout, ScenarioConnections, ScenarioWildcards, ScenarioLatency, ScenarioOffline}
}

// pubSpec is one publisher of a plan.
type pubSpec struct {
	clientID string
	topic    string
	fanout   int // subscribers that should receive each of its messages
}

// subSpec is one subscriber of a plan.
type subSpec struct {
	clientID string
	filters  []string
	pubs     []uint32 // indexes of the publishers it should hear, sorted
}

// plan is who connects and what they publish and subscribe to.
type plan struct {
	pubs []pubSpec
	subs []subSpec
	idle int // connections that only connect (scenario connections)
}

// wildcardSites is the number of sites in the wildcard scenario's topic
// tree bench/w/s<site>/d<device>/t.
const wildcardSites = 5

// wildcardFilter returns subscriber j's filter in the wildcard mix, for
// npub publishers: of every 10 subscribers, 4 subscribe to one device's
// topic, 2 to a site's devices with '+', 2 to a site with '#', 1 to a
// device in any site with two '+', and 1 to everything with '#'.
func wildcardFilter(root string, j, npub int) string {
	dev := j % npub
	switch k := j % 10; {
	case k < 4:
		return fmt.Sprintf("%s/w/s%d/d%d/t", root, dev%wildcardSites, dev)
	case k < 6:
		return fmt.Sprintf("%s/w/s%d/+/t", root, j%wildcardSites)
	case k < 8:
		return fmt.Sprintf("%s/w/s%d/#", root, j%wildcardSites)
	case k == 8:
		return fmt.Sprintf("%s/w/+/d%d/+", root, dev)
	}
	return root + "/#"
}

// newPlan builds the plan of a scenario. n is the number of pairs, of
// fan-out subscribers, of idle connections, or of wildcard subscribers;
// npub the number of wildcard publishers.
func newPlan(scenario, prefix string, n, npub int) (plan, error) {
	if n < 1 {
		return plan{}, fmt.Errorf("scenario %s: need at least 1 client, got %d", scenario, n)
	}
	pubID := func(i int) string { return fmt.Sprintf("%s-p-%d", prefix, i) }
	subID := func(i int) string { return fmt.Sprintf("%s-s-%d", prefix, i) }
	var p plan
	switch scenario {
	case ScenarioPairs, ScenarioLatency, ScenarioOffline:
		for i := range n {
			t := fmt.Sprintf("%s/pairs/%d", prefix, i)
			p.pubs = append(p.pubs, pubSpec{clientID: pubID(i), topic: t, fanout: 1})
			p.subs = append(p.subs, subSpec{clientID: subID(i), filters: []string{t}, pubs: []uint32{uint32(i)}})
		}
	case ScenarioFanout:
		t := prefix + "/fanout"
		p.pubs = []pubSpec{{clientID: pubID(0), topic: t, fanout: n}}
		for i := range n {
			p.subs = append(p.subs, subSpec{clientID: subID(i), filters: []string{t}, pubs: []uint32{0}})
		}
	case ScenarioWildcards:
		if npub < 1 {
			return plan{}, fmt.Errorf("scenario %s: need at least 1 publisher, got %d", scenario, npub)
		}
		for i := range npub {
			t := fmt.Sprintf("%s/w/s%d/d%d/t", prefix, i%wildcardSites, i)
			p.pubs = append(p.pubs, pubSpec{clientID: pubID(i), topic: t})
		}
		for j := range n {
			f := wildcardFilter(prefix, j, npub)
			s := subSpec{clientID: subID(j), filters: []string{f}}
			for i := range p.pubs {
				if matchFilter(f, p.pubs[i].topic) {
					s.pubs = append(s.pubs, uint32(i))
					p.pubs[i].fanout++
				}
			}
			p.subs = append(p.subs, s)
		}
	case ScenarioConnections:
		p.idle = n
	default:
		return plan{}, fmt.Errorf("unknown scenario %q (want one of %s)", scenario, strings.Join(Scenarios(), ", "))
	}
	for _, s := range p.subs {
		if !slices.IsSorted(s.pubs) {
			return plan{}, fmt.Errorf("scenario %s: publishers of %s not sorted", scenario, s.clientID)
		}
	}
	return p, nil
}

// matchFilter reports whether an MQTT topic filter matches a topic name
// (no '$' topics here). It is the generator's own matcher, independent of
// the broker's, so that expected delivery counts are not computed by the
// code under test.
func matchFilter(filter, name string) bool {
	for {
		f, frest, fmore := strings.Cut(filter, "/")
		if f == "#" {
			return true
		}
		n, nrest, nmore := strings.Cut(name, "/")
		if f != "+" && f != n {
			return false
		}
		switch {
		case !fmore && !nmore:
			return true
		case !nmore:
			return frest == "#" // "a/#" matches "a"
		case !fmore:
			return false
		}
		filter, name = frest, nrest
	}
}
