package load

import (
	"encoding/binary"
	"errors"
)

// StampSize is the size of the stamp at the start of every payload, and so
// the smallest payload the generator sends.
const StampSize = 16

// errShortPayload is returned for a payload shorter than a stamp.
var errShortPayload = errors.New("payload shorter than the 16-byte stamp")

// Stamp is what a payload carries: when it was (or was scheduled to be)
// sent, in nanoseconds since the run's start, which publisher sent it and
// its sequence number at that publisher.
type Stamp struct {
	SentNs    int64
	Publisher uint32
	Seq       uint32
}

// PutStamp writes s into the first StampSize bytes of b, which must be at
// least that long: send time (8 bytes), publisher (4), sequence (4), little
// endian.
func PutStamp(b []byte, s Stamp) {
	_ = b[StampSize-1]
	binary.LittleEndian.PutUint64(b[0:8], uint64(s.SentNs))
	binary.LittleEndian.PutUint32(b[8:12], s.Publisher)
	binary.LittleEndian.PutUint32(b[12:16], s.Seq)
}

// ReadStamp reads the stamp at the start of b.
func ReadStamp(b []byte) (Stamp, error) {
	if len(b) < StampSize {
		return Stamp{}, errShortPayload
	}
	return Stamp{
		SentNs:    int64(binary.LittleEndian.Uint64(b[0:8])),
		Publisher: binary.LittleEndian.Uint32(b[8:12]),
		Seq:       binary.LittleEndian.Uint32(b[12:16]),
	}, nil
}
