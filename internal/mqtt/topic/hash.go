package topic

import (
	"math/bits"
	"math/rand/v2"
	"strings"
)

// A level is identified in its parent's child table by a 64-bit key. A
// level of at most 7 bytes is its own key: its bytes, little-endian, with
// its length in the top byte, so comparing keys compares such levels
// exactly, without reading the level's text from memory. A longer level's
// key is a keyed hash of its bytes with the top byte set to 0xff, so it
// never equals a short key, and a key match is confirmed by comparing the
// text. Finding a level's end and its key is one pass over the name, a word
// at a time.
//
// The slot of a key in a table of 2^b slots is the top b bits of
// (key^s0)*s1 for random s0 and odd s1: multiplicative universal hashing,
// so a client choosing topic names cannot aim them at one slot. One
// levelHasher, and so one pair of secrets, serves a whole trie.
type levelHasher struct {
	s0, s1 uint64
}

// newLevelHasher returns a hasher with fresh random secrets.
func newLevelHasher() levelHasher {
	return levelHasher{s0: rand.Uint64(), s1: rand.Uint64() | 1}
}

const (
	hashP0  = 0xa0761d6478bd642f // wyhash primes
	hashP1  = 0xe7037ed1a0b428db
	slashes = 0x2f2f2f2f2f2f2f2f // '/' in every byte
	lsb     = 0x0101010101010101
	msb     = 0x8080808080808080
)

func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// load64 reads s[i:i+8] as a little-endian word; the compiler fuses the
// byte loads into one.
func load64(s string, i int) uint64 {
	b := s[i : i+8]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// slash returns the index of the first '/' byte in the low n bytes of w,
// or n if there is none. (A zero byte of w^slashes is a '/'; the classic
// test below may also flag bytes above a real match, never below, so the
// lowest flag is exact.)
func slash(w uint64, n int) int {
	x := w ^ slashes
	found := (x - lsb) &^ x & msb
	return min(bits.TrailingZeros64(found)>>3, n)
}

// lowBytes keeps the low n bytes of w, for n in [0, 7].
func lowBytes(w uint64, n int) uint64 {
	return w & (1<<(uint(n)*8&63) - 1)
}

// next finds the level of s that starts at index start and returns its end
// (the index of the next '/', or len(s)) and its key. The key depends only
// on the bytes of s[start:end]: a level has the same key inside a topic
// name, inside a filter, and on its own.
func (lh *levelHasher) next(s string, start int) (end int, key uint64) {
	rest := len(s) - start
	var w uint64
	switch {
	case rest >= 8:
		w = load64(s, start)
	case len(s) >= 8:
		// Load the last 8 bytes of s and shift s[start:] down; the zero
		// bytes shifted in are not '/'.
		w = load64(s, len(s)-8) >> (8 * (8 - rest))
	default:
		for k := rest - 1; k >= 0; k-- {
			w = w<<8 | uint64(s[start+k])
		}
	}
	if n := slash(w, min(rest, 8)); n < 8 {
		return start + n, lowBytes(w, n) | uint64(n)<<56
	}
	return lh.long(s, start)
}

// isShortKey reports whether key is the exact key of a level of at most 7
// bytes.
func isShortKey(key uint64) bool {
	return key>>56 < 8
}

// long handles a level of 8 bytes or more starting at s[start].
func (lh *levelHasher) long(s string, start int) (end int, key uint64) {
	end = len(s)
	if i := strings.IndexByte(s[start+8:], '/'); i >= 0 {
		end = start + 8 + i
	}
	level := s[start:end]
	h := lh.s0 ^ uint64(len(level))
	i := 0
	for ; i+8 < len(level); i += 8 {
		h = mix(load64(level, i)^lh.s1, h^hashP0)
	}
	// The last word may overlap the previous one; it is still a function
	// of the level's bytes only.
	h = mix(load64(level, len(level)-8)^lh.s1, h^hashP1)
	return end, mix(h, lh.s1^hashP0) | 0xff<<56
}

// slot returns the home slot of key in a table of 2^(64-shift) slots.
func (lh *levelHasher) slot(key uint64, shift uint8) uint64 {
	return ((key ^ lh.s0) * lh.s1) >> (shift & 63)
}

// cachedLevels is how many levels of a name Trie.Match finds and keys up
// front; it handles deeper levels, rare in practice, as it reaches them.
const cachedLevels = 16

// nameLevels holds the first levels of a topic name with their keys, found
// once by scan for every path through the trie ('+' branches look at the
// same levels again).
type nameLevels struct {
	name   string
	hasher *levelHasher
	end    [cachedLevels]int // end of level d in name
	key    [cachedLevels]uint64
}

// scan finds the first cachedLevels levels of lv.name.
func (lv *nameLevels) scan() {
	s := lv.name
	start := 0
	for d := range cachedLevels {
		if len(s)-start > 8 {
			// next's common case, inlined: a short level followed by '/'
			// within the next word.
			w := load64(s, start)
			if n := slash(w, 8); n < 8 {
				lv.end[d], lv.key[d] = start+n, lowBytes(w, n)|uint64(n)<<56
				start += n + 1
				continue
			}
		}
		end, key := lv.hasher.next(s, start)
		lv.end[d], lv.key[d] = end, key
		if end == len(s) {
			return
		}
		start = end + 1
	}
}

// text returns level d.
func (lv *nameLevels) text(d int) string {
	start := 0
	if d > 0 {
		start = lv.end[d-1] + 1
	}
	return lv.name[start:lv.end[d]]
}

// last reports whether level d is the name's last.
func (lv *nameLevels) last(d int) bool {
	return lv.end[d] == len(lv.name)
}
