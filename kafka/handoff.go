package kafka

import "encoding/binary"

// The value of HeaderHandoff: the run of the gateway that was handed the
// record (its connection base, 8 bytes big-endian), then HandoffEarly or
// HandoffLate.
const (
	// HandoffMarkLen is the length of a hand-off mark.
	HandoffMarkLen = 9
	// HandoffEarly: the gateway delivered the record when it was handed
	// over; its slot consumer skips it.
	HandoffEarly byte = 1
	// HandoffLate: the gateway left the record to its slot consumer.
	HandoffLate byte = 2
)

// HandoffMark returns the mark of a record handed to the gateway run run.
func HandoffMark(run uint64, kind byte) [HandoffMarkLen]byte {
	var m [HandoffMarkLen]byte
	binary.BigEndian.PutUint64(m[:], run)
	m[8] = kind
	return m
}

// ParseHandoffMark returns the run and kind of the mark v; ok is false
// when v is not a mark.
func ParseHandoffMark(v []byte) (run uint64, kind byte, ok bool) {
	if len(v) != HandoffMarkLen || (v[8] != HandoffEarly && v[8] != HandoffLate) {
		return 0, 0, false
	}
	return binary.BigEndian.Uint64(v), v[8], true
}

// HandedOffEarly reports whether r carries a HandoffEarly mark: the
// gateway delivered it when it was handed over, so nobody waits for it to
// be written.
func (r *Record) HandedOffEarly() bool {
	_, kind, ok := ParseHandoffMark(r.Header(HeaderHandoff))
	return ok && kind == HandoffEarly
}
