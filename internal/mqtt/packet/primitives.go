package packet

import "unicode/utf8"

// MaxRemainingLength is the largest remaining length a four-byte variable
// byte integer can carry (spec §1.5.5).
const MaxRemainingLength = 268_435_455

// decoder reads the primitives of the MQTT wire format from one packet body.
// It keeps the first error and turns every later read into a no-op, so a
// packet decoder reads all its fields and checks d.err once (franz-go's
// kbin.Reader style). Slices it returns alias the body.
type decoder struct {
	buf []byte
	off int
	err *Error
	pkt string // packet name, prefixed to error messages
}

func (d *decoder) fail(code ReasonCode, msg string) {
	if d.err == nil {
		d.err = errorf(code, d.pkt+": "+msg)
	}
}

func (d *decoder) left() int { return len(d.buf) - d.off }

func (d *decoder) short(n int, what string) bool {
	if d.err != nil {
		return true
	}
	if len(d.buf)-d.off < n {
		d.fail(CodeMalformedPacket, what+": packet ends early")
		return true
	}
	return false
}

func (d *decoder) u8(what string) byte {
	if d.short(1, what) {
		return 0
	}
	b := d.buf[d.off]
	d.off++
	return b
}

func (d *decoder) u16(what string) uint16 {
	if d.short(2, what) {
		return 0
	}
	v := uint16(d.buf[d.off])<<8 | uint16(d.buf[d.off+1])
	d.off += 2
	return v
}

func (d *decoder) u32(what string) uint32 {
	if d.short(4, what) {
		return 0
	}
	b := d.buf[d.off : d.off+4]
	d.off += 4
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// varint reads a variable byte integer (spec §1.5.5): at most four bytes.
func (d *decoder) varint(what string) uint32 {
	if d.err != nil {
		return 0
	}
	var v uint32
	for i := 0; i < 4; i++ {
		if d.off >= len(d.buf) {
			d.fail(CodeMalformedPacket, what+": packet ends early")
			return 0
		}
		b := d.buf[d.off]
		d.off++
		v |= uint32(b&0x7f) << (7 * i)
		if b&0x80 == 0 {
			if b == 0 && i > 0 {
				d.fail(CodeMalformedPacket, what+": variable byte integer not in its shortest form")
				return 0
			}
			return v
		}
	}
	d.fail(CodeMalformedPacket, what+": variable byte integer longer than 4 bytes")
	return 0
}

// binary reads two-byte-length-prefixed binary data.
func (d *decoder) binary(what string) []byte {
	n := int(d.u16(what))
	if d.short(n, what) {
		return nil
	}
	b := d.buf[d.off : d.off+n : d.off+n]
	d.off += n
	return b
}

// str reads a UTF-8 encoded string and checks it is well-formed (no
// surrogates, no overlong forms) and free of U+0000 (spec §1.5.4).
func (d *decoder) str(what string) []byte {
	b := d.binary(what)
	if d.err == nil && !ValidUTF8(b) {
		d.fail(CodeMalformedPacket, what+": not well-formed UTF-8 or contains U+0000")
	}
	return b
}

// rest returns everything not yet read.
func (d *decoder) rest() []byte {
	if d.err != nil {
		return nil
	}
	b := d.buf[d.off:len(d.buf):len(d.buf)]
	d.off = len(d.buf)
	return b
}

// end fails if bytes remain unread.
func (d *decoder) end() {
	if d.err == nil && d.off != len(d.buf) {
		d.fail(CodeMalformedPacket, "unexpected bytes after the last field")
	}
}

// result returns the first error as an error interface (nil when none).
func (d *decoder) result() error {
	if d.err != nil {
		return d.err
	}
	return nil
}

// ValidUTF8 reports whether b is a valid MQTT UTF-8 string: well-formed
// UTF-8 without U+0000. Control characters and non-characters, which the
// specification says SHOULD NOT appear, are accepted.
func ValidUTF8(b []byte) bool {
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c == 0 {
			return false
		}
		if c >= utf8.RuneSelf {
			return utf8.Valid(b[i:]) && noZero(b[i:])
		}
	}
	return true
}

func noZero(b []byte) bool {
	for _, c := range b {
		if c == 0 {
			return false
		}
	}
	return true
}

// varintLen returns the encoded length of v as a variable byte integer.
func varintLen(v int) int {
	switch {
	case v < 128:
		return 1
	case v < 16_384:
		return 2
	case v < 2_097_152:
		return 3
	}
	return 4
}

func appendVarint(dst []byte, v int) []byte {
	for {
		b := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(dst, b)
		}
		dst = append(dst, b|0x80)
	}
}

func appendU16(dst []byte, v uint16) []byte { return append(dst, byte(v>>8), byte(v)) }

func appendU32(dst []byte, v uint32) []byte {
	return append(dst, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

// appendBinary appends b with its two-byte length prefix. Callers keep b at
// most 65,535 bytes long.
func appendBinary(dst, b []byte) []byte {
	dst = append(dst, byte(len(b)>>8), byte(len(b)))
	return append(dst, b...)
}

// appendHeader appends a fixed header: first byte and remaining length.
func appendHeader(dst []byte, first byte, remaining int) []byte {
	return appendVarint(append(dst, first), remaining)
}

// headerLen is the size of a fixed header for a body of remaining bytes.
func headerLen(remaining int) int { return 1 + varintLen(remaining) }
