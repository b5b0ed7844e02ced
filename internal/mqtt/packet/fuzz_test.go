package packet

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"testing"
)

// FuzzDecode: for both protocol versions, ParseHeader and Decode never
// panic, fail only with an *Error carrying a decode reason code, and
// whatever decodes re-encodes to bytes that decode to an equal packet
// (decode∘encode is idempotent). Decoding into a struct that held another
// packet gives the same result as decoding into a new one.
func FuzzDecode(f *testing.F) {
	for _, c := range cases {
		f.Add(c.raw)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, v := range []Version{V311, V5} {
			fuzzDecode(t, data, v)
		}
	})
}

// decodeCodes are the reason codes a decoder may report.
var decodeCodes = newCodeSet(CodeMalformedPacket, CodeProtocolError, CodeUnsupportedProtocolVersion,
	CodeTopicNameInvalid, CodePacketTooLarge, CodeTopicAliasInvalid)

func checkDecodeErr(t *testing.T, err error, data []byte) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || !decodeCodes.has(e.Code) {
		t.Fatalf("error %v (%T) is not a decode *Error; input % x", err, err, data)
	}
}

func fuzzDecode(t *testing.T, data []byte, v Version) {
	h, n, err := ParseHeader(data, 0)
	if err != nil {
		checkDecodeErr(t, err, data)
		return
	}
	if n == 0 {
		return
	}
	body := data[n:]
	if len(body) > h.Remaining {
		body = body[:h.Remaining]
	}
	h.Remaining = len(body)

	p, err := Decode(h, body, v)
	dirty := dirtyPacket(h.Type)
	derr := dirty.Decode(h, body, v)
	if (err == nil) != (derr == nil) || CodeOf(err) != CodeOf(derr) {
		t.Fatalf("%v: fresh decode %v, reused decode %v; input % x", v, err, derr, data)
	}
	if err != nil {
		checkDecodeErr(t, err, data)
		return
	}
	if d := packetDiff(p, dirty); d != "" {
		t.Fatalf("%v: reused decode differs from fresh (-fresh +reused):\n%s\ninput % x", v, d, data)
	}

	enc := p.Append(nil, v)
	if p.Size(v) != len(enc) {
		t.Fatalf("%v: Size %d, Append wrote %d; input % x", v, p.Size(v), len(enc), data)
	}
	p2, err := decodeFrame(enc, v, 0)
	if err != nil {
		t.Fatalf("%v: the encoding of a decoded packet does not decode: %v\npacket %+v\ninput    % x\nencoding % x",
			v, err, p, data, enc)
	}
	if d := packetDiff(p, p2); d != "" {
		t.Fatalf("%v: decode(encode(p)) != p (-p +decoded):\n%s\ninput % x", v, d, data)
	}
	if enc2 := p2.Append(nil, v); !bytes.Equal(enc, enc2) {
		t.Fatalf("%v: encodings differ:\n% x\n% x", v, enc, enc2)
	}
}

// richest holds, per packet type, the valid 5.0 case with the longest
// encoding: decoding it first leaves as many fields set as possible.
var richest = sync.OnceValue(func() map[Type][]byte {
	m := map[Type][]byte{}
	for _, c := range cases {
		if c.valid() && c.v == V5 && len(c.raw) < 4096 && len(c.raw) > len(m[c.want.Type()]) {
			m[c.want.Type()] = c.raw
		}
	}
	return m
})

// dirtyPacket returns a packet of type ty into which a rich packet was
// decoded.
func dirtyPacket(ty Type) Packet {
	p := New(ty)
	raw := richest()[ty]
	h, n, err := ParseHeader(raw, 0)
	if err != nil || n == 0 {
		panic("dirtyPacket: bad table case for " + ty.String())
	}
	if err := p.Decode(h, raw[n:], V5); err != nil {
		panic("dirtyPacket: " + err.Error())
	}
	return p
}

