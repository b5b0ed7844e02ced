package packet

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"
)

// splitReader returns data in chunks of random size between 1 and max,
// sometimes a zero-length read, and sometimes io.EOF together with the last
// bytes.
type splitReader struct {
	data []byte
	rng  *rand.Rand
	max  int
}

func newSplitReader(data []byte, seed uint64, maxChunk int) *splitReader {
	return &splitReader{data: data, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), max: maxChunk}
}

func (s *splitReader) Read(p []byte) (int, error) {
	if len(s.data) == 0 {
		return 0, io.EOF
	}
	if s.rng.IntN(8) == 0 {
		return 0, nil
	}
	n := min(1+s.rng.IntN(s.max), len(p), len(s.data))
	copy(p, s.data[:n])
	s.data = s.data[n:]
	if len(s.data) == 0 && s.rng.IntN(2) == 0 {
		return n, io.EOF
	}
	return n, nil
}

// validStream is every valid case's raw bytes back to back.
func validStream() ([]tcase, []byte) {
	var vs []tcase
	var stream []byte
	for _, c := range cases {
		if c.valid() {
			vs = append(vs, c)
			stream = append(stream, c.raw...)
		}
	}
	return vs, stream
}

// streamReaders are the ways a stream is delivered, each a constructor so
// that every run gets a fresh reader.
func streamReaders(stream []byte) map[string]func() io.Reader {
	br := func() io.Reader { return bytes.NewReader(stream) }
	rs := map[string]func() io.Reader{
		"whole":                 br,
		"OneByteReader":         func() io.Reader { return iotest.OneByteReader(br()) },
		"HalfReader":            func() io.Reader { return iotest.HalfReader(br()) },
		"DataErrReader":         func() io.Reader { return iotest.DataErrReader(br()) },
		"OneByte+DataErrReader": func() io.Reader { return iotest.DataErrReader(iotest.OneByteReader(br())) },
	}
	for seed := range uint64(8) {
		rs[fmt.Sprintf("split seed %d max 7", seed)] = func() io.Reader { return newSplitReader(stream, seed, 7) }
		rs[fmt.Sprintf("split seed %d max 300", seed)] = func() io.Reader { return newSplitReader(stream, seed, 300) }
	}
	return rs
}

// TestReaderStream reads every valid case back to back, through readers
// that split the stream in different ways, and decodes each packet.
func TestReaderStream(t *testing.T) {
	vs, stream := validStream()
	for name, src := range streamReaders(stream) {
		for _, size := range []int{16, 4096} {
			t.Run(fmt.Sprintf("%s/buffer %d", name, size), func(t *testing.T) {
				r := NewReader(src(), size)
				for _, c := range vs {
					h, body, err := r.ReadPacket()
					if err != nil {
						t.Fatalf("%s: ReadPacket: %v", c.id(), err)
					}
					if h.Remaining != len(body) {
						t.Fatalf("%s: Remaining %d, body %d", c.id(), h.Remaining, len(body))
					}
					p := New(h.Type)
					if err := p.Decode(h, body, c.v); err != nil {
						t.Fatalf("%s: decode: %v", c.id(), err)
					}
					if d := packetDiff(c.want, p); d != "" {
						t.Fatalf("%s: differs (-want +got):\n%s", c.id(), d)
					}
				}
				for range 2 {
					if _, _, err := r.ReadPacket(); !errors.Is(err, io.EOF) {
						t.Fatalf("after the last packet: %v, want io.EOF", err)
					}
				}
				if r.Buffered() != 0 {
					t.Fatalf("Buffered = %d at the end", r.Buffered())
				}
			})
		}
	}
}

