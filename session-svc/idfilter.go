package sessionsvc

import "hash/maphash"

// idFilter is a set of client keys that may answer "maybe" for a key never
// added (a few % of them: each filter about 1 %) but never "no" for one
// added: a partition's filter holds every client it has stored a session
// of, so that recall does not read the store for a client never seen. It
// grows as a series of bloom filters, each twice the size of the one
// before, filled one after the other: 1.25 bytes per key it has room for,
// which is at most twice the keys it holds.
type idFilter struct {
	seed  maphash.Seed
	parts []*bloom
}

// bloom is one filter of an idFilter: m bits, k probes, room for n keys.
type bloom struct {
	bits  []uint64
	m     uint64 // bits
	n, at int    // room, keys added
}

const (
	filterFirst  = 1 << 12 // keys of the first filter
	filterBits   = 10      // bits per key: about 1 % false answers with 7 probes
	filterProbes = 7
)

func newIDFilter() *idFilter { return &idFilter{seed: maphash.MakeSeed()} }

func (f *idFilter) hash(k clientKey) uint64 {
	var h maphash.Hash
	h.SetSeed(f.seed)
	h.WriteString(k.tenant)
	// A separator, so that tenant "a", client "bc" and "ab", "c" differ. A
	// tenant holding NUL could still meet another key's bytes; that only
	// adds a "maybe" (a read), never a "no" for a key added.
	h.WriteByte(0)
	h.WriteString(k.client)
	return h.Sum64()
}

// add adds k.
func (f *idFilter) add(k clientKey) {
	last := len(f.parts) - 1
	if last < 0 || f.parts[last].at >= f.parts[last].n {
		n := filterFirst
		if last >= 0 {
			n = 2 * f.parts[last].n
		}
		words := (n*filterBits + 63) / 64
		f.parts = append(f.parts, &bloom{bits: make([]uint64, words), m: uint64(words) * 64, n: n})
		last++
	}
	b := f.parts[last]
	h := f.hash(k)
	h1, h2 := h, h>>32|1
	for i := range uint64(filterProbes) {
		bit := (h1 + i*h2) % b.m
		b.bits[bit/64] |= 1 << (bit % 64)
	}
	b.at++
}

// mayHold reports whether k may have been added: false only when it never
// was.
func (f *idFilter) mayHold(k clientKey) bool {
	if len(f.parts) == 0 {
		return false
	}
	h := f.hash(k)
	h1, h2 := h, h>>32|1
	for _, b := range f.parts {
		hit := true
		for i := range uint64(filterProbes) {
			bit := (h1 + i*h2) % b.m
			if b.bits[bit/64]&(1<<(bit%64)) == 0 {
				hit = false
				break
			}
		}
		if hit {
			return true
		}
	}
	return false
}
