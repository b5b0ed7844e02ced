package firstn

import "slices"

// Keeper keeps the n least items offered, by cmp, and counts the rest. A
// Keeper of n ≤ 0 keeps every item.
type Keeper[T any] struct {
	n       int
	cmp     func(a, b T) int
	items   []T
	offered int
}

// New returns a Keeper of the n least items by cmp.
func New[T any](n int, cmp func(a, b T) int) *Keeper[T] {
	k := &Keeper[T]{n: n, cmp: cmp}
	if n > 0 {
		k.items = make([]T, 0, n)
	}
	return k
}

// Offer offers v: kept when it is among the n least so far. Items offered
// in random order are kept about n·ln(offered/n) times, each a binary
// search and a move of at most n items.
func (k *Keeper[T]) Offer(v T) {
	k.offered++
	if k.n <= 0 {
		k.items = append(k.items, v)
		return
	}
	if len(k.items) == k.n && k.cmp(v, k.items[k.n-1]) >= 0 {
		return
	}
	i, _ := slices.BinarySearchFunc(k.items, v, k.cmp)
	if len(k.items) == k.n {
		k.items = k.items[:k.n-1]
	}
	k.items = slices.Insert(k.items, i, v)
}

// Result returns the items kept, in order, and whether others were
// offered beyond them.
func (k *Keeper[T]) Result() ([]T, bool) {
	if k.n <= 0 {
		slices.SortFunc(k.items, k.cmp)
	}
	return k.items, k.offered > len(k.items)
}
