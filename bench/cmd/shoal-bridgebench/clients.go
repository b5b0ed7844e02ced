package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoal-mqtt/shoal/bench/load"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

// clock is the benchmark's clock: Unix nanoseconds read from the
// monotonic clock since base, so that a payload's send time and its
// arrival are on one clock that never steps.
type clock struct {
	base   time.Time
	baseNs int64
}

func newClock() *clock {
	now := time.Now()
	return &clock{base: now, baseNs: now.UnixNano()}
}

// since is the time since base.
func (c *clock) since() time.Duration { return time.Since(c.base) }

// unix returns the Unix nanoseconds of d after base.
func (c *clock) unix(d time.Duration) int64 { return c.baseNs + int64(d) }

// now returns the Unix nanoseconds of now.
func (c *clock) now() int64 { return c.unix(c.since()) }

// lineReader is a client process whose standard output the benchmark
// reads line by line, taking each line's arrival time as it reads it.
type lineReader struct {
	*proc
	done chan struct{} // closed when its output has ended
	err  error         // why the reading ended, set before done is closed
}

// startReader starts bin with args as name and calls line with every line
// it prints (the slice is valid during the call only) and the time it was
// read.
func (h *harness) startReader(name string, clk *clock, line func(b []byte, recvNs int64), bin string, args ...string) (*lineReader, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p, err := h.start(name, w, nil, bin, args...)
	_ = w.Close() // the child has its own copy
	if err != nil {
		_ = r.Close()
		return nil, err
	}
	lr := &lineReader{proc: p, done: make(chan struct{})}
	go func() {
		defer close(lr.done)
		defer func() { _ = r.Close() }()
		br := bufio.NewReaderSize(r, 256<<10)
		for {
			b, err := br.ReadSlice('\n')
			if len(b) > 0 && err == nil {
				line(bytes.TrimRight(b, "\r\n"), clk.now())
			}
			switch {
			case err == nil:
			case errors.Is(err, bufio.ErrBufferFull):
				// A line longer than the buffer is not one of ours: skip it.
				for errors.Is(err, bufio.ErrBufferFull) {
					_, err = br.ReadSlice('\n')
				}
				if err != nil && !errors.Is(err, io.EOF) {
					lr.err = err
					return
				}
			case errors.Is(err, io.EOF):
				return
			default:
				lr.err = fmt.Errorf("read %s: %w", name, err)
				return
			}
		}
	}()
	return lr, nil
}

// close stops the process and waits for the end of its output.
func (lr *lineReader) close() error {
	err := lr.stop()
	select {
	case <-lr.done:
	case <-time.After(5 * time.Second):
		err = errors.Join(err, fmt.Errorf("%s: output still open 5s after it stopped", lr.name))
	}
	return errors.Join(err, lr.err)
}

// tailTopic starts a read_committed kcat that prints the payload of every
// record of topic into log, from the beginning (the broker is fresh for
// each run: -o end would be resolved per partition, and a partition
// resolved after the first records would skip them) and on.
func (h *harness) tailTopic(ctx context.Context, b *broker, name, topic string, fetchWait time.Duration, clk *clock, log *recvLog) (*lineReader, error) {
	if err := h.waitTopic(ctx, b, topic); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return h.startReader(name, clk, log.observe, h.kcat, b.kcatArgs("-C", "-t", topic, "-o", "beginning", "-u",
		"-X", "isolation.level=read_committed", "-X", "fetch.wait.max.ms="+strconv.Itoa(int(fetchWait/time.Millisecond)),
		"-f", "%s\n")...)
}

// waitTopic waits (a minute at most) until topic exists on b's backbone:
// kcat fails on a topic that does not, and the bridge may create its
// topics after it reports ready.
func (h *harness) waitTopic(ctx context.Context, b *broker, topic string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		n, err := h.partitions(ctx, b, topic)
		if err == nil && n > 0 {
			return nil
		}
		if !load.Sleep(ctx, 200*time.Millisecond) {
			return fmt.Errorf("topic %s not there: %w", topic, errors.Join(err, ctx.Err()))
		}
	}
}

// readTopic reads every committed record of topic from the beginning to
// its end (-e) into log: the count made once a run is over.
func (h *harness) readTopic(ctx context.Context, b *broker, topic string, log *recvLog) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.kcat, b.kcatArgs("-C", "-t", topic, "-o", "beginning", "-e",
		"-X", "isolation.level=read_committed", "-f", "%s\n")...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("kcat read %s: %w", topic, err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("kcat read %s: %w", topic, err)
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		log.observe(sc.Bytes(), 1)
	}
	if err := errors.Join(sc.Err(), cmd.Wait()); err != nil {
		return fmt.Errorf("kcat read %s: %w\n%s", topic, err, stderr.Bytes())
	}
	return nil
}

// countTopic counts the committed records of topic, whatever their
// payload (kcat prints one byte per record).
func (h *harness) countTopic(ctx context.Context, b *broker, topic string) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.kcat, b.kcatArgs("-C", "-t", topic, "-o", "beginning", "-e",
		"-X", "isolation.level=read_committed", "-f", ".")...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, fmt.Errorf("kcat count %s: %w", topic, err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("kcat count %s: %w", topic, err)
	}
	n, cerr := io.Copy(io.Discard, out)
	if err := errors.Join(cerr, cmd.Wait()); err != nil {
		return 0, fmt.Errorf("kcat count %s: %w\n%s", topic, err, stderr.Bytes())
	}
	return uint64(n), nil
}

// pacedLoad is MQTT publishers, one topic each, that publish stamped
// messages at a fixed total rate.
type pacedLoad struct {
	clk    *clock
	base   int // the first publisher's number in the payloads
	pubs   []*load.Publisher
	topics [][]byte
	sent   []atomic.Uint64
	lag    atomic.Int64 // the most any message was sent after its time, ns
	probes uint64       // QoS 1 probes published (by probe, before start)

	stop chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []error
}

