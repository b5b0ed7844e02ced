package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/shoal-mqtt/shoal/kafka"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// options are the command's flags.
type options struct {
	Partitions int `json:"partitions"`
	Concrete   int `json:"concrete"`
	Wildcard   int `json:"wildcard"`
	Tenants    int `json:"tenants"`
	// Clients is the clients of each kind, concrete and wildcard, that
	// hold the filters, each its share.
	Clients int `json:"clients"`
	// Apply is the concrete filters of the apply phase.
	Apply     int   `json:"apply"`
	Publishes int   `json:"publishes"`
	Batch     int   `json:"batch"`
	Seed      int64 `json:"seed"`

	out     string
	readme  string
	beside  []string
	process string
	args    []string
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opt, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "shoal-indexsim:", err)
		return 2
	}
	res, err := simulate(ctx, opt, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "shoal-indexsim:", err)
		return 1
	}
	if err := write(opt, res, stderr); err != nil {
		fmt.Fprintln(stderr, "shoal-indexsim:", err)
		return 1
	}
	return 0
}

// listFlag is a flag that may be given several times.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	*l = append(*l, v)
	return nil
}

func parse(args []string, stderr io.Writer) (options, error) {
	opt := options{args: args}
	fs := flag.NewFlagSet("shoal-indexsim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&opt.Partitions, "partitions", 16, "partitions of shoal.messages: one shard each")
	fs.IntVar(&opt.Concrete, "concrete", 10_000_000, "concrete filters, each held by the shard of its partition")
	fs.IntVar(&opt.Wildcard, "wildcard", 100_000, "wildcard filters (ending in '+'), each held by every shard")
	fs.IntVar(&opt.Tenants, "tenants", 1, "tenants the clients are spread over")
	fs.IntVar(&opt.Clients, "clients", 1000, "clients holding the concrete filters, and as many the wildcard ones (shoal-distbench's index ceiling: 1000)")
	fs.IntVar(&opt.Apply, "apply", -1, "concrete filters applied as SubscriptionChanges on fresh shards; -1: as many as -concrete")
	fs.IntVar(&opt.Publishes, "publishes", 1_000_000, "publishes of each match phase")
	fs.IntVar(&opt.Batch, "batch", 4096, "records made at a time, then applied at a time (one poll of the router)")
	fs.Int64Var(&opt.Seed, "seed", 1, "seed of the topics published to")
	fs.StringVar(&opt.out, "out", "bench/router-10m.json", "the figures, as JSON")
	fs.StringVar(&opt.readme, "readme", "bench/results/"+time.Now().UTC().Format(time.DateOnly)+"-router-10m/README.md",
		"the figures' README; empty: none")
	fs.Var((*listFlag)(&opt.beside), "beside", "JSON of an earlier run of this command, shown beside this one in the README (repeatable)")
	fs.StringVar(&opt.process, "process", "bench/router-index.json", "shoal-distbench's index ceiling, the process's figures to compare with; empty: none")
	if err := fs.Parse(args); err != nil {
		return opt, err
	}
	if fs.NArg() > 0 {
		return opt, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if opt.Apply == -1 {
		opt.Apply = opt.Concrete
	}
	return opt, opt.validate()
}

// validate names the first flag out of its range.
func (o options) validate() error {
	if o.Partitions > math.MaxInt32 {
		return fmt.Errorf("-partitions: at most %d, is %d", math.MaxInt32, o.Partitions)
	}
	if err := kafka.CheckPartitions(int32(o.Partitions)); err != nil {
		return fmt.Errorf("-partitions: %w", err)
	}
	switch {
	case o.Concrete < 1:
		return fmt.Errorf("-concrete: must be ≥ 1, is %d", o.Concrete)
	case o.Wildcard < 0:
		return fmt.Errorf("-wildcard: must be ≥ 0, is %d", o.Wildcard)
	case o.Tenants < 1:
		return fmt.Errorf("-tenants: must be ≥ 1, is %d", o.Tenants)
	case o.Clients < 1:
		return fmt.Errorf("-clients: must be ≥ 1, is %d", o.Clients)
	case o.Apply < 0 || o.Apply > o.Concrete:
		return fmt.Errorf("-apply: must be -1 or from 0 to -concrete (%d), is %d", o.Concrete, o.Apply)
	case o.Publishes < 1:
		return fmt.Errorf("-publishes: must be ≥ 1, is %d", o.Publishes)
	case o.Batch < 1:
		return fmt.Errorf("-batch: must be ≥ 1, is %d", o.Batch)
	case o.out == "":
		return errors.New("-out: must name a file")
	}
	return nil
}
