package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// The parts of the benchmark, in the order they run.
const (
	partThroughput = "throughput"
	partOutLatency = "out-latency"
	partInLatency  = "in-latency"
	partCatchUp    = "catchup"
	// partDistributed runs only when asked for: it starts a real Kafka
	// and Cassandra.
	partDistributed = "distributed"
)

// allParts are the parts that run by default; knownParts every one.
var (
	allParts   = []string{partThroughput, partOutLatency, partInLatency, partCatchUp}
	knownParts = append(slices.Clone(allParts), partDistributed)
)

// options are the command's settings.
type options struct {
	out      string
	shoal    string // the shoal binary; "" builds one
	parts    []string
	rounds   int           // throughput rounds
	warmup   time.Duration // before every measured window
	duration time.Duration // throughput window
	drain    time.Duration // longest wait for what is still on its way

	outRate       float64       // out-latency: msg/s in total
	outPublishers int           // out-latency and catchup: publishers sharing the rate
	outDuration   time.Duration // out-latency: measured window
	fetchWait     time.Duration // kcat consumers' fetch.wait.max.ms

	inRates    []float64     // in-latency: records/s, one run each
	inKeys     int           // in-latency: distinct keys (MQTT topics)
	inDuration time.Duration // in-latency: measured window

	catchRate   float64       // catchup: msg/s, QoS 1
	catchBefore time.Duration // catchup: load before the bridge stops
	catchStop   time.Duration // catchup: how long the bridge is stopped
	catchAfter  time.Duration // catchup: load after the bridge caught up
	catchLimit  time.Duration // catchup: longest wait for the catch-up
	caughtUp    time.Duration // catchup: a record this late or less means caught up

	prime time.Duration // distributed: an unrecorded run first

	timeout time.Duration // the whole command; 0: computed
	keep    bool
	args    []string // the command line, for the README
}

// has reports whether part p runs.
func (o *options) has(p string) bool { return slices.Contains(o.parts, p) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opt, err := parse(args, stderr, time.Now())
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "shoal-bridgebench:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, opt.timeout)
	defer cancel()
	if err := bench(ctx, opt, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "shoal-bridgebench:", err)
		return 1
	}
	return 0
}

