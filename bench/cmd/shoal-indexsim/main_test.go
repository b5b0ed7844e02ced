package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunSmall runs every phase at 2,000 concrete filters and checks the
// figures written: the index sizes, that each publish to a concrete
// filter's topic reached its one subscriber (so a filter sits in the
// shard its topic's publishes go to), and the README's tables.
func TestRunSmall(t *testing.T) {
	dir := t.TempDir()
	out, md, proc := filepath.Join(dir, "sim.json"), filepath.Join(dir, "res", "README.md"), filepath.Join(dir, "process.json")
	// The process's figures at the same size, so that the README compares.
	p := `{"date": "2026-12-07T00:57:19Z", "partitions": 4, "concrete_filters": 2000, "wildcard_filters": 200,
		"phases": [{"name": "subscribe-concrete", "router_heap_bytes_per_filter": 400},
			{"name": "subscribe-wildcard", "router_heap_bytes_per_filter": 4000}],
		"rebuild_s": 1.5, "router_heap_bytes": {"empty": 1000, "concrete_and_wildcard": 9000000, "rebuilt": 5000000}}`
	if err := os.WriteFile(proc, []byte(p), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	args := []string{"-partitions", "4", "-concrete", "2000", "-wildcard", "200", "-clients", "100",
		"-publishes", "500", "-batch", "64", "-out", out, "-readme", md, "-process", proc}
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var res result
	if err := readJSON(out, &res); err != nil {
		t.Fatal(err)
	}
	want := map[string]struct{ items, records, targets int }{
		"match-empty-one":     {500, 500, 0},
		"match-empty-outside": {500, 500, 0},
		"load-concrete":       {2000, 2000, 0},
		"load-wildcard":       {200, 800, 0},
		"match-full-one":      {500, 500, 500},
		"match-full-outside":  {500, 500, 0},
		"apply-concrete":      {2000, 2000, 0},
		"apply-wildcard":      {200, 800, 0},
	}
	if len(res.Phases) != len(want) {
		t.Errorf("%d phases, want %d", len(res.Phases), len(want))
	}
	for _, ph := range res.Phases {
		w, ok := want[ph.Name]
		if !ok {
			t.Errorf("unexpected phase %q", ph.Name)
			continue
		}
		if ph.Items != w.items || ph.Records != w.records || ph.Targets != w.targets {
			t.Errorf("%s: %d items, %d records, %d targets; want %d, %d, %d", ph.Name, ph.Items, ph.Records, ph.Targets, w.items, w.records, w.targets)
		}
		if strings.HasPrefix(ph.Name, "load") || strings.HasPrefix(ph.Name, "apply") {
			if ph.HeapPerItem <= 0 || ph.HeapAfter <= ph.HeapBefore {
				t.Errorf("%s: live heap %d to %d, %.0f B per filter; want it grown", ph.Name, ph.HeapBefore, ph.HeapAfter, ph.HeapPerItem)
			}
		}
	}
	if res.Flags.Concrete != 2000 || res.Flags.Apply != 2000 || !strings.Contains(res.Command, "-concrete 2000") {
		t.Errorf("flags %+v, command %q", res.Flags, res.Command)
	}
	b, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"## The figures", "| load-concrete | 2,000 | 2,000 |", "## Against the router process at 2,000 + 200", "400 B per filter subscribed"} {
		if !strings.Contains(string(b), s) {
			t.Errorf("README lacks %q:\n%s", s, b)
		}
	}
}

// TestShape pins the names to those of shoal-distbench's index ceiling
// (bench/load's connections scenario), which the figures compare with.
func TestShape(t *testing.T) {
	s := newShape(options{Partitions: 16, Concrete: 1_000_000, Wildcard: 100_000, Tenants: 1, Clients: 1000})
	for _, c := range []struct {
		kind                   string
		n                      int
		tenant, client, filter string
	}{
		{kindConcrete, 0, "bench", "bench-ixc-c-0", "bench-ixc/sub/0/0"},
		{kindConcrete, 1001, "bench", "bench-ixc-c-1", "bench-ixc/sub/1/1"},
		{kindWildcard, 99_999, "bench", "bench-ixw-c-999", "bench-ixw/sub/999/99/+"},
	} {
		tenant, client, filter, _ := s.filter(c.kind, c.n)
		if tenant != c.tenant || client != c.client || filter != c.filter {
			t.Errorf("filter %s %d: %q, %q, %q; want %q, %q, %q", c.kind, c.n, tenant, client, filter, c.tenant, c.client, c.filter)
		}
	}
	two := newShape(options{Partitions: 16, Concrete: 10, Wildcard: 0, Tenants: 2, Clients: 10})
	if tenant, client, _, _ := two.filter(kindConcrete, 3); tenant != "bench1" || client != "bench1-ixc-c-3" {
		t.Errorf("second tenant: %q, %q", tenant, client)
	}
}

func TestRunRefusesBadFlags(t *testing.T) {
	for _, bad := range [][]string{{"-concrete", "0"}, {"-partitions", "0"}, {"-apply", "20", "-concrete", "10"}, {"-tenants", "0"}, {"stray"}} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), bad, &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2; stderr %q", bad, code, stderr.String())
		}
	}
}
