package gateway

// partSet is a set of partitions of shoal.messages: partition p is bit
// p%64 of word p/64. The zero value is the empty set.
type partSet []uint64

// add puts p in the set.
func (s *partSet) add(p int32) {
	w := int(p / 64)
	if w >= len(*s) {
		*s = append(*s, make([]uint64, w+1-len(*s))...)
	}
	(*s)[w] |= 1 << (p % 64)
}

// addAll puts partitions 0 to n-1 in the set.
func (s *partSet) addAll(n int32) {
	for p := range n {
		s.add(p)
	}
}

// list returns the partitions in the set, in ascending order; nil when
// it is empty.
func (s partSet) list() []int32 {
	var ps []int32
	for w, bits := range s {
		for b := range int32(64) {
			if bits&(1<<b) != 0 {
				ps = append(ps, int32(w)*64+b)
			}
		}
	}
	return ps
}
