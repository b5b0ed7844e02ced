package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

// maxErrors is the number of distinct error messages a result keeps.
const maxErrors = 20

// Buffer sizes: subscribers read many deliveries per system call;
// publishers write many messages per system call; idle connections are
// small.
const (
	subReadBuf   = 64 << 10
	subWriteBuf  = 4 << 10
	pubReadBuf   = 4 << 10
	pubWriteBuf  = 64 << 10
	idleBuf      = 256
	recvMaxAsked = 65535
)

type runner struct {
	cfg      Config
	plan     plan
	progress io.Writer
	base     time.Time
	t0       time.Duration // when publishing (or connecting) started
	hists    *histShards
	lag      *histShards // paced publishers: actual minus scheduled send time
	broker   *Proc       // nil without a broker PID
	self     *Proc
	procs    []*Proc // Config.Processes, in order
	// The addresses of Config.Addr and of the subscribers (SubscriberAddr,
	// else Addr): client i connects to the address i modulo their number.
	pubAddrs, subAddrs []string

	measuring atomic.Bool
	stopping  atomic.Bool
	stop      chan struct{} // closed when publishers must stop
	done      chan struct{} // closed when the run ends (stops the pinger)

	mu    sync.Mutex
	conns []*conn
	errs  []string
	errN  int

	pubs []*publisher
	subs []*subscriber
	// limit, when > 0, is the number of messages each publisher sends
	// (the offline scenario's Queued).
	limit uint32
	// resumed counts the CONNACKs with Session Present of the subscribers
	// that came back (offline scenario).
	resumed atomic.Int64
}

type publisher struct {
	spec   pubSpec
	index  uint32
	topic  []byte
	c      *conn
	window *pubWindow // nil without an end-to-end window
	sent   atomic.Uint64
	err    error // written by its goroutine before it ends
}

type subscriber struct {
	r         *runner
	spec      subSpec
	index     int
	c         *conn
	recv      atomic.Uint64
	back      time.Duration // when its connection was made (run clock)
	first     atomic.Int64  // run clock of its first delivery on that connection, ns; 0 = none yet
	last      atomic.Int64  // run clock of its latest delivery, ns
	trackers  []Tracker     // reader goroutine only, parallel to spec.pubs
	windows   []*pubWindow  // parallel to spec.pubs; nil without windows
	malformed uint64        // reader goroutine only
	foreign   uint64        // reader goroutine only
}

// Run runs one scenario against the broker at cfg.Addr and returns what it
// measured. It writes a progress line to progress every second. It returns
// within cfg.Deadline() whatever the broker does. A run that could not set
// up its clients returns an error; failures during the run (lost
// connections, refused publishes, losses) are in the result.
func Run(ctx context.Context, cfg Config, progress io.Writer) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	p, err := newPlan(cfg.Scenario, cfg.Prefix, cfg.Clients, cfg.Publishers)
	if err != nil {
		return nil, err
	}
	if cfg.Scenario == ScenarioLatency && cfg.Rate == 0 {
		cfg.Rate = DefaultLatencyRate
	}
	r := &runner{
		cfg:      cfg,
		plan:     p,
		progress: progress,
		base:     time.Now(),
		hists:    newHistShards(16),
		lag:      newHistShards(4),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		pubAddrs: addrs(cfg.Addr),
	}
	r.subAddrs = r.pubAddrs
	if cfg.SubscriberAddr != "" {
		r.subAddrs = addrs(cfg.SubscriberAddr)
	}
	if cfg.BrokerPID != 0 {
		if r.broker, err = NewProc(cfg.BrokerPID); err != nil {
			return nil, fmt.Errorf("broker process %d: %w", cfg.BrokerPID, err)
		}
	}
	if r.self, err = NewProc(0); err != nil {
		return nil, fmt.Errorf("own process: %w", err)
	}
	for _, p := range cfg.Processes {
		pr, err := NewProc(p.PID)
		if err != nil {
			return nil, fmt.Errorf("process %s (%d): %w", p.Name, p.PID, err)
		}
		r.procs = append(r.procs, pr)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Deadline())
	defer cancel()
	watchdog := make(chan struct{})
	go func() { // the run's bound: closing every connection unblocks everything
		defer close(watchdog)
		select {
		case <-ctx.Done():
			r.closeAll(false)
		case <-r.done:
		}
	}()
	defer func() { close(r.done); <-watchdog }()
	if cfg.KeepAlive > 0 {
		go r.pinger(cfg.KeepAlive / 2)
	}

	res := r.newResult()
	switch cfg.Scenario {
	case ScenarioConnections:
		err = r.runConnections(ctx, res)
	case ScenarioOffline:
		err = r.runOffline(ctx, res)
	default:
		err = r.runTraffic(ctx, res)
	}
	res.ElapsedSec = r.now().Seconds()
	r.mu.Lock()
	res.Errors, res.ErrorsN = slices.Clone(r.errs), r.errN
	r.mu.Unlock()
	if err != nil {
		return res, err
	}
	if ctx.Err() != nil {
		return res, fmt.Errorf("run cut short after %.1fs by its deadline (%s): %w",
			res.ElapsedSec, cfg.Deadline(), ctx.Err())
	}
	return res, nil
}

