package replay

import (
	"container/heap"
	"sync"

	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// mergeBuffer is how many selected events a partition's reader may hold
// ahead of the merge: the merge needs the next event of every partition,
// and a partition whose events are later than the others' waits here, its
// reader paused, instead of filling memory with the whole range.
const mergeBuffer = 256

// mergeChunk is how many events a partition's reader decodes before it
// hands them to the merge, so that it takes the merge's lock once per
// chunk rather than once per event.
const mergeChunk = 64

// item is one selected event waiting in the merge, with the envelope it
// was decoded into (which aliases its record's value).
type item struct {
	ev  Event
	env eventspb.Envelope
}

// streamState is how far a partition's reader is.
type streamState int

const (
	// reading: more of the range is to come.
	reading streamState = iota
	// caughtUp: the reader passed the end the partition had when the run
	// began; when following, it reads on.
	caughtUp
	// finished: nothing more comes.
	finished
)

// stream is one partition of one topic as the merge sees it: the span to
// read and the events its reader has selected and the merge not yet
// written, oldest first.
type stream struct {
	spec kafka.TopicSpec
	// rank is the topic's place in Options.topicSpecs, which breaks ties
	// between topics.
	rank int
	span

	buf     []*item // a ring of mergeBuffer events
	head, n int
	state   streamState
	idx     int // in the merge's heap, -1 when not in it
}

func newStream(spec kafka.TopicSpec, rank int, s span, size int) *stream {
	return &stream{spec: spec, rank: rank, span: s, buf: make([]*item, size), idx: -1}
}

func (s *stream) first() *item { return s.buf[s.head] }

// blocks reports whether the merge must wait for s: it has no event
// buffered, and its reader has not yet caught up with the log as it was
// when the run began.
func (s *stream) blocks() bool { return s.n == 0 && s.state == reading }

// merge is a k-way merge of the streams' events by time: it hands out the
// earliest next event of all streams, once every stream that has not
// caught up has one buffered (or has ended). Ties go to the topic ranked
// first, then to the lower partition; a partition's events keep their
// offset order. Readers push from their goroutines, one goroutine calls
// next.
type merge struct {
	mu       sync.Mutex
	ready    sync.Cond // next waits on it for an event or an end
	room     sync.Cond // push waits on it for room in a full stream
	heap     streamHeap
	blocking int // streams for which blocks() holds
	open     int // streams not finished
	stopped  bool
	items    sync.Pool
}

func newMerge(streams []*stream) *merge {
	m := &merge{items: sync.Pool{New: func() any { return new(item) }}}
	m.ready.L, m.room.L = &m.mu, &m.mu
	for _, s := range streams {
		if s.state != finished {
			m.open++
		}
		if s.blocks() {
			m.blocking++
		}
	}
	return m
}

// push appends evs to s's events, waiting for room while s is full, then
// sets s's state to state. It reports false when the merge stopped: the
// reader should stop too.
func (m *merge) push(s *stream, evs []*item, state streamState) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for len(evs) > 0 {
		for s.n == len(s.buf) && !m.stopped {
			m.room.Wait()
		}
		if m.stopped {
			return false
		}
		blocked := s.blocks()
		for ; len(evs) > 0 && s.n < len(s.buf); evs = evs[1:] {
			s.buf[(s.head+s.n)%len(s.buf)] = evs[0]
			s.n++
		}
		if s.idx < 0 {
			heap.Push(&m.heap, s)
		}
		if blocked {
			m.blocking--
		}
		m.ready.Signal()
	}
	if m.stopped {
		return false
	}
	if state > s.state {
		if s.blocks() {
			m.blocking--
		}
		if state == finished {
			m.open--
		}
		s.state = state
		m.ready.Signal()
	}
	return true
}

// next returns the next event in the merge's order, waiting until it is
// known, or nil when every stream finished or the merge stopped. Before it
// waits it calls idle, when not nil, once. The caller gives the item back
// with release once it is done with it.
func (m *merge) next(idle func() error) (*item, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	idled := idle == nil
	for {
		switch {
		case m.stopped:
			return nil, nil
		case m.blocking == 0 && len(m.heap) > 0:
			s := m.heap[0]
			it := s.first()
			s.buf[s.head] = nil
			s.head = (s.head + 1) % len(s.buf)
			if s.n == len(s.buf) {
				m.room.Broadcast()
			}
			s.n--
			if s.n == 0 {
				heap.Pop(&m.heap)
				if s.blocks() {
					m.blocking++
				}
			} else {
				heap.Fix(&m.heap, 0)
			}
			return it, nil
		case m.blocking == 0 && m.open == 0:
			return nil, nil
		case !idled:
			idled = true
			m.mu.Unlock()
			err := idle()
			m.mu.Lock()
			if err != nil {
				return nil, err
			}
			continue
		}
		m.ready.Wait()
	}
}

// stop ends the merge: next returns nil, push false, from now on.
func (m *merge) stop() {
	m.mu.Lock()
	m.stopped = true
	m.ready.Broadcast()
	m.room.Broadcast()
	m.mu.Unlock()
}

// newItem returns an item to decode an event into.
func (m *merge) newItem() *item {
	it, ok := m.items.Get().(*item)
	if !ok {
		it = new(item)
	}
	it.ev.Env = &it.env
	return it
}

// release gives it back, once the sink is done with its event.
func (m *merge) release(it *item) {
	it.env.Reset()
	it.ev = Event{}
	m.items.Put(it)
}

// streamHeap orders the streams that have events by their first event.
type streamHeap []*stream

func (h streamHeap) Len() int { return len(h) }

func (h streamHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	if c := a.first().ev.Time.Compare(b.first().ev.Time); c != 0 {
		return c < 0
	}
	if a.rank != b.rank {
		return a.rank < b.rank
	}
	return a.partition < b.partition
}

func (h streamHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}

func (h *streamHeap) Push(x any) {
	s := x.(*stream) //nolint:errcheck // container/heap pushes only what Push was given: streams
	s.idx = len(*h)
	*h = append(*h, s)
}

func (h *streamHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	old[len(old)-1] = nil
	s.idx = -1
	*h = old[:len(old)-1]
	return s
}
