package packet

import (
	"errors"
	"io"
)

// FixedHeader is the first part of every packet: type, flags (low nibble of
// the first byte) and the remaining length of the body that follows.
type FixedHeader struct {
	Type      Type
	Flags     byte
	Remaining int
}

// Publish flag accessors.
func (h FixedHeader) dup() bool    { return h.Flags&0x08 != 0 }
func (h FixedHeader) qos() byte    { return (h.Flags >> 1) & 3 }
func (h FixedHeader) retain() bool { return h.Flags&0x01 != 0 }

// ParseHeader parses the fixed header at the start of buf. It returns the
// header and its length in bytes, or n == 0 with a nil error when buf does
// not yet hold the whole header. maxPacket bounds the whole packet (header
// plus body); 0 means only the protocol's own bound. Reserved type 0, AUTH
// before version 5 (decided later, by Decode), and flag bits that the type
// reserves are errors here, before any body is read.
func ParseHeader(buf []byte, maxPacket uint32) (h FixedHeader, n int, err error) {
	if len(buf) == 0 {
		return h, 0, nil
	}
	h.Type = Type(buf[0] >> 4)
	h.Flags = buf[0] & 0x0f
	var rem int
	for i := 1; ; i++ {
		if i >= len(buf) {
			return FixedHeader{}, 0, nil
		}
		b := buf[i]
		rem |= int(b&0x7f) << (7 * (i - 1))
		if b&0x80 == 0 {
			if b == 0 && i > 1 {
				return h, 0, errorf(CodeMalformedPacket, "fixed header: remaining length not in its shortest form")
			}
			n = i + 1
			break
		}
		if i == 4 {
			return h, 0, errorf(CodeMalformedPacket, "fixed header: remaining length longer than 4 bytes")
		}
	}
	h.Remaining = rem
	if err := h.check(); err != nil {
		return h, 0, err
	}
	if maxPacket > 0 && uint64(n)+uint64(rem) > uint64(maxPacket) {
		return h, 0, errorf(CodePacketTooLarge, h.Type.String()+": packet larger than the maximum packet size")
	}
	return h, n, nil
}

// check validates the type and the flag bits (spec §2.1.3).
func (h FixedHeader) check() error {
	switch h.Type {
	case 0:
		return errorf(CodeMalformedPacket, "fixed header: reserved packet type 0")
	case PUBLISH:
		if h.qos() == 3 {
			return errorf(CodeMalformedPacket, "PUBLISH: QoS 3")
		}
		if h.qos() == 0 && h.dup() {
			return errorf(CodeMalformedPacket, "PUBLISH: DUP set on a QoS 0 message")
		}
	case PUBREL, SUBSCRIBE, UNSUBSCRIBE:
		if h.Flags != 0x02 {
			return errorf(CodeMalformedPacket, h.Type.String()+": reserved flags must be 0010")
		}
	default:
		if h.Flags != 0 {
			return errorf(CodeMalformedPacket, h.Type.String()+": reserved flags must be 0000")
		}
	}
	return nil
}

// Reader frames MQTT packets from a byte stream. It reads into one buffer
// that grows to the largest packet seen (bounded by MaxPacketSize) and that
// [Reader.Shrink] returns to its initial size; [Reader.Release] drops it
// while the stream is idle. An error from the underlying reader keeps the
// bytes already read, so ReadPacket may be called again after a deadline or
// a non-blocking read that found no data.
type Reader struct {
	r     io.Reader
	buf   []byte
	start int // first unconsumed byte
	end   int // end of buffered data
	init  int
	lent  bool // buf is the caller's (Lend)

	// MaxPacketSize bounds a whole packet in bytes; 0 means the protocol
	// maximum. Set it before reading, or between packets.
	MaxPacketSize uint32
}

// NewReader returns a Reader over r with an initial buffer of size bytes.
func NewReader(r io.Reader, size int) *Reader {
	rd := new(Reader)
	rd.Init(r, size)
	rd.buf = make([]byte, rd.init)
	return rd
}

// Init makes r a Reader over src with an initial buffer of size bytes
// (at least 16), allocated by the first read: for a Reader that is a field
// of a larger struct, one allocation fewer. It resets MaxPacketSize.
func (r *Reader) Init(src io.Reader, size int) {
	*r = Reader{r: src, init: max(size, 16)}
}

