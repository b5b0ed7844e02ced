package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shoal-mqtt/shoal/internal/localserver/realkafka"
	"github.com/shoal-mqtt/shoal/kafka"
)

// The topics the loop reads and writes, each of partitions partitions.
const (
	topicIn    = "txnbench.in"
	topicOut   = "txnbench.out"
	partitions = 16
)

type options struct {
	rate           int
	warmup, window time.Duration
	dir            string
	props          []string
}

func main() {
	var opt options
	fs := flag.NewFlagSet("shoal-txnbench", flag.ContinueOnError)
	fs.IntVar(&opt.rate, "rate", 10000, "records/s produced to the topic the loop reads (a multiple of 1000)")
	fs.DurationVar(&opt.warmup, "warmup", 40*time.Second, "load before the measured window (Kafka's JIT compiles meanwhile)")
	fs.DurationVar(&opt.window, "duration", 20*time.Second, "measured window")
	fs.StringVar(&opt.dir, "dir", "", "Kafka's directory (default: a new temporary one, removed at the end)")
	fs.Func("kafka-prop", "a line key=value added to the broker's server.properties (repeatable)", func(v string) error {
		if !strings.Contains(v, "=") {
			return fmt.Errorf("%q is not key=value", v)
		}
		opt.props = append(opt.props, v)
		return nil
	})
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		os.Exit(2)
	}
	if opt.rate < 1000 || opt.rate%1000 != 0 {
		fmt.Fprintln(os.Stderr, "shoal-txnbench: -rate must be a multiple of 1000")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opt.warmup+opt.window+5*time.Minute)
	defer cancel()
	if err := run(ctx, opt, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "shoal-txnbench:", err)
		os.Exit(1)
	}
}

// run starts Kafka, the loop, the producer and the consumer, and prints
// the result of the measured window.
func run(ctx context.Context, opt options, stdout io.Writer) (err error) {
	dir := opt.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "shoal-txnbench"); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
	}
	kc, err := realkafka.StartWith(ctx, filepath.Join(dir, "kafka"), nil, realkafka.Options{FullJIT: true, Properties: opt.props})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, kc.Kill()) }()
	brokers := kc.Brokers()
	adm, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer adm.Close()
	if _, err := kadm.NewClient(adm).CreateTopics(ctx, partitions, 1, nil, topicIn, topicOut); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cl, err := kafka.NewClient(ctx, kafka.Config{Brokers: brokers, ClientID: "shoal-txnbench", Catalogue: kafka.DefaultCatalogue(),
		GroupSessionTimeout: kafka.DefaultGroupSessionTimeout}, log)
	if err != nil {
		return err
	}
	defer cl.Close()

	loopCtx, stop := context.WithCancel(ctx)
	defer stop()
	var polls atomic.Int64
	var loop sync.WaitGroup
	loop.Go(func() {
		cfg := kafka.TransactConfig{Topic: topicIn, Group: "shoal-txnbench", TransactionalID: "shoal-txnbench", InstanceID: "0"}
		_ = cl.Transact(loopCtx, cfg, func(_ context.Context, bs []kafka.Batch, tx *kafka.Tx) error {
			for _, b := range bs {
				for _, r := range b.Records {
					tx.Produce(&kafka.Record{Topic: topicOut, Key: r.Key, Value: r.Value})
				}
			}
			polls.Add(1)
			return nil
		})
	})
	defer loop.Wait()
	defer stop()

	prod, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(0), kgo.DefaultProduceTopic(topicIn))
	if err != nil {
		return err
	}
	defer prod.Close()
	cons, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topicOut), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(10*time.Millisecond), kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
	if err != nil {
		return err
	}
	defer cons.Close()
	var lat latencies
	var consumer sync.WaitGroup
	consumer.Go(func() { lat.consume(loopCtx, cons) })
	defer consumer.Wait()

	produce(ctx, prod, opt.rate, opt.warmup)
	lat.measuring.Store(true)
	p0, t0 := polls.Load(), time.Now()
	produce(ctx, prod, opt.rate, opt.window)
	p1, span := polls.Load(), time.Since(t0)
	// The last records of the window are still on their way: a quiet
	// second lets them arrive (nothing signals the last one).
	time.Sleep(time.Second)
	lat.measuring.Store(false)
	return lat.report(stdout, opt, span, p1-p0)
}

// produce writes rate records/s for d, each value the time of its
// production, keyed by one of ten keys.
func produce(ctx context.Context, prod *kgo.Client, rate int, d time.Duration) {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	keys := make([][]byte, 10)
	for i := range keys {
		keys[i] = []byte(strconv.Itoa(i))
	}
	for i, end := 0, time.Now().Add(d); time.Now().Before(end) && ctx.Err() == nil; {
		<-tick.C
		for range rate / 1000 {
			v := binary.BigEndian.AppendUint64(make([]byte, 0, 64), uint64(time.Now().UnixNano()))
			prod.Produce(ctx, &kgo.Record{Key: keys[i%len(keys)], Value: v[:64]}, nil)
			i++
		}
	}
}

// latencies are the delays of the records read in the measured window.
type latencies struct {
	measuring atomic.Bool
	mu        sync.Mutex
	ds        []time.Duration
}

func (l *latencies) consume(ctx context.Context, cons *kgo.Client) {
	for ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		now := time.Now()
		if !l.measuring.Load() {
			continue
		}
		l.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			if len(r.Value) >= 8 {
				l.ds = append(l.ds, now.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(r.Value)))))
			}
		})
		l.mu.Unlock()
	}
}

func (l *latencies) report(w io.Writer, opt options, span time.Duration, polls int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.ds) == 0 || polls == 0 {
		return errors.New("no record read in the measured window")
	}
	slices.Sort(l.ds)
	q := func(p float64) time.Duration { return l.ds[int(float64(len(l.ds)-1)*p)].Round(10 * time.Microsecond) }
	props := "stock"
	if len(opt.props) > 0 {
		props = strings.Join(opt.props, ", ")
	}
	_, err := fmt.Fprintf(w, "%d records/s over %v, broker settings: %s: %d read, latency p50 %v p99 %v p99.9 %v max %v; %d transactions, %v each\n",
		opt.rate, opt.window, props, len(l.ds), q(.5), q(.99), q(.999), q(1), polls, (span / time.Duration(polls)).Round(10*time.Microsecond))
	return err
}