func (r *runner) now() time.Duration { return time.Since(r.base) }

func (r *runner) newResult() *Result {
	c := &r.cfg
	res := &Result{
		Name: c.Name, Label: c.Label, Round: c.Round,
		Scenario: c.Scenario, Addr: c.Addr, SubscriberAddr: c.SubscriberAddr, Protocol: c.Version.String(), QoS: int(c.QoS),
		PayloadBytes: c.Payload, Publishers: len(r.plan.pubs), Subscribers: len(r.plan.subs),
		Connections: len(r.plan.pubs) + len(r.plan.subs) + r.plan.idle,
		Rate:        c.Rate, WarmupSec: c.Warmup.Seconds(), DurationSec: c.Duration.Seconds(),
		Started: r.base.UTC().Format(time.RFC3339),
	}
	if c.QoS > 0 && len(r.plan.pubs) > 0 {
		res.Inflight = c.Inflight
	}
	if len(r.plan.pubs) > 0 {
		res.Window = c.Window
	}
	return res
}

func (r *runner) addErr(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errN++
	msg := err.Error()
	if len(r.errs) < maxErrors && !slices.Contains(r.errs, msg) {
		r.errs = append(r.errs, msg)
	}
}

func (r *runner) register(c *conn) {
	r.mu.Lock()
	r.conns = append(r.conns, c)
	r.mu.Unlock()
}

func (r *runner) snapshotConns() []*conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.conns)
}

// closeAll closes every connection, gracefully (DISCONNECT first) or not,
// 32 at a time.
func (r *runner) closeAll(graceful bool) {
	conns := r.snapshotConns()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(32, len(conns)) {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(conns)); i = next.Add(1) - 1 {
				c := conns[i]
				if !graceful {
					c.closing.Store(true)
					_ = c.nc.Close()
				}
				c.close()
			}
		})
	}
	wg.Wait()
}

// waitReaders waits (at most 5 s) for every reader goroutine to end, after
// closeAll.
func (r *runner) waitReaders() {
	limit := time.After(5 * time.Second)
	for _, c := range r.snapshotConns() {
		select {
		case <-c.done:
		case <-limit:
			r.addErr(errors.New("reader goroutines still running 5s after closing"))
			return
		}
	}
}

func (r *runner) pinger(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-r.done:
			return
		case <-t.C:
		}
		for _, c := range r.snapshotConns() {
			if c.alive() && !c.closing.Load() {
				if err := c.ping(); err != nil {
					r.addErr(fmt.Errorf("keepalive: %w", err))
				}
			}
		}
	}
}

// connectAll runs open(i) for i in [0, n) with the configured concurrency
// and returns the number that failed; the errors go to the result.
func (r *runner) connectAll(n int, open func(i int) error) int {
	var next atomic.Int64
	var failed atomic.Int64
	var wg sync.WaitGroup
	for range min(r.cfg.ConnectConcurrency, n) {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				if err := open(int(i)); err != nil {
					failed.Add(1)
					r.addErr(err)
				}
			}
		})
	}
	wg.Wait()
	return int(failed.Load())
}

func (r *runner) dialConfig(addr, clientID string, readBuf, writeBuf int) dialConfig {
	return dialConfig{
		Addr:          addr,
		ClientID:      clientID,
		Version:       r.cfg.Version,
		KeepAlive:     uint16(r.cfg.KeepAlive / time.Second),
		ReadBuf:       readBuf,
		WriteBuf:      writeBuf,
		ReceiveMax:    recvMaxAsked,
		Username:      r.cfg.Username,
		Password:      r.cfg.Password,
		SessionExpiry: uint32(r.cfg.SessionExpiry / time.Second),
		Resume:        r.cfg.Resume,
		EndSession:    !r.cfg.KeepSessions,
	}
}

