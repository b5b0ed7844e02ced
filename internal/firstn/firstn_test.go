package firstn

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestKeeper: the items kept are the n least, in order, whatever order
// they come in, and more says whether others came.
func TestKeeper(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, total := range []int{0, 1, 5, 50, 51, 1000} {
		for _, n := range []int{0, 1, 50, 2000} {
			all := rng.Perm(total)
			k := New(n, cmp.Compare[int])
			for _, v := range all {
				k.Offer(v)
			}
			got, more := k.Result()
			want := slices.Sorted(slices.Values(all))
			if n > 0 && len(want) > n {
				want = want[:n]
			}
			if len(got)+len(want) > 0 && !slices.Equal(got, want) {
				t.Errorf("total %d, n %d: kept %v, want %v", total, n, got, want)
			}
			if wantMore := n > 0 && total > n; more != wantMore {
				t.Errorf("total %d, n %d: more %v, want %v", total, n, more, wantMore)
			}
		}
	}
}

func BenchmarkKeeper50Of10000(b *testing.B) {
	all := rand.New(rand.NewPCG(1, 2)).Perm(10000)
	for b.Loop() {
		k := New(50, cmp.Compare[int])
		for _, v := range all {
			k.Offer(v)
		}
		_, _ = k.Result()
	}
}
