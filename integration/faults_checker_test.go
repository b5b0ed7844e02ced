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
	"github.com/eclipse/paho.golang/paho/session/state"

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
	wg    sync.WaitGroup // every client goroutine
	pubs  sync.WaitGroup // the publishers: done once each publish has its answer
	began time.Time

	mu      sync.Mutex
	acked   []map[int]time.Time  // per publisher: sequence -> acknowledged at
	sentAt  []map[int]time.Time  // per publisher: sequence -> sent at
	sent    []int                // per publisher: messages sent
	faultAt time.Time            // when the fault began (markFault)
	failed  int                  // publishes that got no acknowledgement (retried)
	ackLat  []time.Duration      // PUBLISH to its acknowledgement
	lastAt  map[[2]int]time.Time // (publisher, sequence) -> its last subscriber's first arrival
	subs    []*subLog
	errs    []string
	ends    []string // why connections ended before the stop, the first ones
}

// subLog is what one subscriber received.
type subLog struct {
	got     map[[2]int]int // (publisher, sequence) -> times received
	last    []int          // per publisher: the latest sequence received
	reorder int            // received after a later one of its publisher
	times   []time.Time    // every first delivery's arrival
	resumed []time.Time    // per publisher: the first arrival of a message sent after the fault began
	redials int
	// how is each first delivery's packet identifier, DUP flag and
	// connection (by redials), to say what a repeat was.
	how     map[[2]int]string
	repeats []string // what each repeat was, the first ones
}

// startWorkload connects the subscribers (persistent sessions), then starts
// the publishers.
func startWorkload(t *testing.T, cfg workloadConfig) *workload {
	t.Helper()
	if cfg.inflight <= 0 {
		cfg.inflight = 1
	}
	w := &workload{t: t, cfg: cfg, stopc: make(chan struct{}), began: time.Now(),
		acked: make([]map[int]time.Time, cfg.pubs), sentAt: make([]map[int]time.Time, cfg.pubs), sent: make([]int, cfg.pubs),
		lastAt: map[[2]int]time.Time{}}
	for i := range cfg.pubs {
		w.acked[i], w.sentAt[i] = map[int]time.Time{}, map[int]time.Time{}
	}
	ready := make(chan struct{}, cfg.subs)
	for i := range cfg.subs {
		s := &subLog{got: map[[2]int]int{}, last: slices.Repeat([]int{-1}, cfg.pubs), resumed: make([]time.Time, cfg.pubs), how: map[[2]int]string{}}
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
		w.pubs.Add(1)
		w.wg.Go(func() {
			defer w.pubs.Done()
			w.publish(i)
		})
	}
	return w
}

// markFault notes that the fault begins now: the report says how long
// after it every publisher's messages reached every subscriber again.
func (w *workload) markFault() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.faultAt = time.Now()
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