// setUp connects and subscribes every subscriber, then connects every
// publisher.
func (r *runner) setUp(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.SetupTimeout)
	defer cancel()
	r.build()
	if err := r.connectSubscribers(ctx, false); err != nil {
		return err
	}
	return r.connectPublishers(ctx)
}

// build makes the plan's publishers and subscribers, not yet connected.
func (r *runner) build() {
	r.pubs = make([]*publisher, len(r.plan.pubs))
	for i, spec := range r.plan.pubs {
		r.pubs[i] = &publisher{spec: spec, index: uint32(i), topic: []byte(spec.topic)}
		if r.cfg.Window > 0 {
			r.pubs[i].window = newPubWindow()
		}
	}
	r.subs = make([]*subscriber, len(r.plan.subs))
	for i, spec := range r.plan.subs {
		s := &subscriber{r: r, spec: spec, index: i, trackers: make([]Tracker, len(spec.pubs))}
		if r.cfg.Window > 0 {
			s.windows = make([]*pubWindow, len(spec.pubs))
			for j, pub := range spec.pubs {
				s.windows[j] = r.pubs[pub].window
			}
		}
		r.subs[i] = s
	}
}

// connectSubscribers connects every subscriber and subscribes it, or, to
// resume the sessions the offline scenario left, connects it with Clean
// Start 0 and counts the sessions the broker had kept.
func (r *runner) connectSubscribers(ctx context.Context, resume bool) error {
	failed := r.connectAll(len(r.subs), func(i int) error {
		s := r.subs[i]
		dc := r.dialConfig(r.subAddrs[i%len(r.subAddrs)], s.spec.clientID, subReadBuf, subWriteBuf)
		dc.Resume = dc.Resume || resume
		c, err := dial(ctx, dc)
		if err != nil {
			return err
		}
		s.back = r.now()
		if resume {
			if c.sessionPresent {
				r.resumed.Add(1)
			}
		} else if err := c.subscribe(ctx, s.spec.filters, r.cfg.QoS); err != nil {
			_ = c.nc.Close()
			return fmt.Errorf("subscribe %s: %w", s.spec.clientID, err)
		}
		c.onPublish = s.onPublish
		s.c = c
		r.register(c)
		c.start()
		return nil
	})
	if failed > 0 {
		return fmt.Errorf("set up: %d of %d subscribers failed to connect or subscribe", failed, len(r.subs))
	}
	return nil
}

// connectPublishers connects every publisher.
func (r *runner) connectPublishers(ctx context.Context) error {
	failed := r.connectAll(len(r.pubs), func(i int) error {
		p := r.pubs[i]
		c, err := dial(ctx, r.dialConfig(r.pubAddrs[i%len(r.pubAddrs)], p.spec.clientID, pubReadBuf, pubWriteBuf))
		if err != nil {
			return err
		}
		if r.cfg.QoS > 0 {
			c.enableWindow(r.cfg.Inflight)
		}
		p.c = c
		r.register(c)
		c.start()
		return nil
	})
	if failed > 0 {
		return fmt.Errorf("set up: %d of %d publishers failed to connect", failed, len(r.pubs))
	}
	return nil
}

func (s *subscriber) onPublish(p *packet.Publish) {
	now := s.r.now()
	s.recv.Add(1)
	if s.first.Load() == 0 {
		s.first.CompareAndSwap(0, int64(now))
	}
	s.last.Store(int64(now))
	st, err := ReadStamp(p.Payload)
	if err != nil {
		s.malformed++
		return
	}
	i := s.slot(st.Publisher)
	if i < 0 {
		s.foreign++
		return
	}
	s.trackers[i].Observe(st.Seq)
	if s.windows != nil {
		s.windows[i].advance(st.Seq)
	}
	if s.r.measuring.Load() {
		s.r.hists.record(s.index, int64(now)-st.SentNs)
	}
}

// slot returns the index of publisher pub in s.spec.pubs, or -1.
func (s *subscriber) slot(pub uint32) int {
	if len(s.spec.pubs) == 1 {
		if s.spec.pubs[0] == pub {
			return 0
		}
		return -1
	}
	i, ok := slices.BinarySearch(s.spec.pubs, pub)
	if !ok {
		return -1
	}
	return i
}

func (r *runner) totals() (sent, recv uint64) {
	for _, p := range r.pubs {
		sent += p.sent.Load()
	}
	for _, s := range r.subs {
		recv += s.recv.Load()
	}
	return sent, recv
}

func (r *runner) expected() uint64 {
	var n uint64
	for _, p := range r.pubs {
		n += p.sent.Load() * uint64(p.spec.fanout)
	}
	return n
}