// TestReaderCases runs every case, valid or not, through a Reader with the
// case's maximum packet size: the Reader and the decoder together report
// the same result as ParseHeader and Decode on the whole packet.
func TestReaderCases(t *testing.T) {
	for _, c := range cases {
		t.Run(c.id(), func(t *testing.T) {
			r := NewReader(iotest.OneByteReader(bytes.NewReader(c.raw)), 16)
			r.MaxPacketSize = c.max
			h, body, err := r.ReadPacket()
			if err == nil {
				var p Packet
				p, err = Decode(h, body, c.v)
				if err == nil {
					if !c.valid() {
						t.Fatalf("read %+v, want error 0x%02x", p, byte(c.code))
					}
					if d := packetDiff(c.want, p); d != "" {
						t.Fatalf("differs (-want +got):\n%s", d)
					}
					if _, _, err := r.ReadPacket(); !errors.Is(err, io.EOF) {
						t.Fatalf("after the packet: %v, want io.EOF", err)
					}
					return
				}
			}
			if c.valid() {
				t.Fatalf("read: %v", err)
			}
			checkErr(t, err, c.code)
		})
	}
}

// TestReaderEOF: io.EOF between packets, io.ErrUnexpectedEOF inside one,
// wherever the stream is cut.
func TestReaderEOF(t *testing.T) {
	first := wpkt(0x30, wstr("a/b"), bs("hello"))
	for _, c := range cases {
		if !c.valid() {
			continue
		}
		for cut := 0; cut < len(c.raw); cut++ {
			if cut > 64 && cut < len(c.raw)-64 && cut%997 != 0 {
				continue // long packets: every cut near the ends, a sample inside
			}
			stream := append(append([]byte(nil), first...), c.raw[:cut]...)
			for _, mk := range []func([]byte) io.Reader{
				func(b []byte) io.Reader { return bytes.NewReader(b) },
				func(b []byte) io.Reader { return iotest.DataErrReader(iotest.OneByteReader(bytes.NewReader(b))) },
			} {
				r := NewReader(mk(stream), 16)
				if _, _, err := r.ReadPacket(); err != nil {
					t.Fatalf("%s cut %d: first packet: %v", c.id(), cut, err)
				}
				_, _, err := r.ReadPacket()
				want := io.ErrUnexpectedEOF
				if cut == 0 {
					want = io.EOF
				}
				if !errors.Is(err, want) {
					t.Fatalf("%s cut at %d of %d: %v, want %v", c.id(), cut, len(c.raw), err, want)
				}
			}
		}
	}
}

type errAfter struct {
	data []byte
	err  error
}

func (e *errAfter) Read(p []byte) (int, error) {
	if len(e.data) == 0 {
		return 0, e.err
	}
	n := copy(p, e.data)
	e.data = e.data[n:]
	return n, nil
}

// TestReaderError: a read error other than EOF is returned as it is,
// between packets and inside one.
func TestReaderError(t *testing.T) {
	boom := errors.New("connection reset")
	pkt := wpkt(0x30, wstr("a"), bs("b"))
	for cut := 0; cut < len(pkt); cut++ {
		r := NewReader(&errAfter{data: pkt[:cut], err: boom}, 16)
		if _, _, err := r.ReadPacket(); !errors.Is(err, boom) {
			t.Fatalf("cut %d: %v, want %v", cut, err, boom)
		}
	}
	// Data and an error in the same Read: the complete packet comes first.
	r := NewReader(iotest.TimeoutReader(bytes.NewReader(append(append([]byte(nil), pkt...), pkt[:2]...))), 64)
	if _, _, err := r.ReadPacket(); err != nil {
		t.Fatalf("first packet: %v", err)
	}
	if _, _, err := r.ReadPacket(); !errors.Is(err, iotest.ErrTimeout) {
		t.Fatalf("second packet: %v, want %v", err, iotest.ErrTimeout)
	}
}