// ended records why a connection of id ended, until the workload stops.
func (w *workload) ended(id, why string) {
	if w.stopped() {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.ends) < 20 {
		w.ends = append(w.ends, fmt.Sprintf("%s at %s: %s", id, utcMilli(time.Now()), why))
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
func (w *workload) dial(id string, clean bool, st *state.State, onMsg func(*paho.Publish)) *paho.Client {
	for {
		c, err := w.connect(id, clean, st, onMsg, func(why string) { w.ended(id, why) })
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
// Done channel closes when it ends. The test's cleanup disconnects it. st
// is the client's side of the session, kept across its connections as a
// device keeps it (nil: a new one for this connection): with it a QoS 2
// PUBLISH the broker sends again (DUP) after the connection ended before
// it had the PUBREC is recognised and not delivered twice, as MQTT
// requires of a client (MQTT-4.3.3-9); without it the checker would count
// the broker's lawful retransmission as a repeat.
// onEnd hears why the connection ended, when it was not the client's own
// DISCONNECT.
func (w *workload) connect(id string, clean bool, st *state.State, onMsg func(*paho.Publish), onEnd func(why string)) (*paho.Client, error) {
	nc, err := net.DialTimeout("tcp", w.cfg.addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	cfg := paho.ClientConfig{
		Conn:          pahoconn.Locked(nc),
		OnClientError: func(err error) { onEnd(err.Error()) },
		OnServerDisconnect: func(d *paho.Disconnect) {
			why := fmt.Sprintf("the server's DISCONNECT, reason 0x%02x", d.ReasonCode)
			if d.Properties != nil && d.Properties.ReasonString != "" {
				why += ": " + d.Properties.ReasonString
			}
			onEnd(why)
		},
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			if onMsg != nil {
				onMsg(pr.Packet)
			}
			return true, nil
		}},
	}
	if st != nil {
		cfg.Session = st
	}
	c := paho.NewClient(cfg)
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
		how := fmt.Sprintf("packet id %d, dup %v, connection %d, at %s", m.PacketID, m.Duplicate(), s.redials, time.Now().Format("15:04:05.000"))
		if s.got[k] > 1 {
			if len(s.repeats) < 10 {
				s.repeats = append(s.repeats, fmt.Sprintf("%s: %s again: %s; first: %s", id, payload(pub, seq), how, s.how[k]))
			}
			return
		}
		s.how[k] = how
		now := time.Now()
		s.times = append(s.times, now)
		w.lastAt[k] = now
		if at, ok := w.sentAt[pub][seq]; ok && !w.faultAt.IsZero() && !at.Before(w.faultAt) && s.resumed[pub].IsZero() {
			s.resumed[pub] = now
		}
		if seq < s.last[pub] {
			s.reorder++
		} else {
			s.last[pub] = seq
		}
	}
	st := state.NewInMemory()
	w.t.Cleanup(func() { _ = st.Close() })
	first := true
	for !w.stopped() {
		c := w.dial(id, first, st, onMsg)
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
	c := w.dial(id, true, nil, nil)
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
			w.mu.Lock()
			w.sentAt[p][seq] = sentAt
			w.mu.Unlock()
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
			if c = w.dial(id, true, nil, nil); c == nil {
				return
			}
		default:
		}
	}
}

// utcMilli is t as `shoal trace` prints times.
func utcMilli(t time.Time) string { return t.UTC().Format("15:04:05.000") }

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
	lostWhat                                       []string      // the first lost messages, which subscriber missed them
	lostMsgs                                       [][2]int      // the first lost messages: (publisher, sequence), each once
	gap, gapAt                                     time.Duration // the longest pause in first deliveries, and when it began (since the start)
	gapP50                                         time.Duration // the median of the subscribers' longest pauses
	ackP99, ackMax                                 time.Duration
	drained                                        time.Duration // from stop to the last acknowledged message delivered
	// resumed is how long after the fault began every publisher's
	// messages sent since reached every subscriber (the slowest first
	// delivery); -1 when one never did or no fault was marked.
	resumed time.Duration
	// slowest is the message sent since the fault began that took longest
	// to reach its last subscriber, slowestLat that time, and slowestWhat
	// when it was sent, acknowledged and delivered (UTC, to set beside
	// `shoal trace`).
	slowest     [2]int
	slowestLat  time.Duration
	slowestWhat string
}

