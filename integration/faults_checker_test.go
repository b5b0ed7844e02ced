//go:build integration

package integration

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/shoal-mqtt/shoal/internal/testutil/pahoconn"
)

// The checker of the fault tests: publishers that number every message and
// record when each was acknowledged, persistent subscribers that record
// every delivery, and a report of what was lost (acknowledged, never
// delivered), repeated (none allowed at QoS 2), out of order per publisher,
// and the longest pause in deliveries. Clients reconnect (to addr, HAProxy
// in front of the gateways) when their connection ends, publishers with a
// clean session, subscribers resuming theirs.

// workloadConfig shapes a workload.
type workloadConfig struct {
	name      string        // prefix of client ids and topics
	addr      string        // where clients connect
	pubs      int           // publishers, each on a topic of its own
	subs      int           // subscribers, each of every publisher's topic
	qos       byte          // of the publishes and the subscriptions
	interval  time.Duration // between two publishes of one publisher
	inflight  int           // publishes a publisher has unacknowledged at most
	topicRoot string        // the topics are topicRoot/<publisher>
}

// workload runs a workloadConfig until stop.
type workload struct {
	t     *testing.T
	cfg   workloadConfig
	stopc chan struct{}
	wg    sync.WaitGroup
	began time.Time

	mu     sync.Mutex
	acked  []map[int]time.Time // per publisher: sequence -> acknowledged at
	sent   []int               // per publisher: messages sent
	failed int                 // publishes that got no acknowledgement (retried)
	ackLat []time.Duration     // PUBLISH to its acknowledgement
	subs   []*subLog
	errs   []string
}

// subLog is what one subscriber received.
type subLog struct {
	got     map[[2]int]int // (publisher, sequence) -> times received
	last    []int          // per publisher: the latest sequence received
	reorder int            // received after a later one of its publisher
	times   []time.Time    // every first delivery's arrival
	redials int
}

// startWorkload connects the subscribers (persistent sessions), then starts
// the publishers.
func startWorkload(t *testing.T, cfg workloadConfig) *workload {
	t.Helper()
	if cfg.inflight <= 0 {
		cfg.inflight = 1
	}
	w := &workload{t: t, cfg: cfg, stopc: make(chan struct{}), began: time.Now(),
		acked: make([]map[int]time.Time, cfg.pubs), sent: make([]int, cfg.pubs)}
	for i := range cfg.pubs {
		w.acked[i] = map[int]time.Time{}
	}
	ready := make(chan struct{}, cfg.subs)
	for i := range cfg.subs {
		s := &subLog{got: map[[2]int]int{}, last: slices.Repeat([]int{-1}, cfg.pubs)}
		w.subs = append(w.subs, s)
		w.wg.Go(func() { w.subscribe(i, s, ready) })
	}
	for range cfg.subs {
		select {
		case <-ready:
		case <-time.After(clusterWait):
			t.Fatalf("%s: subscribers not connected within %s", cfg.name, clusterWait)
		}
	}
	for i := range cfg.pubs {
		w.wg.Go(func() { w.publish(i) })
	}
	return w
}

func (w *workload) topic(pub int) string { return fmt.Sprintf("%s/%d", w.cfg.topicRoot, pub) }

// errorf records a failure of a client goroutine (they cannot call t.Fatal).
func (w *workload) errorf(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.errs) < 20 {
		w.errs = append(w.errs, fmt.Sprintf(format, args...))
	}
}

func (w *workload) stopped() bool {
	select {
	case <-w.stopc:
		return true
	default:
		return false
	}
}

// dial connects id (clean or resuming), retrying every 100 ms, as a device
// does, until it is accepted or the workload ends.
func (w *workload) dial(id string, clean bool, onMsg func(*paho.Publish)) *paho.Client {
	for {
		c, err := w.connect(id, clean, onMsg)
		if err == nil {
			return c
		}
		if w.stopped() {
			return nil
		}
		time.Sleep(100 * time.Millisecond) // paced as a device reconnects
	}
}

// connect makes one connection of id, its session kept for an hour; its
// Done channel closes when it ends. The test's cleanup disconnects it.
func (w *workload) connect(id string, clean bool, onMsg func(*paho.Publish)) (*paho.Client, error) {
	nc, err := net.DialTimeout("tcp", w.cfg.addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	c := paho.NewClient(paho.ClientConfig{
		Conn: pahoconn.Locked(nc), OnClientError: func(error) {},
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			if onMsg != nil {
				onMsg(pr.Packet)
			}
			return true, nil
		}},
	})
	ctx, cancel := context.WithTimeout(w.t.Context(), 10*time.Second)
	defer cancel()
	expiry := uint32(3600)
	ca, err := c.Connect(ctx, &paho.Connect{ClientID: id, CleanStart: clean, KeepAlive: 10,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry}})
	if err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("connect %s: %w", id, err)
	}
	if !clean && !ca.SessionPresent {
		w.errorf("%s resumed without its session", id)
	}
	w.t.Cleanup(func() { _ = c.Disconnect(&paho.Disconnect{}) })
	return c, nil
}