// TestReaderResume: after a read error such as a deadline, the bytes already
// read are kept and the next ReadPacket continues the same packet.
func TestReaderResume(t *testing.T) {
	pkt := wpkt(0x32, wstr("a/long/enough/topic"), wu16(9), bs("payload"))
	// TimeoutReader fails its second Read and succeeds afterwards; a 16-byte
	// buffer makes that second Read fall inside the packet.
	r := NewReader(iotest.TimeoutReader(bytes.NewReader(pkt)), 16)
	if _, _, err := r.ReadPacket(); !errors.Is(err, iotest.ErrTimeout) {
		t.Fatalf("first ReadPacket: %v, want %v", err, iotest.ErrTimeout)
	}
	if r.Buffered() == 0 {
		t.Fatal("the bytes read before the error were dropped")
	}
	h, body, err := r.ReadPacket()
	if err != nil {
		t.Fatalf("ReadPacket after the error: %v", err)
	}
	var p Publish
	if err := p.Decode(h, body, V311); err != nil || string(p.Payload) != "payload" || p.PacketID != 9 {
		t.Fatalf("resumed packet: %+v, %v", p, err)
	}
}

// TestReaderGrowShrink: the buffer grows for a large packet and Shrink
// returns it to the initial size, but never drops buffered bytes.
func TestReaderGrowShrink(t *testing.T) {
	const initial = 64
	big := bytes.Repeat([]byte("x"), 100<<10)
	bigPkt := wpkt(0x30, wstr("big"), big)
	small := wpkt(0x30, wstr("s"), bs("1"))
	stream := wcat(small, bigPkt, small, small)
	r := NewReader(bytes.NewReader(stream), initial)
	if len(r.buf) != initial {
		t.Fatalf("initial buffer %d", len(r.buf))
	}
	if _, _, err := r.ReadPacket(); err != nil {
		t.Fatal(err)
	}
	h, body, err := r.ReadPacket()
	if err != nil {
		t.Fatal(err)
	}
	var p Publish
	if err := p.Decode(h, body, V311); err != nil || !bytes.Equal(p.Payload, big) {
		t.Fatalf("big packet: %v, payload %d bytes", err, len(p.Payload))
	}
	if len(r.buf) < len(bigPkt) {
		t.Fatalf("buffer %d after a %d-byte packet", len(r.buf), len(bigPkt))
	}
	grown := len(r.buf)
	if _, _, err := r.ReadPacket(); err != nil {
		t.Fatal(err)
	}
	// The last small packet may already be buffered: Shrink keeps it.
	if r.Buffered() > 0 {
		r.Shrink()
		if len(r.buf) != grown {
			t.Fatalf("Shrink dropped a buffer holding %d unread bytes", r.Buffered())
		}
	}
	if _, _, err := r.ReadPacket(); err != nil {
		t.Fatal(err)
	}
	r.Shrink()
	if len(r.buf) != initial {
		t.Fatalf("buffer %d after Shrink, want %d", len(r.buf), initial)
	}
	if _, _, err := r.ReadPacket(); !errors.Is(err, io.EOF) {
		t.Fatalf("after Shrink: %v, want io.EOF", err)
	}

	// A Reader keeps working after Shrink, and a size below 16 is raised.
	r = NewReader(iotest.HalfReader(bytes.NewReader(wcat(bigPkt, small))), 0)
	if len(r.buf) != 16 {
		t.Fatalf("NewReader(size 0) buffer %d, want the 16-byte minimum", len(r.buf))
	}
	for _, want := range [][]byte{bigPkt, small} {
		_, body, err := r.ReadPacket()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(body, want[len(want)-len(body):]) {
			t.Fatalf("body of %d bytes differs", len(body))
		}
		r.Shrink()
	}
	if len(r.buf) != 16 {
		t.Fatalf("buffer %d after the last Shrink", len(r.buf))
	}
}