func (r faultReport) String() string {
	resumed := "never"
	if r.resumed >= 0 {
		resumed = r.resumed.Round(time.Millisecond).String()
	}
	return fmt.Sprintf("%d acknowledged, %d lost, %d repeats, %d out of order, %d publishes unacknowledged, %d subscriber reconnects; longest pause in deliveries %s (at +%s), median of the subscribers' longest %s; first delivery of every stream after the fault in %s; ack p99 %s, max %s; drained in %s",
		r.acked, r.lost, r.repeats, r.reorder, r.failed, r.redials, r.gap.Round(time.Millisecond), r.gapAt.Round(time.Second),
		r.gapP50.Round(time.Millisecond), resumed,
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
	// The publishers' last publishes end within clusterWait, and what they
	// acknowledge after the stop counts too: the wait for deliveries
	// begins once every publish has its answer. Begun before, a publish
	// acknowledged after the last delivery it waited for counted as lost
	// (three false losses in GatewayPartition and RouterKill runs).
	pubsDone := make(chan struct{})
	go func() { w.pubs.Wait(); close(pubsDone) }()
	select {
	case <-pubsDone:
	case <-time.After(2 * clusterWait):
		w.t.Errorf("%s: publishers not done within %s of the stop", w.cfg.name, 2*clusterWait)
	}
	deadline := time.Now().Add(clusterWait)
	for !complete() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond) // polled: nothing signals the last delivery
	}
	r.drained = time.Since(stoppedAt)
	time.Sleep(500 * time.Millisecond) // a quiet period: late repeats
	w.mu.Lock()
	defer w.mu.Unlock()
	r.failed = w.failed
	r.resumed = -1
	if !w.faultAt.IsZero() {
		r.resumed = 0
	}
	for k, at := range w.lastAt {
		sent, ok := w.sentAt[k[0]][k[1]]
		if !ok || w.faultAt.IsZero() || sent.Before(w.faultAt) || at.Sub(sent) <= r.slowestLat {
			continue
		}
		r.slowest, r.slowestLat = k, at.Sub(sent)
		acked := "never acknowledged"
		if a, ok := w.acked[k[0]][k[1]]; ok {
			acked = "acknowledged " + utcMilli(a)
		}
		r.slowestWhat = fmt.Sprintf("%s sent %s (+%s after the fault began), %s, at its last subscriber %s",
			payload(k[0], k[1]), utcMilli(sent), sent.Sub(w.faultAt).Round(time.Millisecond), acked, utcMilli(at))
	}
	var longest []time.Duration
	for si, s := range w.subs {
		for _, at := range s.resumed {
			if at.IsZero() {
				r.resumed = -1
			} else if r.resumed >= 0 {
				r.resumed = max(r.resumed, at.Sub(w.faultAt))
			}
		}
		r.reorder += s.reorder
		r.redials += s.redials
		for p, acks := range w.acked {
			for seq, at := range acks {
				if s.got[[2]int{p, seq}] == 0 {
					r.lost++
					if k := [2]int{p, seq}; len(r.lostMsgs) < 3 && !slices.Contains(r.lostMsgs, k) {
						r.lostMsgs = append(r.lostMsgs, k)
					}
					if len(r.lostWhat) < 10 {
						r.lostWhat = append(r.lostWhat, fmt.Sprintf("subscriber %d (reconnected %d times) never got publisher %d's message %d, acknowledged %s after the fault began",
							si, s.redials, p, seq, at.Sub(w.faultAt).Round(time.Millisecond)))
					}
				}
			}
		}
		for _, n := range s.got {
			r.repeats += n - 1
		}
		ts := slices.Clone(s.times)
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		var own time.Duration
		for i := 1; i < len(ts); i++ {
			g := ts[i].Sub(ts[i-1])
			if !ts[i].Before(stoppedAt) {
				continue
			}
			own = max(own, g)
			if g > r.gap {
				r.gap, r.gapAt = g, ts[i-1].Sub(w.began)
			}
		}
		longest = append(longest, own)
	}
	if len(longest) > 0 {
		slices.Sort(longest)
		r.gapP50 = longest[len(longest)/2]
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
	for _, s := range w.subs {
		for _, r := range s.repeats {
			w.t.Logf("repeat: %s", r)
		}
	}
	for _, l := range r.lostWhat {
		w.t.Logf("lost: %s", l)
	}
	for _, e := range w.ends {
		w.t.Logf("connection ended: %s", e)
	}
	return r
}
