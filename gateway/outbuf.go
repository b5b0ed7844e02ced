package gateway

import (
	"io"
	"net"
)

// borrowThreshold is the payload size from which a PUBLISH payload is
// written by reference (writev) rather than copied into the out buffer.
const borrowThreshold = 1024

// outBuf collects the bytes waiting to be written to one client: packets
// encoded into an owned buffer, and large payloads borrowed by reference
// (they alias the delivery record, shared by every subscriber on this
// gateway, and are released to the garbage collector after the write).
type outBuf struct {
	b        []byte
	segs     []segment // empty unless something was borrowed
	sealed   int       // end of b covered by segs
	borrowed int       // bytes in borrowed segments
	iov      net.Buffers
}

type segment struct {
	start, end int    // owned range of b, when borrowed == nil
	borrowed   []byte // a borrowed payload
}

func (o *outBuf) len() int { return len(o.b) + o.borrowed }

// borrow appends a reference to p after everything appended so far.
func (o *outBuf) borrow(p []byte) {
	if len(o.b) > o.sealed {
		o.segs = append(o.segs, segment{start: o.sealed, end: len(o.b)})
		o.sealed = len(o.b)
	}
	o.segs = append(o.segs, segment{borrowed: p})
	o.borrowed += len(p)
}

// vectors returns everything to write, in order, as slices of o and of
// the borrowed payloads (valid until reset; writing may consume them).
func (o *outBuf) vectors() [][]byte {
	if len(o.segs) == 0 {
		o.iov = append(o.iov[:0], o.b)
		return o.iov
	}
	if len(o.b) > o.sealed {
		o.segs = append(o.segs, segment{start: o.sealed, end: len(o.b)})
		o.sealed = len(o.b)
	}
	o.iov = o.iov[:0]
	for _, s := range o.segs {
		if s.borrowed != nil {
			o.iov = append(o.iov, s.borrowed)
		} else {
			o.iov = append(o.iov, o.b[s.start:s.end])
		}
	}
	return o.iov
}

// writeTo writes everything to w.
func (o *outBuf) writeTo(w io.Writer) (int64, error) {
	if len(o.segs) == 0 {
		n, err := w.Write(o.b)
		return int64(n), err
	}
	iov := net.Buffers(o.vectors())
	return iov.WriteTo(w)
}

// reset empties o, keeping its capacity (and dropping borrowed references).
func (o *outBuf) reset() {
	for i := range o.segs {
		o.segs[i] = segment{}
	}
	for i := range o.iov {
		o.iov[i] = nil
	}
	o.b, o.segs, o.iov = o.b[:0], o.segs[:0], o.iov[:0]
	o.sealed, o.borrowed = 0, 0
	if cap(o.b) > 64<<10 { // do not keep a burst's buffer forever
		o.b = nil
	}
}
