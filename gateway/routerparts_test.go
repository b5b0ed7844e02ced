package gateway

import (
	"slices"
	"testing"
)

func TestPartSet(t *testing.T) {
	var s partSet
	if s.list() != nil {
		t.Fatalf("empty set lists %v", s.list())
	}
	for _, p := range []int32{130, 3, 64, 3, 0} {
		s.add(p)
	}
	if got, want := s.list(), []int32{0, 3, 64, 130}; !slices.Equal(got, want) {
		t.Errorf("list %v, want %v", got, want)
	}
	var all partSet
	all.addAll(70)
	if got := all.list(); len(got) != 70 || got[0] != 0 || got[69] != 69 {
		t.Errorf("addAll(70) lists %d partitions: %v", len(got), got)
	}
}