// subscribe runs subscriber i: it subscribes once (its session keeps the
// subscription) and resumes the session whenever the connection ends.
func (w *workload) subscribe(i int, s *subLog, ready chan<- struct{}) {
	id := fmt.Sprintf("%s-s-%d", w.cfg.name, i)
	onMsg := func(m *paho.Publish) {
		pub, seq, ok := parsePayload(string(m.Payload))
		if !ok {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		k := [2]int{pub, seq}
		s.got[k]++
		if s.got[k] > 1 {
			return
		}
		s.times = append(s.times, time.Now())
		if seq < s.last[pub] {
			s.reorder++
		} else {
			s.last[pub] = seq
		}
	}
	first := true
	for !w.stopped() {
		c := w.dial(id, first, onMsg)
		if c == nil {
			return
		}
		if first {
			ctx, cancel := context.WithTimeout(w.t.Context(), clusterWait)
			_, err := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: w.cfg.topicRoot + "/+", QoS: w.cfg.qos}}})
			cancel()
			if err != nil {
				w.errorf("%s: subscribe: %v", id, err)
				_ = c.Disconnect(&paho.Disconnect{})
				continue
			}
			first = false
			ready <- struct{}{}
		}
		select {
		case <-c.Done():
			w.mu.Lock()
			s.redials++
			w.mu.Unlock()
		case <-w.stopc:
			// Connected on, to receive what is still on its way; the
			// test's cleanup disconnects it.
			<-w.t.Context().Done()
			return
		}
	}
}

// publish runs publisher p: numbered messages at the configured interval,
// at most inflight unacknowledged. A publish that fails (its connection
// ended) is counted and not sent again: the checker holds the broker to
// the acknowledged ones only. The publisher then connects again.
func (w *workload) publish(p int) {
	id := fmt.Sprintf("%s-p-%d", w.cfg.name, p)
	c := w.dial(id, true, nil)
	if c == nil {
		return
	}
	sem := make(chan struct{}, w.cfg.inflight)
	tick := time.NewTicker(w.cfg.interval)
	defer tick.Stop()
	var pending sync.WaitGroup
	defer pending.Wait()
	for seq := 0; ; seq++ {
		select {
		case <-w.stopc:
			return
		case <-tick.C:
		}
		sem <- struct{}{}
		cur := c
		pending.Go(func() {
			defer func() { <-sem }()
			sentAt := time.Now()
			ctx, cancel := context.WithTimeout(w.t.Context(), clusterWait)
			_, err := cur.Publish(ctx, &paho.Publish{Topic: w.topic(p), QoS: w.cfg.qos, Payload: []byte(payload(p, seq))})
			cancel()
			w.mu.Lock()
			defer w.mu.Unlock()
			w.sent[p] = max(w.sent[p], seq+1)
			if err != nil {
				w.failed++ // not acknowledged: the checker does not count it
				return
			}
			w.acked[p][seq] = time.Now()
			w.ackLat = append(w.ackLat, time.Since(sentAt))
		})
		select {
		case <-c.Done():
			if c = w.dial(id, true, nil); c == nil {
				return
			}
		default:
		}
	}
}

// payload numbers message seq of publisher p.
func payload(p, seq int) string { return "p" + strconv.Itoa(p) + ":" + strconv.Itoa(seq) }

func parsePayload(s string) (p, seq int, ok bool) {
	a, b, found := strings.Cut(strings.TrimPrefix(s, "p"), ":")
	if !found {
		return 0, 0, false
	}
	p, err1 := strconv.Atoi(a)
	seq, err2 := strconv.Atoi(b)
	return p, seq, err1 == nil && err2 == nil
}

// faultReport is what check found.
type faultReport struct {
	acked, lost, repeats, reorder, failed, redials int
	gap, gapAt                                     time.Duration // the longest pause in first deliveries, and when it began (since the start)
	ackP99, ackMax                                 time.Duration
	drained                                        time.Duration // from stop to the last acknowledged message delivered
}

func (r faultReport) String() string {
	return fmt.Sprintf("%d acknowledged, %d lost, %d repeats, %d out of order, %d publishes unacknowledged, %d subscriber reconnects; longest pause in deliveries %s (at +%s); ack p99 %s, max %s; drained in %s",
		r.acked, r.lost, r.repeats, r.reorder, r.failed, r.redials, r.gap.Round(time.Millisecond), r.gapAt.Round(time.Second),
		r.ackP99.Round(time.Millisecond), r.ackMax.Round(time.Millisecond), r.drained.Round(time.Millisecond))
}

// stop ends the publishers, waits (up to clusterWait) until every
// acknowledged message reached every subscriber, and reports.
func (w *workload) stop() faultReport {
	w.t.Helper()
	close(w.stopc)
	stoppedAt := time.Now()
	var r faultReport
	complete := func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, s := range w.subs {
			for p, acks := range w.acked {
				for seq := range acks {
					if s.got[[2]int{p, seq}] == 0 {
						return false
					}
				}
			}
		}
		return true
	}
	// The publishers' last publishes end within clusterWait; what they
	// acknowledge after the stop counts too.
	deadline := time.Now().Add(clusterWait)
	for !complete() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond) // polled: nothing signals the last delivery
	}
	r.drained = time.Since(stoppedAt)
	time.Sleep(500 * time.Millisecond) // a quiet period: late repeats
	w.mu.Lock()
	defer w.mu.Unlock()
	r.failed = w.failed
	for _, s := range w.subs {
		r.reorder += s.reorder
		r.redials += s.redials
		for p, acks := range w.acked {
			for seq := range acks {
				if s.got[[2]int{p, seq}] == 0 {
					r.lost++
				}
			}
		}
		for _, n := range s.got {
			r.repeats += n - 1
		}
		ts := slices.Clone(s.times)
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		for i := 1; i < len(ts); i++ {
			if g := ts[i].Sub(ts[i-1]); g > r.gap && ts[i].Before(stoppedAt) {
				r.gap, r.gapAt = g, ts[i-1].Sub(w.began)
			}
		}
	}
	for _, acks := range w.acked {
		r.acked += len(acks)
	}
	lat := slices.Clone(w.ackLat)
	slices.Sort(lat)
	if n := len(lat); n > 0 {
		r.ackP99, r.ackMax = lat[n*99/100], lat[n-1]
	}
	for _, e := range w.errs {
		w.t.Error(e)
	}
	return r
}
