package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/shoal-mqtt/shoal/bench/load"
)

// inYAML is the in mapping alone: records of bench.in become QoS 1
// messages of tenant bench on bench/<key>/in.
const inYAML = `log_level: info
bridges:
  kafka:
    instance_id: bench
    in:
      - name: cmd
        tenant: bench
        kafka_topic: "bench.in"
        mqtt_topic: "bench/{key}/in"
        qos: 1
`

// inTopic is the Kafka topic inYAML reads.
const inTopic = "bench.in"

// lineSize is the size of every line written to kcat -P, '\n' included.
const lineSize = 1024

// appendLine appends line, padded with spaces to lineSize bytes with the
// newline; a line that does not fit is an error.
func appendLine(dst, line []byte) ([]byte, error) {
	if len(line) >= lineSize || bytes.IndexByte(line, '\n') >= 0 {
		return dst, fmt.Errorf("kcat line %q: longer than %d bytes or with a newline", line, lineSize-1)
	}
	dst = append(dst, line...)
	for range lineSize - 1 - len(line) {
		dst = append(dst, ' ')
	}
	return append(dst, '\n'), nil
}

// feeder is a kcat -P whose standard input the benchmark writes records
// to, one line each: "<key>:<payload>", padded with spaces to lineSize.
//
// kcat 1.7.1 (Debian's) reads its input in blocks (fread) and produces a
// line only once the block that ends it is full: shorter lines wait for
// the ones after them, until the end of the input for the last ones.
// Lines of lineSize bytes are produced as they are written (128 and 512
// were not: bench/README.md, "Kafka data bridge").
type feeder struct {
	*proc
	w  *os.File
	bw *bufio.Writer
}

// startFeeder starts kcat -P on topic of b's backbone. linger.ms=0: the
// producer sends what it has at once instead of waiting for a batch to
// fill (librdkafka waits 5 ms by default).
func (h *harness) startFeeder(b *broker, name, topic string) (*feeder, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p, err := h.start(name, nil, r, h.kcat, b.kcatArgs("-P", "-t", topic, "-K", ":", "-X", "linger.ms=0")...)
	_ = r.Close() // the child has its own copy
	if err != nil {
		_ = w.Close()
		return nil, err
	}
	return &feeder{proc: p, w: w, bw: bufio.NewWriterSize(w, 64<<10)}, nil
}

// end closes kcat's input, which makes it flush and exit, and waits.
func (f *feeder) end() error {
	err := errors.Join(f.bw.Flush(), f.w.Close())
	select {
	case <-f.p.Done():
		if perr := f.p.Err(); perr != nil {
			err = errors.Join(err, fmt.Errorf("%s: %w%s", f.name, perr, f.tail()))
		}
	case <-time.After(30 * time.Second):
		err = errors.Join(err, f.stop())
	}
	return err
}

// runInLatency measures Kafka to MQTT: kcat -P fed at a fixed rate into
// the in mapping's topic, mosquitto_sub subscribed to what the bridge
// publishes; one run per rate on a fresh broker.
func runInLatency(ctx context.Context, h *harness, opt options, clk *clock, stdout io.Writer) ([]latencyRun, error) {
	var runs []latencyRun
	for _, rate := range opt.inRates {
		r, err := inLatencyOnce(ctx, h, opt, clk, rate)
		if err != nil {
			return runs, fmt.Errorf("in-latency at %.0f/s: %w", rate, err)
		}
		writeLatencyLine(stdout, r)
		runs = append(runs, r)
	}
	return runs, nil
}

