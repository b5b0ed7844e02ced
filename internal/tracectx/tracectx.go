package tracectx

import (
	"encoding/hex"
	"math/rand/v2"
)

// Len is the length of a version 00 traceparent:
// "00-" + 32 hex trace id + "-" + 16 hex parent id + "-" + 2 hex flags.
const Len = 55

// Valid reports whether tp is a well-formed traceparent Shoal can continue:
// version 00 layout (a later version's first 55 bytes, followed by nothing
// or "-"), lowercase hex, a trace id and parent id not all zero, and a
// version other than ff.
func Valid(tp []byte) bool {
	if len(tp) < Len || (len(tp) > Len && tp[Len] != '-') {
		return false
	}
	if tp[2] != '-' || tp[35] != '-' || tp[52] != '-' {
		return false
	}
	if !lowerHex(tp[0:2]) || string(tp[0:2]) == "ff" || (string(tp[0:2]) == "00" && len(tp) != Len) {
		return false
	}
	return lowerHex(tp[3:35]) && !zeros(tp[3:35]) && lowerHex(tp[36:52]) && !zeros(tp[36:52]) && lowerHex(tp[53:55])
}

// AppendNew appends the traceparent of a new trace: random trace and span
// ids, flags 00 (not sampled: Shoal records no spans itself).
func AppendNew(dst []byte) []byte {
	var id [24]byte
	fill(id[:])
	dst = append(dst, "00-"...)
	dst = hex.AppendEncode(dst, id[:16])
	dst = append(dst, '-')
	dst = hex.AppendEncode(dst, id[16:])
	return append(dst, "-00"...)
}

// AppendChild appends a child of parent: the same trace id and flags with a
// new span id. A parent that is not Valid starts a new trace.
func AppendChild(dst, parent []byte) []byte {
	if !Valid(parent) {
		return AppendNew(dst)
	}
	var span [8]byte
	fill(span[:])
	dst = append(dst, "00-"...)
	dst = append(dst, parent[3:35]...)
	dst = append(dst, '-')
	dst = hex.AppendEncode(dst, span[:])
	dst = append(dst, '-')
	return append(dst, parent[53:55]...)
}

// TraceID returns the trace id of a Valid traceparent ("" otherwise).
func TraceID(tp []byte) string {
	if !Valid(tp) {
		return ""
	}
	return string(tp[3:35])
}

// fill fills b with random bytes, never all zero (an invalid id).
func fill(b []byte) {
	for {
		for i := 0; i < len(b); i += 8 {
			v := rand.Uint64()
			for j := i; j < len(b) && j < i+8; j++ {
				b[j] = byte(v)
				v >>= 8
			}
		}
		if !zeros(b) {
			return
		}
	}
}

// notLowerHex has 1 for every byte that is not a lowercase hex digit.
// Read only: a table, because testing each character with comparisons
// mispredicts a branch per random hex digit.
var notLowerHex = func() (t [256]byte) {
	for i := range t {
		if (i < '0' || i > '9') && (i < 'a' || i > 'f') {
			t[i] = 1
		}
	}
	return t
}()

func lowerHex(b []byte) bool {
	var bad byte
	for _, c := range b {
		bad |= notLowerHex[c]
	}
	return bad == 0
}

// zeros reports whether b is all '0' characters or all zero bytes.
func zeros(b []byte) bool {
	for _, c := range b {
		if c != '0' && c != 0 {
			return false
		}
	}
	return true
}