// Sleep waits d or until ctx ends; it reports whether d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (r *runner) runTraffic(ctx context.Context, res *Result) error {
	if err := r.setUp(ctx); err != nil {
		r.closeAll(true)
		r.waitReaders()
		return err
	}
	r.t0 = r.now()
	mon := r.startMonitor()
	var wg sync.WaitGroup
	perPub := r.cfg.Rate / float64(len(r.pubs))
	for i, p := range r.pubs {
		// Stagger the publishers over one interval so that paced
		// messages do not all leave at once.
		var offset time.Duration
		if perPub > 0 {
			offset = time.Duration(float64(time.Second) / perPub * float64(i) / float64(len(r.pubs)))
		}
		wg.Go(func() { r.publishLoop(p, perPub, offset) })
	}

	var w0, w1 windowMark
	ok := Sleep(ctx, r.cfg.Warmup)
	if ok {
		w0 = r.mark()
		if r.cfg.OnMeasure != nil {
			r.cfg.OnMeasure(r.cfg.Duration)
		}
		r.measuring.Store(true)
		mon.setPhase("measure")
		ok = Sleep(ctx, r.cfg.Duration)
		r.measuring.Store(false)
		w1 = r.mark()
	}
	mon.setPhase("drain")
	r.stopping.Store(true)
	close(r.stop)
	r.stopPublishers(&wg)
	r.drain(ctx)
	mon.stopAndWait()
	res.Series = mon.series

	r.tally(res)
	if !ok {
		return fmt.Errorf("run cut short before the end of the measured window: %w", ctx.Err())
	}
	r.summarize(res, w0, w1, mon.brokerRSSMax)
	return nil
}

// tally closes every connection and counts what the run sent, received,
// lost and refused, over the whole run.
func (r *runner) tally(res *Result) {
	for _, c := range r.snapshotConns() {
		if err := c.lostErr(); err != nil {
			res.LostConns++
			r.addErr(fmt.Errorf("connection lost during the run: %w", err))
		}
	}
	r.closeAll(true)
	r.waitReaders()

	for _, p := range r.pubs {
		if p.err != nil {
			r.addErr(fmt.Errorf("publisher %s: %w", p.spec.clientID, p.err))
		}
		res.Refused += p.c.refused.Load()
	}
	res.Sent, res.Received = r.totals()
	res.Expected = r.expected()
	for _, s := range r.subs {
		for i, pub := range s.spec.pubs {
			res.Add(s.trackers[i].Counts(r.pubs[pub].sent.Load()))
		}
		res.Malformed += s.malformed
		res.Foreign += s.foreign
	}
}

// summarize fills res with the measured window between w0 and w1: rates,
// latency, send lag, and the CPU and memory of the broker, the generator
// and the named processes.
func (r *runner) summarize(res *Result, w0, w1 windowMark, brokerRSSMax uint64) {
	secs := (w1.at - w0.at).Seconds()
	res.Measured = Window{
		Seconds:          secs,
		Sent:             w1.sent - w0.sent,
		Deliveries:       w1.recv - w0.recv,
		SentPerSec:       float64(w1.sent-w0.sent) / secs,
		DeliveriesPerSec: float64(w1.recv-w0.recv) / secs,
	}
	res.Latency = summarize(r.hists.merged())
	if r.cfg.Rate > 0 {
		if lag := summarize(r.lag.merged()); lag != nil {
			lag.CDF = nil
			res.SendLag = lag
		}
	}
	res.Broker = usage(w0.broker, w1.broker, secs, brokerRSSMax)
	if res.Broker != nil {
		res.Broker.PID = r.cfg.BrokerPID
		if res.Broker.CPUSeconds > 0 {
			res.Broker.DeliveriesPerCPUSecond = float64(res.Measured.Deliveries) / res.Broker.CPUSeconds
		}
	}
	res.Generator = usage(w0.self, w1.self, secs, 0)
	for i, p := range r.cfg.Processes {
		u := usage(w0.procs[i], w1.procs[i], secs, 0)
		if u == nil {
			u = &ProcUsage{} // not readable at an edge (it exited): the error says so
		}
		u.Name, u.PID = p.Name, p.PID
		res.Processes = append(res.Processes, *u)
	}
	if w0.load != nil && w1.load != nil {
		res.LoadAvg = &LoadAvg{Start: *w0.load, End: *w1.load}
	}
}