// ReadPacket returns the next packet's fixed header and body. The body
// aliases the reader's buffer: it is valid until the next call to
// ReadPacket or Shrink. A malformed or oversized header returns an *Error;
// the connection cannot be resynchronised after any error. io.EOF is
// returned only between packets; a stream that ends inside a packet
// returns io.ErrUnexpectedEOF.
func (r *Reader) ReadPacket() (FixedHeader, []byte, error) {
	for {
		h, n, err := ParseHeader(r.buf[r.start:r.end], r.MaxPacketSize)
		if err != nil {
			return h, nil, err
		}
		if n > 0 {
			total := n + h.Remaining
			if err := r.fill(total); err != nil {
				return h, nil, err
			}
			body := r.buf[r.start+n : r.start+total : r.start+total]
			r.start += total
			return h, body, nil
		}
		// Header incomplete: at most 5 bytes are needed.
		if err := r.fill(r.end - r.start + 1); err != nil {
			return h, nil, err
		}
	}
}

// PeekHeader reads until the next packet's fixed header is buffered and
// returns it with the size of the whole packet (header and body), without
// consuming anything: the next ReadPacket returns that packet. It reads
// only as far as the header needs (a read may bring more), so a caller can
// decide on a packet's size before its body is read. Its errors are those
// ReadPacket would return.
func (r *Reader) PeekHeader() (FixedHeader, int, error) {
	for {
		h, n, err := ParseHeader(r.buf[r.start:r.end], r.MaxPacketSize)
		if err != nil {
			return h, 0, err
		}
		if n > 0 {
			return h, n + h.Remaining, nil
		}
		if err := r.fill(r.end - r.start + 1); err != nil {
			return h, 0, err
		}
	}
}

// fill reads until at least want bytes are buffered from r.start.
func (r *Reader) fill(want int) error {
	if r.end-r.start >= want {
		return nil
	}
	if r.start == r.end {
		r.start, r.end = 0, 0
	}
	if len(r.buf) == 0 { // released while idle
		r.buf = make([]byte, r.init)
	}
	for r.end-r.start < want {
		if r.end == len(r.buf) {
			r.makeRoom(want)
		}
		m, err := r.r.Read(r.buf[r.end:])
		r.end += m
		if err != nil {
			if r.end-r.start >= want {
				return nil
			}
			if errors.Is(err, io.EOF) && r.end > r.start {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// makeRoom makes space after the buffered bytes, for a packet of want
// bytes: it moves unread bytes to the front, and grows the buffer when that
// is not enough — by doubling, never beyond want, so that a peer announcing
// a large packet gets memory only as fast as it sends bytes.
func (r *Reader) makeRoom(want int) {
	buf := r.buf
	if r.start == 0 || want > len(buf) {
		size := min(max(2*len(buf), r.end-r.start+1), want)
		if size > len(buf) {
			buf = make([]byte, size)
			r.lent = false
		}
	}
	n := copy(buf, r.buf[r.start:r.end])
	r.buf, r.start, r.end = buf, 0, n
}

// Buffered returns the number of bytes read from the stream but not yet
// returned as packets.
func (r *Reader) Buffered() int { return r.end - r.start }

// Shrink drops a buffer grown for a large packet when nothing is buffered,
// returning to the initial size. Call it when the connection goes idle.
func (r *Reader) Shrink() {
	if r.start == r.end && len(r.buf) > r.init {
		r.buf, r.start, r.end = make([]byte, r.init), 0, 0
	}
}

// Release drops the buffer when nothing is buffered, so that an idle
// stream holds no buffer at all; the next read allocates the initial size
// again. It reports whether the buffer was dropped (false while part of a
// packet is buffered: those bytes are kept, in a buffer of r's own if the
// buffer was lent). After Release, r no longer uses a lent buffer.
func (r *Reader) Release() bool {
	if r.start == r.end {
		r.buf, r.start, r.end, r.lent = nil, 0, 0, false
		return true
	}
	if r.lent {
		own := make([]byte, max(r.init, r.end-r.start))
		r.end = copy(own, r.buf[r.start:r.end])
		r.buf, r.start, r.lent = own, 0, false
	}
	return false
}

// Lend makes r read into b, which stays the caller's, while r has no
// buffer of its own (after Init or Release): a caller serving many idle
// streams one after the other lends each the same buffer instead of
// allocating one per read. r stops using b when a packet needs more room,
// and at Release, which the caller calls before it uses b again. Bodies
// returned by ReadPacket alias b until then.
func (r *Reader) Lend(b []byte) {
	if len(r.buf) == 0 && len(b) > 0 {
		r.buf, r.start, r.end, r.lent = b[:cap(b)], 0, 0, true
	}
}
