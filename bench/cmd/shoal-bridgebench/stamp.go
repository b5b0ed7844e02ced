package main

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"sync"
)

// A payload is plain text, so that stock clients print it as it is:
// "<send time in Unix nanoseconds> <publisher> <sequence>". The send time
// is the scheduled one, so that a stall shows as latency rather than as
// fewer samples. Probes, sent until the reader on the other side sees
// one, are "probe <n>".

// appendStamp appends the payload of message seq of publisher pub,
// scheduled at sentNs.
func appendStamp(dst []byte, sentNs int64, pub, seq int) []byte {
	dst = strconv.AppendInt(dst, sentNs, 10)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, int64(pub), 10)
	dst = append(dst, ' ')
	return strconv.AppendInt(dst, int64(seq), 10)
}

var probePrefix = []byte("probe ")

// errProbe is what parseStamp returns for a probe's payload.
var errProbe = errors.New("a probe")

// parseStamp reads a payload appendStamp wrote.
func parseStamp(b []byte) (sentNs int64, pub, seq int, err error) {
	if bytes.HasPrefix(b, probePrefix) {
		return 0, 0, 0, errProbe
	}
	f := bytes.Fields(b)
	if len(f) != 3 {
		return 0, 0, 0, fmt.Errorf("payload %q: %d fields, want 3", b, len(f))
	}
	if sentNs, err = strconv.ParseInt(string(f[0]), 10, 64); err != nil {
		return 0, 0, 0, fmt.Errorf("payload %q: send time: %w", b, err)
	}
	p, err := strconv.ParseUint(string(f[1]), 10, 31)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("payload %q: publisher: %w", b, err)
	}
	s, err := strconv.ParseUint(string(f[2]), 10, 31)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("payload %q: sequence: %w", b, err)
	}
	return sentNs, int(p), int(s), nil
}

// arrival is one message's send time and first arrival, in nanoseconds
// on the benchmark's clock; first is 0 until it arrives.
type arrival struct {
	sent, first int64
}

// recvLog records every message that arrives on the other side, per
// publisher and sequence number, for the accounting and the latencies
// computed once the run is over (and for the catch-up, while it runs).
// Safe for concurrent use.
type recvLog struct {
	mu        sync.Mutex
	pubs      [][]arrival // by publisher, by sequence
	maxSeq    []int       // highest sequence seen per publisher, -1 before any
	arrived   uint64      // every arrival, repeats included
	repeats   uint64      // arrivals of a message that had arrived
	reordered uint64      // first arrivals after a higher sequence of the same publisher
	probes    uint64
	malformed uint64
	firstBad  string // the first malformed payload, for the report
}

// maxPublishers bounds the publisher number a payload may carry.
const maxPublishers = 1 << 16

// observe records the arrival at recvNs of payload b.
func (l *recvLog) observe(b []byte, recvNs int64) {
	sentNs, pub, seq, err := parseStamp(b)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case errors.Is(err, errProbe):
		l.probes++
		return
	case err == nil && pub >= maxPublishers:
		err = fmt.Errorf("payload %q: publisher %d beyond %d", b, pub, maxPublishers)
	}
	if err != nil {
		if l.malformed == 0 {
			l.firstBad = err.Error()
		}
		l.malformed++
		return
	}
	l.arrived++
	for len(l.pubs) <= pub {
		l.pubs = append(l.pubs, nil)
		l.maxSeq = append(l.maxSeq, -1)
	}
	s := l.pubs[pub]
	if seq >= len(s) {
		s = append(s, make([]arrival, seq+1-len(s))...)
		s = s[:cap(s)]
		l.pubs[pub] = s
	}
	a := &s[seq]
	if a.first != 0 {
		l.repeats++
		return
	}
	a.sent, a.first = sentNs, max(recvNs, 1)
	if seq < l.maxSeq[pub] {
		l.reordered++
	}
	l.maxSeq[pub] = max(l.maxSeq[pub], seq)
}

// probed returns the number of probes that arrived.
func (l *recvLog) probed() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.probes
}

// total returns the arrivals so far, repeats included.
func (l *recvLog) total() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.arrived
}

// counts is the accounting of a run against what each publisher sent.
type counts struct {
	Sent      uint64 `json:"sent"`
	Received  uint64 `json:"received"` // distinct messages of those sent
	Lost      uint64 `json:"lost"`     // sent and never arrived
	Repeats   uint64 `json:"repeats"`
	Reordered uint64 `json:"reordered"`
	Unknown   uint64 `json:"unknown,omitempty"` // arrived, never sent (a sequence beyond the publisher's count)
	Other     uint64 `json:"other,omitempty"`   // from publishers not of this run
	Malformed uint64 `json:"malformed,omitempty"`
	FirstBad  string `json:"first_malformed,omitempty"`
}

// account counts l against sent, the messages each publisher sent.
func (l *recvLog) account(sent []uint64) counts { return l.accountFrom(0, sent) }

// accountFrom counts l against sent, the messages publishers base,
// base+1, … sent: the run of a log that several runs share. Repeats and
// reordering are the whole log's.
func (l *recvLog) accountFrom(base int, sent []uint64) counts {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := counts{Repeats: l.repeats, Reordered: l.reordered, Malformed: l.malformed, FirstBad: l.firstBad}
	for i, s := range sent {
		c.Sent += s
		var have []arrival
		if base+i < len(l.pubs) {
			have = l.pubs[base+i]
		}
		for seq := range s {
			if seq < uint64(len(have)) && have[seq].first != 0 {
				c.Received++
			} else {
				c.Lost++
			}
		}
	}
	for pub, have := range l.pubs {
		i := pub - base
		var s uint64
		if i >= 0 && i < len(sent) {
			s = sent[i]
		}
		for seq := range have {
			if have[seq].first == 0 || uint64(seq) < s {
				continue
			}
			if i >= 0 && i < len(sent) {
				c.Unknown++
			} else {
				c.Other++
			}
		}
	}
	return c
}

// each calls f for every message that arrived, in publisher and sequence
// order.
func (l *recvLog) each(f func(pub, seq int, a arrival)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for pub, have := range l.pubs {
		for seq, a := range have {
			if a.first != 0 {
				f(pub, seq, a)
			}
		}
	}
}
