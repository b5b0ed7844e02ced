package load

// trackWindow is how far back (in sequence numbers) a Tracker remembers
// which messages arrived, to tell a duplicate from a late arrival.
const trackWindow = 1024

// Tracker follows the sequence numbers one subscriber receives from one
// publisher. Sequence numbers start at 0 and grow by one per message, and
// MQTT keeps a publisher's order on a topic, so a number above the next
// expected one means the ones skipped are missing (counted lost unless they
// arrive late), and a number below it is a duplicate or a late arrival; a
// bitmap of the last trackWindow numbers tells which. The zero value is
// ready to use. Not safe for concurrent use: its subscriber's reader
// goroutine owns it.
type Tracker struct {
	next      uint64 // one above the highest sequence number seen
	unique    uint64
	dups      uint64
	reordered uint64 // arrived after a higher number
	stale     uint64 // below next by more than trackWindow: cannot tell
	seen      [trackWindow / 64]uint64
}

func (t *Tracker) bit(seq uint64) (word int, mask uint64) {
	i := seq % trackWindow
	return int(i / 64), 1 << (i % 64)
}

// Observe records the arrival of seq and reports whether it is the first
// arrival of that number.
func (t *Tracker) Observe(seq uint32) bool {
	s := uint64(seq)
	switch {
	case s >= t.next:
		if s-t.next >= trackWindow {
			t.seen = [trackWindow / 64]uint64{}
		} else {
			for m := t.next; m < s; m++ { // at most trackWindow steps
				w, b := t.bit(m)
				t.seen[w] &^= b
			}
		}
		w, b := t.bit(s)
		t.seen[w] |= b
		t.next = s + 1
		t.unique++
		return true
	case t.next-s > trackWindow:
		t.stale++
		return false
	}
	w, b := t.bit(s)
	if t.seen[w]&b != 0 {
		t.dups++
		return false
	}
	t.seen[w] |= b
	t.unique++
	t.reordered++
	return true
}

// TrackCounts is what a Tracker (or a sum of them) saw.
type TrackCounts struct {
	// Unique is the number of distinct sequence numbers received.
	Unique uint64 `json:"unique"`
	// Duplicates arrived again after a first arrival.
	Duplicates uint64 `json:"duplicates"`
	// Reordered arrived after a higher sequence number.
	Reordered uint64 `json:"reordered"`
	// Stale arrived too far behind to tell a duplicate from a late one.
	Stale uint64 `json:"stale,omitempty"`
	// Lost is the number of sequence numbers below the highest received
	// that never arrived: a definite loss, since order is kept.
	Lost uint64 `json:"lost"`
	// Tail is the number of messages sent after the highest received: not
	// delivered by the end of the drain (lost, or still queued).
	Tail uint64 `json:"tail"`
}

// Counts returns what t saw, given how many messages its publisher sent.
func (t *Tracker) Counts(sent uint64) TrackCounts {
	c := TrackCounts{Unique: t.unique, Duplicates: t.dups, Reordered: t.reordered, Stale: t.stale}
	if t.next > t.unique {
		c.Lost = t.next - t.unique
	}
	if sent > t.next {
		c.Tail = sent - t.next
	}
	return c
}

// Add adds o to c.
func (c *TrackCounts) Add(o TrackCounts) {
	c.Unique += o.Unique
	c.Duplicates += o.Duplicates
	c.Reordered += o.Reordered
	c.Stale += o.Stale
	c.Lost += o.Lost
	c.Tail += o.Tail
}