func inLatencyOnce(ctx context.Context, h *harness, opt options, clk *clock, rate float64) (run latencyRun, err error) {
	name := fmt.Sprintf("in-latency-%.0f", rate)
	fmt.Fprintf(h.stderr, "%s: %.0f records/s for %s\n", name, rate, opt.inDuration)
	b, err := h.startShoalAll(ctx, name, inYAML)
	if err != nil {
		return run, err
	}
	defer func() { err = errors.Join(err, b.stop()) }()
	log := &recvLog{}
	host, port, _ := net.SplitHostPort(b.mqtt)
	// The subscriber is of the mapping's tenant (its id's prefix).
	sub, err := h.startReader(name+"-mosquitto_sub", clk, func(line []byte, recvNs int64) {
		_, payload, _ := bytes.Cut(line, []byte(" ")) // -v: "topic payload"
		log.observe(payload, recvNs)
	}, h.mosquittoSub, "-h", host, "-p", port, "-i", "bench-in-sub", "-q", "1", "-t", "bench/#", "-v")
	if err != nil {
		return run, err
	}
	defer func() { err = errors.Join(err, sub.close()) }()
	fd, err := h.startFeeder(b, name+"-kcat", inTopic)
	if err != nil {
		return run, err
	}
	fed := false
	defer func() {
		if !fed {
			err = errors.Join(err, fd.end())
		}
	}()
	// Probes until the subscriber prints one: the subscription, the
	// bridge's group and kcat's producer are all there.
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	var line []byte
	for n := 0; log.probed() == 0; n++ {
		if line, err = appendLine(line[:0], fmt.Appendf(nil, "probe:probe %d", n)); err != nil {
			cancel()
			return run, err
		}
		if _, err := fd.bw.Write(line); err != nil {
			cancel()
			return run, fmt.Errorf("probe: %w", err)
		}
		if err := fd.bw.Flush(); err != nil {
			cancel()
			return run, fmt.Errorf("probe: %w%s", err, fd.tail())
		}
		if !load.Sleep(pctx, 200*time.Millisecond) {
			cancel()
			return run, fmt.Errorf("probe: none arrived: %w%s%s", pctx.Err(), sub.tail(), fd.tail())
		}
	}
	cancel()
	pw, err := watchProcs(map[string]int{"shoal": b.pid(), "kcat": fd.pid(), "mosquitto_sub": sub.pid()})
	if err != nil {
		return run, err
	}

	run = latencyRun{Part: partInLatency, QoS: 1, Rate: rate, Senders: opt.inKeys,
		WarmupSec: opt.warmup.Seconds(), DurationSec: opt.inDuration.Seconds()}
	t0 := clk.since()
	from, to := clk.unix(t0+opt.warmup), clk.unix(t0+opt.warmup+opt.inDuration)
	sent := make([]uint64, opt.inKeys)
	measuring := false
	lag, werr := feed(ctx, fd.bw, clk, rate, t0, t0+opt.warmup+opt.inDuration, sent, func(at time.Duration) {
		if !measuring && at >= t0+opt.warmup {
			measuring = true
			pw.begin()
		}
	})
	run.Processes, run.LoadAvg = pw.end()
	fedAt := clk.since()
	waitArrivals(ctx, log.total, sum(sent), 3*time.Second, opt.drain)
	run.Counts = log.account(sent)
	if run.StuckAtEnd = run.Counts.Lost; run.StuckAtEnd > 0 {
		// Records wait for more records after them (bench/README.md,
		// "Kafka data bridge"): one more per key, until every one of
		// ours arrived.
		v, rerr := release(ctx, fd.bw, log, sent, opt.drain)
		werr = errors.Join(werr, rerr)
		if v >= 0 {
			run.ReleasedAfterSec = &v
		}
		run.Counts = log.account(sent)
	}
	run.LastArrivalSec = float64(lastArrival(log)-clk.unix(fedAt)) / 1e9
	fed = true
	werr = errors.Join(werr, fd.end())
	run.Latency = latencyOf(log, from, to)
	run.SteadyLatency = latencyOf(log, from, to-steadyTail.Nanoseconds())
	run.SendLagMaxMs = float64(lag) / 1e6
	if err := errors.Join(werr, sub.alive()); err != nil {
		run.Errors = err.Error()
	}
	return run, nil
}

// release writes a probe record for every key each 500 ms until every
// message of sent arrived or d passed, and returns how long that took (-1:
// not all arrived).
func release(ctx context.Context, w *bufio.Writer, log *recvLog, sent []uint64, d time.Duration) (float64, error) {
	began := time.Now()
	var line []byte
	for n := 0; ; n++ {
		if log.account(sent).Lost == 0 {
			return time.Since(began).Seconds(), nil
		}
		if time.Since(began) > d {
			return -1, nil
		}
		for k := range sent {
			var err error
			if line, err = appendLine(line[:0], fmt.Appendf(nil, "k%d:probe %d", k, n)); err != nil {
				return -1, err
			}
			if _, err := w.Write(line); err != nil {
				return -1, fmt.Errorf("release: %w", err)
			}
		}
		if err := w.Flush(); err != nil {
			return -1, fmt.Errorf("release: %w", err)
		}
		if !load.Sleep(ctx, 500*time.Millisecond) {
			return -1, ctx.Err()
		}
	}
}

// lastArrival returns the Unix nanoseconds of the last arrival of log.
func lastArrival(log *recvLog) int64 {
	var last int64
	log.each(func(_, _ int, a arrival) { last = max(last, a.first) })
	return last
}

// feed writes records to w at rate per second from t0 until end (on
// clk), round robin over len(sent) keys: record n has key k<n mod keys>
// and the payload of message n / keys of publisher n mod keys. Records
// already due are written together and flushed once. It counts each
// key's records in sent, calls tick with the time of every pass, and
// returns how late it wrote a record after its time at worst.
func feed(ctx context.Context, w *bufio.Writer, clk *clock, rate float64, t0, end time.Duration, sent []uint64, tick func(time.Duration)) (int64, error) {
	pacer := load.NewPacer(rate, t0)
	keys := uint64(len(sent))
	var line, padded []byte
	var worst int64
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := clk.since()
		tick(now)
		if now >= end {
			return worst, w.Flush()
		}
		for pacer.Wait(now) == 0 && pacer.Next() < end {
			at := pacer.Next()
			worst = max(worst, int64(now-at))
			n := pacer.Sent()
			k := n % keys
			line = append(line[:0], 'k')
			line = strconv.AppendUint(line, k, 10)
			line = append(line, ':')
			line = appendStamp(line, clk.unix(at), int(k), int(n/keys))
			var err error
			if padded, err = appendLine(padded[:0], line); err != nil {
				return worst, err
			}
			if _, err := w.Write(padded); err != nil {
				return worst, fmt.Errorf("feed kcat: %w", err)
			}
			sent[k]++
			pacer.Advance()
		}
		if err := w.Flush(); err != nil {
			return worst, fmt.Errorf("feed kcat: %w", err)
		}
		timer.Reset(min(pacer.Wait(clk.since()), end-clk.since()))
		select {
		case <-timer.C:
		case <-ctx.Done():
			return worst, ctx.Err()
		}
	}
}