// parse reads the command line into options: every flag, one per line,
// then the checks, so that the usage text matches.
func parse(args []string, stderr io.Writer, now time.Time) (options, error) {
	opt := options{args: args}
	fs := flag.NewFlagSet("shoal-bridgebench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: shoal-bridgebench [flags]\n\n"+
			"Measures Shoal's Kafka data bridge against stock clients (kcat, mosquitto_sub) on\n"+
			"loopback and writes the results.\n\nflags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&opt.out, "out", filepath.Join("bench", "results", now.UTC().Format("2006-01-02")+"-bridge"), "directory of the JSON results, the logs and README.md (an earlier run's results there are removed)")
	fs.StringVar(&opt.shoal, "shoal", "", "shoal binary to run (default: go build ./cmd/shoal into the work directory)")
	parts := fs.String("parts", strings.Join(allParts, ","), "comma-separated parts to run: "+strings.Join(knownParts, ", ")+
		" ("+partDistributed+": MQTT to Kafka on a real Kafka and Cassandra with Shoal's roles as processes and a shoal bridge, not run by default)")
	fs.IntVar(&opt.rounds, "rounds", 2, "throughput: rounds, each runs every scenario on every broker once (the order rotates)")
	fs.DurationVar(&opt.warmup, "warmup", 3*time.Second, "warm-up before each measured window")
	fs.DurationVar(&opt.duration, "duration", 10*time.Second, "throughput: measured window of each run")
	fs.DurationVar(&opt.drain, "drain", 10*time.Second, "longest wait for messages still on their way after the load")
	fs.Float64Var(&opt.outRate, "out-rate", 10000, "out-latency: total publish rate in msg/s")
	fs.IntVar(&opt.outPublishers, "out-publishers", 10, "out-latency and catchup: publishers (one topic each) sharing the rate")
	fs.DurationVar(&opt.outDuration, "out-duration", 20*time.Second, "out-latency: measured window of each QoS")
	fs.DurationVar(&opt.fetchWait, "fetch-wait", 10*time.Millisecond, "kcat consumers: fetch.wait.max.ms (librdkafka's default is 500 ms)")
	inRates := fs.String("in-rates", "1000,10000", "in-latency: comma-separated rates in records/s, one run each")
	fs.IntVar(&opt.inKeys, "in-keys", 10, "in-latency: distinct record keys, so MQTT topics bench/<key>/in")
	fs.DurationVar(&opt.inDuration, "in-duration", 10*time.Second, "in-latency: measured window of each rate")
	fs.Float64Var(&opt.catchRate, "catchup-rate", 10000, "catchup: QoS 1 publish rate in msg/s")
	fs.DurationVar(&opt.catchBefore, "catchup-before", 10*time.Second, "catchup: load with the bridge running before it is stopped")
	fs.DurationVar(&opt.catchStop, "catchup-stop", 60*time.Second, "catchup: how long the bridge is stopped")
	fs.DurationVar(&opt.catchAfter, "catchup-after", 10*time.Second, "catchup: load after the bridge caught up")
	fs.DurationVar(&opt.catchLimit, "catchup-limit", 3*time.Minute, "catchup: longest wait for the bridge to catch up")
	fs.DurationVar(&opt.caughtUp, "caught-up", 500*time.Millisecond, "catchup: the bridge has caught up once every record read is at most this late")
	fs.DurationVar(&opt.prime, "prime", 2*time.Minute, "distributed: an unrecorded run at the same load first, so that the JVMs have compiled their hot paths (0: none; on 2 cores Kafka's JIT still compiles a minute in)")
	fs.DurationVar(&opt.timeout, "timeout", 0, "bound on the whole command (default: computed from the parts)")
	fs.BoolVar(&opt.keep, "keep", false, "keep the work directory (data directories)")
	smoke := fs.Bool("smoke", false, "a quick check: -rounds 1, 1 s warm-ups, 3 s windows, the bridge stopped for 5 s, unless given")
	if err := fs.Parse(args); err != nil {
		return opt, err
	}
	if fs.NArg() > 0 {
		return opt, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *smoke {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for name, apply := range map[string]func(){
			"rounds":         func() { opt.rounds = 1 },
			"warmup":         func() { opt.warmup = time.Second },
			"duration":       func() { opt.duration = 3 * time.Second },
			"drain":          func() { opt.drain = 5 * time.Second },
			"out-duration":   func() { opt.outDuration = 3 * time.Second },
			"in-duration":    func() { opt.inDuration = 3 * time.Second },
			"catchup-before": func() { opt.catchBefore = 3 * time.Second },
			"catchup-stop":   func() { opt.catchStop = 5 * time.Second },
			"catchup-after":  func() { opt.catchAfter = 2 * time.Second },
			"catchup-limit":  func() { opt.catchLimit = time.Minute },
			"prime":          func() { opt.prime = 0 },
		} {
			if !set[name] {
				apply()
			}
		}
	}
	for p := range strings.SplitSeq(*parts, ",") {
		p = strings.TrimSpace(p)
		switch {
		case p == "":
		case !slices.Contains(knownParts, p):
			return opt, fmt.Errorf("parts: %q is not one of %s", p, strings.Join(knownParts, ", "))
		case !slices.Contains(opt.parts, p):
			opt.parts = append(opt.parts, p)
		}
	}
	for r := range strings.SplitSeq(*inRates, ",") {
		if r = strings.TrimSpace(r); r == "" {
			continue
		}
		x, err := strconv.ParseFloat(r, 64)
		if err != nil || x <= 0 {
			return opt, fmt.Errorf("in-rates: %q is not a rate above 0", r)
		}
		opt.inRates = append(opt.inRates, x)
	}
	switch {
	case len(opt.parts) == 0:
		return opt, errors.New("parts: none given")
	case opt.has(partInLatency) && len(opt.inRates) == 0:
		return opt, errors.New("in-rates: none given")
	case opt.rounds < 1:
		return opt, fmt.Errorf("rounds: %d (want ≥ 1)", opt.rounds)
	case opt.warmup < 0:
		return opt, fmt.Errorf("warmup: %s (want ≥ 0)", opt.warmup)
	case opt.duration <= 0, opt.outDuration <= 0, opt.inDuration <= 0:
		return opt, errors.New("duration, out-duration, in-duration: want > 0")
	case opt.drain <= 0:
		return opt, fmt.Errorf("drain: %s (want > 0)", opt.drain)
	case opt.outRate <= 0 || opt.catchRate <= 0:
		return opt, errors.New("out-rate, catchup-rate: want > 0")
	case opt.outPublishers < 1:
		return opt, fmt.Errorf("out-publishers: %d (want ≥ 1)", opt.outPublishers)
	case opt.inKeys < 1:
		return opt, fmt.Errorf("in-keys: %d (want ≥ 1)", opt.inKeys)
	case opt.fetchWait < time.Millisecond:
		return opt, fmt.Errorf("fetch-wait: %s (want ≥ 1ms)", opt.fetchWait)
	case opt.catchBefore <= 0 || opt.catchStop <= 0 || opt.catchAfter <= 0 || opt.catchLimit <= 0 || opt.caughtUp <= 0:
		return opt, errors.New("catchup-before, catchup-stop, catchup-after, catchup-limit, caught-up: want > 0")
	case opt.prime < 0:
		return opt, fmt.Errorf("prime: %s (want ≥ 0)", opt.prime)
	case opt.timeout < 0:
		return opt, fmt.Errorf("timeout: %s (want ≥ 0)", opt.timeout)
	}
	if opt.timeout == 0 {
		opt.timeout = opt.bound()
	}
	return opt, nil
}

// perStart bounds starting (and stopping) one set of brokers.
const perStart = 2 * time.Minute

// bound is the longest the parts may take: their windows, drains and
// starts, with a margin.
func (o *options) bound() time.Duration {
	d := 5 * time.Minute // building shoal
	if o.has(partThroughput) {
		d += time.Duration(o.rounds*len(throughputScenarios)*len(throughputBrokers)) *
			(perStart + o.warmup + o.duration + 2*o.drain + time.Minute)
	}
	if o.has(partOutLatency) {
		d += perStart + 2*(o.warmup+o.outDuration+2*o.drain+time.Minute)
	}
	if o.has(partInLatency) {
		d += perStart + time.Duration(len(o.inRates))*(o.warmup+o.inDuration+2*o.drain+time.Minute)
	}
	if o.has(partCatchUp) {
		d += 2*perStart + o.catchBefore + o.catchStop + o.catchLimit + o.catchAfter + 2*o.drain + time.Minute
	}
	if o.has(partDistributed) {
		d += 10*time.Minute + o.prime + 2*(o.warmup+o.outDuration+2*o.drain+time.Minute)
	}
	return d
}