// FuzzReaderSplit: a Reader fed the same bytes split at arbitrary points
// (chosen by splits) frames the same packets and ends with the same error
// as a Reader fed the whole input, and both agree with ParseHeader applied
// to the input directly.
func FuzzReaderSplit(f *testing.F) {
	// Inputs are cut at maxSplitInput, and so are the seeds.
	patterns := [][]byte{{0}, {1, 2, 3}, {0x7f, 0x80, 5}, {63, 0xff}}
	for i, c := range cases {
		f.Add(c.raw[:min(len(c.raw), maxSplitInput)], patterns[i%len(patterns)])
	}
	// Several packets back to back. Only the small ones: the minimizer
	// spends its whole budget on interesting inputs of tens of kilobytes.
	var stream []byte
	for _, c := range cases {
		if c.valid() && len(c.raw) <= 256 {
			stream = append(stream, c.raw...)
		}
	}
	for _, pat := range patterns {
		f.Add(stream, pat)
	}
	f.Fuzz(func(t *testing.T, data, splits []byte) {
		if len(data) > maxSplitInput {
			data = data[:maxSplitInput]
		}
		maxPacket := uint32(1 << 16)
		if len(splits) > 0 && splits[0]&0x40 != 0 {
			maxPacket = 64
		}
		want := frameAll(data, maxPacket)
		whole := readAll(NewReader(bytes.NewReader(data), 4096), maxPacket)
		split := readAll(NewReader(&byteSplitReader{data: data, splits: splits}, 16), maxPacket)
		if !framesEqual(want, whole) {
			t.Fatalf("whole reader:\n got %v\nwant %v\ninput % x", whole, want, data)
		}
		if !framesEqual(want, split) {
			t.Fatalf("split reader:\n got %v\nwant %v\ninput % x\nsplits % x", split, want, data, splits)
		}
	})
}

// maxSplitInput bounds the input of FuzzReaderSplit. Read a few bytes at a
// time, a kilobyte-sized input costs the minimizer (quadratic in the input
// length) its whole time budget for every new input, and the Reader does
// nothing at 20 KiB that it does not at 512 bytes with its 16-byte initial
// buffer. Growth to large packets is covered by TestReaderGrowShrink.
const maxSplitInput = 512

type frame struct {
	h    FixedHeader
	body []byte
}

type frames struct {
	pkts []frame
	err  error // io.EOF, io.ErrUnexpectedEOF or an *Error
}

func framesEqual(a, b frames) bool {
	if len(a.pkts) != len(b.pkts) {
		return false
	}
	for i := range a.pkts {
		if a.pkts[i].h != b.pkts[i].h || !bytes.Equal(a.pkts[i].body, b.pkts[i].body) {
			return false
		}
	}
	var ea, eb *Error
	if errors.As(a.err, &ea) && errors.As(b.err, &eb) {
		return ea.Code == eb.Code
	}
	return errors.Is(a.err, b.err)
}

// frameAll frames data with ParseHeader alone: the expected result.
func frameAll(data []byte, maxPacket uint32) frames {
	var fs frames
	for off := 0; ; {
		h, n, err := ParseHeader(data[off:], maxPacket)
		switch {
		case err != nil:
			fs.err = err
			return fs
		case n == 0 && off == len(data):
			fs.err = io.EOF
			return fs
		case n == 0 || off+n+h.Remaining > len(data):
			fs.err = io.ErrUnexpectedEOF
			return fs
		}
		fs.pkts = append(fs.pkts, frame{h, data[off+n : off+n+h.Remaining]})
		off += n + h.Remaining
	}
}

func readAll(r *Reader, maxPacket uint32) frames {
	r.MaxPacketSize = maxPacket
	var fs frames
	for {
		h, body, err := r.ReadPacket()
		if err != nil {
			fs.err = err
			return fs
		}
		fs.pkts = append(fs.pkts, frame{h, bytes.Clone(body)})
	}
}

// byteSplitReader returns data in chunks whose sizes come from splits,
// used in turn: 1 + s&0x3f bytes; s&0x80 makes a zero-length read first.
// The last chunk comes with io.EOF when its split has bit 0x40 set.
type byteSplitReader struct {
	data   []byte
	splits []byte
	i      int
	zero   bool
}

func (b *byteSplitReader) Read(p []byte) (int, error) {
	if len(b.data) == 0 {
		return 0, io.EOF
	}
	var s byte = 0x3f
	if len(b.splits) > 0 {
		s = b.splits[b.i%len(b.splits)]
	}
	if s&0x80 != 0 && !b.zero {
		b.zero = true
		return 0, nil
	}
	b.zero = false
	b.i++
	n := min(1+int(s&0x3f), len(p), len(b.data))
	copy(p, b.data[:n])
	b.data = b.data[n:]
	if len(b.data) == 0 && s&0x40 != 0 {
		return n, io.EOF
	}
	return n, nil
}