// TestReaderMaxPacketSize: a packet above MaxPacketSize is refused from its
// fixed header, without reading or buffering its body.
func TestReaderMaxPacketSize(t *testing.T) {
	const maxSize = 100
	fits := wpkt(0x30, wstr("t"), bytes.Repeat([]byte("a"), maxSize-2-3))
	over := wpkt(0x30, wstr("t"), bytes.Repeat([]byte("a"), maxSize-2-3+1))
	if len(fits) != maxSize || len(over) != maxSize+1 {
		t.Fatalf("test packets of %d and %d bytes", len(fits), len(over))
	}
	r := NewReader(bytes.NewReader(wcat(fits, over)), 16)
	r.MaxPacketSize = maxSize
	if _, body, err := r.ReadPacket(); err != nil || len(body) != maxSize-2 {
		t.Fatalf("packet at the maximum: %d bytes, %v", len(body), err)
	}
	before := len(r.buf)
	_, _, err := r.ReadPacket()
	checkErr(t, err, CodePacketTooLarge)
	if len(r.buf) != before {
		t.Fatalf("buffer grew from %d to %d for a refused packet", before, len(r.buf))
	}

	// A header claiming 256 MiB allocates nothing.
	r = NewReader(bytes.NewReader([]byte{0x30, 0xFF, 0xFF, 0xFF, 0x7F, 0, 1, 'a'}), 16)
	r.MaxPacketSize = 1 << 20
	_, _, err = r.ReadPacket()
	checkErr(t, err, CodePacketTooLarge)
	if len(r.buf) != 16 {
		t.Fatalf("buffer %d after refusing a 256 MiB packet", len(r.buf))
	}

	// The limit may be changed between packets.
	r = NewReader(bytes.NewReader(wcat(over, over)), 16)
	if _, _, err := r.ReadPacket(); err != nil {
		t.Fatalf("no limit: %v", err)
	}
	r.MaxPacketSize = maxSize
	_, _, err = r.ReadPacket()
	checkErr(t, err, CodePacketTooLarge)
}

// TestReaderRelease: Release drops the buffer of an idle Reader, which
// allocates its initial size again at the next read; with part of a packet
// buffered it keeps the bytes, and the packet completes after more arrive.
func TestReaderRelease(t *testing.T) {
	first := wpkt(0x30, wstr("a"), bs("1"))
	second := wpkt(0x32, wstr("split/topic"), wu16(3), bs("payload"))
	src := &stepReader{}
	r := NewReader(src, 32)
	src.chunks = [][]byte{first}
	if _, _, err := r.ReadPacket(); err != nil {
		t.Fatal(err)
	}
	if !r.Release() || r.buf != nil {
		t.Fatalf("Release of an idle Reader kept a %d-byte buffer", len(r.buf))
	}
	// Half of the next packet, then nothing to read (a would-block error).
	src.chunks = [][]byte{second[:7]}
	if _, _, err := r.ReadPacket(); !errors.Is(err, errNoData) {
		t.Fatalf("ReadPacket with half a packet: %v, want %v", err, errNoData)
	}
	if len(r.buf) != 32 {
		t.Fatalf("buffer after Release and a read: %d bytes, want the initial 32", len(r.buf))
	}
	if r.Release() || r.Buffered() != 7 {
		t.Fatalf("Release dropped %d buffered bytes of a packet", 7-r.Buffered())
	}
	src.chunks = [][]byte{second[7:]}
	h, body, err := r.ReadPacket()
	if err != nil {
		t.Fatal(err)
	}
	var p Publish
	if err := p.Decode(h, body, V311); err != nil || string(p.Topic) != "split/topic" || string(p.Payload) != "payload" {
		t.Fatalf("packet split across Release: %+v, %v", p, err)
	}
}

var errNoData = errors.New("no data")

// stepReader returns its chunks one Read at a time, then errNoData.
type stepReader struct{ chunks [][]byte }

func (s *stepReader) Read(p []byte) (int, error) {
	if len(s.chunks) == 0 {
		return 0, errNoData
	}
	n := copy(p, s.chunks[0])
	if s.chunks[0] = s.chunks[0][n:]; len(s.chunks[0]) == 0 {
		s.chunks = s.chunks[1:]
	}
	return n, nil
}

