package testlog

import (
	"fmt"
	"slices"
	"sync"
	"testing"
)

// TestBuffer: concurrent writers lose nothing, and Lines filters.
func TestBuffer(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 50 {
				fmt.Fprintf(&b, "w%d line %d\n", i, j)
			}
		})
	}
	wg.Wait()
	if n := len(b.Lines("line")); n != 400 {
		t.Fatalf("%d lines, want 400", n)
	}
	if got := b.Lines("w3 line 49"); !slices.Equal(got, []string{"w3 line 49"}) {
		t.Fatalf("Lines(w3 line 49) = %q", got)
	}
}