// loadInflight bounds each publisher's unacknowledged QoS 1 messages, as
// the generator's scenarios do.
const loadInflight = 64

// dialLoad connects n publishers to addr, in Shoal's tenant "bench";
// their payloads number them from base.
func dialLoad(ctx context.Context, clk *clock, addr, name string, base, n int) (*pacedLoad, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	l := &pacedLoad{clk: clk, base: base, sent: make([]atomic.Uint64, n), stop: make(chan struct{})}
	for i := range n {
		p, err := load.DialPublisher(ctx, load.PublisherConfig{Addr: addr, ClientID: fmt.Sprintf("bench-%s-p-%d", name, i),
			Version: packet.V5, KeepAlive: 0, Inflight: loadInflight})
		if err != nil {
			l.close()
			return nil, err
		}
		l.pubs = append(l.pubs, p)
		l.topics = append(l.topics, fmt.Appendf(nil, "bench/%s/%d", name, i))
	}
	return l, nil
}

// probe publishes a probe (QoS 1) every 200 ms until seen reports that
// one arrived, ctx ends or a minute passes.
func (l *pacedLoad) probe(ctx context.Context, seen func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for n := 0; !seen(); n++ {
		if err := l.pubs[0].Publish([]byte("bench/probe"), fmt.Appendf(nil, "probe %d", n), 1, ctx.Done()); err != nil {
			return fmt.Errorf("probe: %w", err)
		}
		l.probes++
		if err := l.pubs[0].Flush(); err != nil {
			return fmt.Errorf("probe: %w", err)
		}
		if !load.Sleep(ctx, 200*time.Millisecond) {
			return fmt.Errorf("probe: no probe arrived: %w", ctx.Err())
		}
	}
	return nil
}

// start publishes at rate msg/s in total, at qos, until halt.
func (l *pacedLoad) start(rate float64, qos packet.QoS) {
	n := len(l.pubs)
	each := rate / float64(n)
	t0 := l.clk.since()
	for i, p := range l.pubs {
		// Staggered, so that the publishers do not all wake at once.
		offset := time.Duration(float64(time.Second) / rate * float64(i))
		l.wg.Go(func() { l.publish(i, p, load.NewPacer(each, t0+offset), qos) })
	}
}

func (l *pacedLoad) publish(i int, p *load.Publisher, pacer load.Pacer, qos packet.QoS) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var buf []byte
	var err error
	for {
		select {
		case <-l.stop:
			err = p.Flush()
			l.fail(err)
			return
		default:
		}
		now := l.clk.since()
		if wait := pacer.Wait(now); wait > 0 {
			if err = p.Flush(); err != nil {
				break
			}
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-l.stop:
			}
			continue
		}
		at := pacer.Next()
		if late := int64(now - at); late > l.lag.Load() {
			l.lag.Store(late) // one writer per publisher: a lost race only undercounts
		}
		buf = appendStamp(buf[:0], l.clk.unix(at), l.base+i, int(pacer.Sent()))
		if err = p.Publish(l.topics[i], buf, qos, l.stop); err != nil {
			break
		}
		pacer.Advance()
		l.sent[i].Store(pacer.Sent())
	}
	select {
	case <-l.stop: // cut short by halt: not a failure
	default:
		l.fail(fmt.Errorf("publisher %d: %w", i, err))
	}
}

func (l *pacedLoad) fail(err error) {
	if err == nil {
		return
	}
	l.mu.Lock()
	l.errs = append(l.errs, err)
	l.mu.Unlock()
}

// halt stops publishing and waits for the publishers.
func (l *pacedLoad) halt() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// sentCounts returns what each publisher sent so far.
func (l *pacedLoad) sentCounts() []uint64 {
	s := make([]uint64, len(l.sent))
	for i := range l.sent {
		s[i] = l.sent[i].Load()
	}
	return s
}

// acked returns the messages acknowledged (QoS 1) and the refused ones,
// probes left out.
func (l *pacedLoad) acked() (ok, refused uint64) {
	for _, p := range l.pubs {
		ok += p.Acked()
		refused += p.Refused()
	}
	return ok - min(ok, l.probes), refused
}

// settle waits until no QoS 1 message is in flight, at most d.
func (l *pacedLoad) settle(ctx context.Context, d time.Duration) int {
	end := time.Now().Add(d)
	for {
		n := 0
		for _, p := range l.pubs {
			n += p.InFlight()
		}
		if n == 0 || time.Now().After(end) || !load.Sleep(ctx, 20*time.Millisecond) {
			return n
		}
	}
}

// err returns the publishers' errors, and the connections' that ended.
func (l *pacedLoad) err() error {
	l.mu.Lock()
	errs := append([]error(nil), l.errs...)
	l.mu.Unlock()
	for _, p := range l.pubs {
		if err := p.Err(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// close disconnects the publishers.
func (l *pacedLoad) close() {
	for _, p := range l.pubs {
		p.Close()
	}
}

// waitArrivals waits until total reports want arrivals, nothing arrived
// for idle, or d passed.
func waitArrivals(ctx context.Context, total func() uint64, want uint64, idle, d time.Duration) {
	end := time.Now().Add(d)
	last, lastChange := total(), time.Now()
	for time.Now().Before(end) {
		n := total()
		switch {
		case n >= want:
			return
		case n != last:
			last, lastChange = n, time.Now()
		case time.Since(lastChange) > idle:
			return
		}
		if !load.Sleep(ctx, 20*time.Millisecond) {
			return
		}
	}
}