// TestReaderInit: a Reader set up in place reads like one from NewReader,
// allocating its buffer at the first read.
func TestReaderInit(t *testing.T) {
	pkt := wpkt(0x30, wstr("a/b"), bs("payload"))
	var r Reader
	r.Init(bytes.NewReader(wcat(pkt, pkt)), 8)
	if r.buf != nil {
		t.Fatalf("Init allocated a %d-byte buffer before any read", len(r.buf))
	}
	for range 2 {
		h, body, err := r.ReadPacket()
		if err != nil {
			t.Fatal(err)
		}
		var p Publish
		if err := p.Decode(h, body, V311); err != nil || string(p.Payload) != "payload" {
			t.Fatalf("packet: %+v, %v", p, err)
		}
	}
	if r.init != 16 {
		t.Fatalf("initial size %d, want the 16-byte minimum", r.init)
	}
}

// TestReaderLend: a Reader reads into a lent buffer; Release with part of a
// packet buffered copies it into a buffer of its own, so the lender may
// reuse its buffer, and the packet completes; a packet too large for the
// lent buffer moves to a buffer of the Reader's own.
func TestReaderLend(t *testing.T) {
	pkt := wpkt(0x32, wstr("lent/topic"), wu16(4), bs("payload"))
	lent := make([]byte, 32)
	src := &stepReader{chunks: [][]byte{pkt[:9]}}
	var r Reader
	r.Init(src, 16)
	r.Lend(lent)
	if _, _, err := r.ReadPacket(); !errors.Is(err, errNoData) {
		t.Fatalf("half a packet: %v, want %v", err, errNoData)
	}
	if r.Release() || r.Buffered() != 9 {
		t.Fatalf("Release kept %d bytes, want 9", r.Buffered())
	}
	for i := range lent {
		lent[i] = 0xFF // the lender reuses its buffer
	}
	src.chunks = [][]byte{pkt[9:]}
	h, body, err := r.ReadPacket()
	if err != nil {
		t.Fatal(err)
	}
	var p Publish
	if err := p.Decode(h, body, V311); err != nil || string(p.Topic) != "lent/topic" || string(p.Payload) != "payload" {
		t.Fatalf("packet across Release of a lent buffer: %+v, %v", p, err)
	}
	if !r.Release() || r.buf != nil {
		t.Fatal("Release of an idle Reader kept its buffer")
	}

	// Larger than the lent buffer: read into a buffer of r's own.
	big := wpkt(0x30, wstr("big"), bytes.Repeat([]byte("x"), 100))
	r.Lend(lent)
	src.chunks = [][]byte{big}
	_, body, err = r.ReadPacket()
	if err != nil || len(body) != len(big)-2 {
		t.Fatalf("big packet: %d bytes, %v", len(body), err)
	}
	if r.lent || &r.buf[0] == &lent[0] {
		t.Fatal("a packet larger than the lent buffer was read into it")
	}
}

// TestReaderPeekHeader: PeekHeader returns each packet's header and whole
// size, however the stream is split, without consuming it: ReadPacket then
// returns the same packet, and a peek at the end of the stream is io.EOF.
func TestReaderPeekHeader(t *testing.T) {
	vs, stream := validStream()
	for name, src := range streamReaders(stream) {
		t.Run(name, func(t *testing.T) {
			r := NewReader(src(), 16)
			for _, c := range vs {
				ph, size, err := r.PeekHeader()
				if err != nil {
					t.Fatalf("%s: PeekHeader: %v", c.id(), err)
				}
				if again, size2, err := r.PeekHeader(); err != nil || again != ph || size2 != size {
					t.Fatalf("%s: second peek %+v %d %v, want %+v %d", c.id(), again, size2, err, ph, size)
				}
				h, body, err := r.ReadPacket()
				if err != nil {
					t.Fatalf("%s: ReadPacket: %v", c.id(), err)
				}
				if h != ph || size != len(c.raw) || len(body) != h.Remaining {
					t.Fatalf("%s: peeked %+v size %d, read %+v body %d, want size %d", c.id(), ph, size, h, len(body), len(c.raw))
				}
			}
			if _, _, err := r.PeekHeader(); !errors.Is(err, io.EOF) {
				t.Fatalf("peek after the last packet: %v, want io.EOF", err)
			}
		})
	}
}