// stopPublishers waits for the publisher goroutines, which stop at their
// next message; one blocked in a write (the broker does not read) gets a
// second, then its write deadline passes.
func (r *runner) stopPublishers(wg *sync.WaitGroup) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-time.After(time.Second):
	}
	for _, p := range r.pubs {
		_ = p.c.nc.SetWriteDeadline(time.Now()) // unblocks a write stuck on a full socket
	}
	<-done
}

// windowMark is the state at one edge of the measured window.
type windowMark struct {
	at           time.Duration
	sent, recv   uint64
	broker, self *ProcSample
	procs        []*ProcSample // parallel to r.procs; nil where unreadable
	load         *[3]float64
}

func (r *runner) mark() windowMark {
	m := windowMark{at: r.now()}
	m.sent, m.recv = r.totals()
	m.broker = r.sampleBroker()
	if s, err := r.self.Sample(); err == nil {
		m.self = &s
	}
	m.procs = make([]*ProcSample, len(r.procs))
	for i, p := range r.procs {
		s, err := p.Sample()
		if err != nil {
			r.addErr(fmt.Errorf("sample process %s: %w", r.cfg.Processes[i].Name, err))
			continue
		}
		m.procs[i] = &s
	}
	if l, err := ReadLoadAvg(); err == nil {
		m.load = &l
	}
	return m
}

func (r *runner) sampleBroker() *ProcSample {
	if r.broker == nil {
		return nil
	}
	s, err := r.broker.Sample()
	if err != nil {
		r.addErr(fmt.Errorf("sample broker: %w", err))
		return nil
	}
	return &s
}

func usage(a, b *ProcSample, secs float64, rssMax uint64) *ProcUsage {
	if a == nil || b == nil {
		return nil
	}
	cpu := (b.CPU - a.CPU).Seconds()
	u := &ProcUsage{CPUSeconds: cpu, RSSStart: a.RSS, RSSEnd: b.RSS, RSSMax: max(a.RSS, b.RSS, rssMax)}
	if secs > 0 {
		u.CPUPercent = 100 * cpu / secs
	}
	return u
}

func (r *runner) publishLoop(p *publisher, rate float64, offset time.Duration) {
	pacer := NewPacer(rate, r.t0+offset)
	payload := make([]byte, r.cfg.Payload)
	for i := StampSize; i < len(payload); i++ {
		payload[i] = 'x'
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	qos := r.cfg.QoS
	var seq uint32
	for !r.stopping.Load() && (r.limit == 0 || seq < r.limit) {
		at := r.now()
		if pacer.Paced() {
			if wait := pacer.Wait(at); wait > 0 {
				if err := p.c.flush(); err != nil {
					p.err = err
					break
				}
				timer.Reset(wait)
				select {
				case <-timer.C:
				case <-r.stop:
				}
				continue
			}
			at = pacer.Next()
			if r.measuring.Load() {
				r.lag.record(int(p.index), int64(r.now()-at))
			}
		}
		if p.window != nil && !p.window.open(seq, r.cfg.Window) {
			if !p.window.wait(seq, r.cfg.Window, r.stop, func() { _ = p.c.flush() }) { // a flush error shows at the next write
				break
			}
			if pacer.Paced() {
				continue // the clock moved: look at the pacer again
			}
			at = r.now()
		}
		PutStamp(payload, Stamp{SentNs: int64(at), Publisher: p.index, Seq: seq})
		if err := p.c.publish(p.topic, payload, qos, r.stop); err != nil {
			if !errors.Is(err, errStopped) {
				p.err = err
			}
			break
		}
		seq++
		p.sent.Store(uint64(seq))
		pacer.Advance()
	}
	if err := p.c.flush(); err != nil {
		// Messages left in the buffer never reached the broker: do not
		// count them as sent.
		if p.err == nil && !r.stopping.Load() {
			p.err = err
		}
		size := uint64(p.c.out.Size(r.cfg.Version))
		unsent := (uint64(p.c.buffered()) + size - 1) / size
		p.sent.Store(uint64(seq) - min(unsent, uint64(seq)))
	}
}

// drain waits for deliveries still on their way: until every expected
// delivery arrived, nothing arrived for a second, or the drain time passed.
func (r *runner) drain(ctx context.Context) {
	end := time.Now().Add(r.cfg.Drain)
	_, last := r.totals()
	lastChange := time.Now()
	want := r.expected()
	for time.Now().Before(end) {
		_, recv := r.totals()
		if recv >= want {
			return
		}
		if recv != last {
			last, lastChange = recv, time.Now()
		} else if time.Since(lastChange) > time.Second {
			return
		}
		if !Sleep(ctx, 20*time.Millisecond) {
			return
		}
	}
}
