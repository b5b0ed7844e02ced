package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"

	"github.com/shoal-mqtt/shoal/bench/load"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "report" {
		return report(args[1:], stdout, stderr)
	}
	cfg, opt, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "shoal-bench:", err)
		return 2
	}
	if opt.cpuProfile != "" {
		f, err := os.Create(opt.cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, "shoal-bench:", err)
			return 1
		}
		defer func() {
			if err := f.Close(); err != nil {
				fmt.Fprintln(stderr, "shoal-bench: cpu profile:", err)
			}
		}()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "shoal-bench: cpu profile:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	res, runErr := load.Run(ctx, cfg, stderr)
	if res != nil {
		if err := writeResult(res, opt.out, stdout); err != nil {
			fmt.Fprintln(stderr, "shoal-bench:", err)
			return 1
		}
		if opt.out != "" {
			summary(stdout, res)
		}
	}
	if runErr != nil {
		fmt.Fprintln(stderr, "shoal-bench:", runErr)
		return 1
	}
	return 0
}

func parse(args []string, stderr io.Writer) (load.Config, options, error) {
	cfg := load.DefaultConfig()
	fs := flag.NewFlagSet("shoal-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: shoal-bench [flags]\n       shoal-bench report -dir DIR [-a shoal -b mosquitto -md FILE]\n\nflags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.Addr, "addr", cfg.Addr, "broker address host:port, or a comma-separated list of them: client i connects to address i mod their number")
	fs.StringVar(&cfg.SubscriberAddr, "sub-addr", "", "address (or list, as -addr) the subscribers connect to, when not -addr (another node of a distributed broker)")
	fs.StringVar(&cfg.Scenario, "scenario", cfg.Scenario, "one of "+strings.Join(load.Scenarios(), ", "))
	proto := fs.String("protocol", "5", "MQTT version: 5 or 3.1.1")
	qos := fs.Uint("qos", 0, "QoS of publishes and subscriptions: 0, 1 or 2")
	fs.IntVar(&cfg.Payload, "payload", cfg.Payload, "payload bytes (≥ 16: send time, publisher, sequence)")
	fs.IntVar(&cfg.Clients, "clients", cfg.Clients, "pairs (pairs, latency), fan-out subscribers, idle connections, or wildcard subscribers")
	fs.IntVar(&cfg.Publishers, "publishers", cfg.Publishers, "wildcard publishers")
	fs.DurationVar(&cfg.SessionExpiry, "session-expiry", 0, "persistent sessions: every client's session outlives its connection this long (MQTT 5 Session Expiry Interval, whole seconds); the clients end them at the end of the run unless -keep-sessions; 0 = sessions end with their connections")
	fs.BoolVar(&cfg.Resume, "resume", false, "connect with Clean Start 0, taking up the sessions an earlier run kept (-keep-sessions, same -prefix)")
	fs.BoolVar(&cfg.KeepSessions, "keep-sessions", false, "leave the persistent sessions on the broker at the end of the run")
	fs.IntVar(&cfg.Subscriptions, "subscriptions", 0, "connections: filters each connection subscribes to once all are up, one SUBSCRIBE each (at -qos)")
	fs.BoolVar(&cfg.WildcardFilters, "wildcard-filters", false, "connections: the -subscriptions filters end in a '+' level")
	fs.IntVar(&cfg.Queued, "queued", cfg.Queued, "offline: messages each publisher sends while its subscriber is offline")
	fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "total publish rate in msg/s; 0 = as fast as flow control allows (latency: default 10000)")
	fs.IntVar(&cfg.Inflight, "inflight", cfg.Inflight, "QoS 1/2: unacknowledged PUBLISH per publisher (capped by the broker's receive maximum)")
	fs.IntVar(&cfg.Window, "window", cfg.Window, "end-to-end window: messages per publisher sent but not yet received by a subscriber (any QoS); 0 = none")
	fs.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "warm-up before the measured window (connections: settle time)")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "measured window (connections: how long they are held)")
	fs.DurationVar(&cfg.Drain, "drain", cfg.Drain, "longest wait for deliveries after the last publish")
	fs.DurationVar(&cfg.SetupTimeout, "setup-timeout", cfg.SetupTimeout, "bound on connecting and subscribing every client")
	fs.IntVar(&cfg.ConnectConcurrency, "connect-concurrency", cfg.ConnectConcurrency, "connections opened at once")
	fs.DurationVar(&cfg.KeepAlive, "keepalive", cfg.KeepAlive, "MQTT keep alive (PINGREQ every half of it)")
	fs.StringVar(&cfg.Prefix, "prefix", cfg.Prefix, "client-id and topic prefix (Shoal's tenant is the client id up to the first '-')")
	fs.StringVar(&cfg.Username, "username", "", "user name every client authenticates with (empty: none)")
	fs.StringVar(&cfg.Password, "password", "", "password sent with -username")
	fs.IntVar(&cfg.BrokerPID, "broker-pid", 0, "PID of the broker, to read its CPU and RSS from /proc (0: do not)")
	fs.Uint64Var(&cfg.BrokerRSSBase, "broker-rss-base", 0, "connections: the broker's RSS in bytes to count each connection's memory from (0: its RSS when the scenario starts); the fresh process's, for a broker that carried a load before")
	fs.Func("proc", "NAME=PID of another process to report CPU and RSS for (repeatable: the parts of a distributed broker, its Kafka, its database)", func(v string) error {
		name, pid, ok := strings.Cut(v, "=")
		n, err := strconv.Atoi(pid)
		if !ok || name == "" || err != nil || n <= 0 {
			return fmt.Errorf("%q is not NAME=PID", v)
		}
		cfg.Processes = append(cfg.Processes, load.Process{Name: name, PID: n})
		return nil
	})
	cpuProfile := fs.String("cpuprofile", "", "write the generator's CPU profile to this file")
	out := fs.String("out", "", "write the JSON result to this file (default: stdout)")
	fs.StringVar(&cfg.Name, "name", "", "name of the run in a comparison (e.g. pairs-qos0)")
	fs.StringVar(&cfg.Label, "label", "", "broker label in a comparison (e.g. shoal, mosquitto)")
	fs.IntVar(&cfg.Round, "round", 0, "round number in a comparison")
	if err := fs.Parse(args); err != nil {
		return cfg, options{}, err
	}
	if fs.NArg() > 0 {
		return cfg, options{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	switch *proto {
	case "5", "5.0":
		cfg.Version = packet.V5
	case "3.1.1", "4":
		cfg.Version = packet.V311
	default:
		return cfg, options{}, fmt.Errorf("protocol: %q (want 5 or 3.1.1)", *proto)
	}
	if *qos > 2 {
		return cfg, options{}, fmt.Errorf("qos: %d (want 0, 1 or 2)", *qos)
	}
	cfg.QoS = packet.QoS(*qos)
	if err := cfg.Validate(); err != nil {
		return cfg, options{}, err
	}
	return cfg, options{out: *out, cpuProfile: *cpuProfile}, nil
}

// options are the command's settings outside load.Config.
type options struct {
	out        string
	cpuProfile string
}

func writeResult(res *load.Result, path string, stdout io.Writer) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	b = append(b, '\n')
	if path == "" {
		_, err = stdout.Write(b)
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	return nil
}

// summary prints the headline figures of a run written to a file.
func summary(w io.Writer, r *load.Result) {
	name := r.Scenario
	if r.Name != "" {
		name = r.Name
	}
	if r.Label != "" {
		name += " on " + r.Label
	}
	if c := r.Connect; c != nil {
		fmt.Fprintf(w, "%s: %d/%d connected in %.1fs (%.0f/s), %d alive at end", name, c.Connected, c.Attempted, c.Seconds, c.PerSec, c.AliveAtEnd)
		if r.Broker != nil {
			fmt.Fprintf(w, ", broker RSS %.1f → %.1f MiB (%.1f KiB per connection)",
				float64(r.Broker.RSSStart)/(1<<20), float64(r.Broker.RSSEnd)/(1<<20), r.Broker.RSSPerConnection/1024)
		}
		fmt.Fprintln(w)
		return
	}
	fmt.Fprintf(w, "%s: %.0f deliveries/s (%d sent, %d expected, %d unique, %d lost, %d undelivered, %d duplicates)",
		name, r.Measured.DeliveriesPerSec, r.Sent, r.Expected, r.Unique, r.Lost, r.Tail, r.Duplicates)
	if l := r.Latency; l != nil {
		fmt.Fprintf(w, ", latency µs p50 %.0f p99 %.0f p99.9 %.0f max %.0f", l.P50, l.P99, l.P999, l.Max)
	}
	if b := r.Broker; b != nil {
		fmt.Fprintf(w, ", broker %.0f%% CPU, %.0f deliveries/CPU-s, RSS max %.1f MiB", b.CPUPercent, b.DeliveriesPerCPUSecond, float64(b.RSSMax)/(1<<20))
	}
	if g := r.Generator; g != nil {
		fmt.Fprintf(w, ", generator %.0f%% CPU", g.CPUPercent)
	}
	for _, p := range r.Processes {
		fmt.Fprintf(w, ", %s %.0f%% CPU", p.Name, p.CPUPercent)
	}
	fmt.Fprintln(w)
}

func report(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("shoal-bench report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "directory of JSON results")
	a := fs.String("a", "shoal", "label of the first broker (the ratio's numerator)")
	b := fs.String("b", "mosquitto", "label of the second broker")
	md := fs.String("md", "", "also write the tables as markdown to this file")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *dir == "" {
		fmt.Fprintln(stderr, "shoal-bench report: -dir is required")
		return 2
	}
	results, err := load.LoadResults(*dir)
	if err != nil {
		fmt.Fprintln(stderr, "shoal-bench report:", err)
		return 1
	}
	rows := load.Compare(results, *a, *b)
	if err := load.WriteText(stdout, rows, *a, *b); err != nil {
		fmt.Fprintln(stderr, "shoal-bench report:", err)
		return 1
	}
	if *md != "" {
		f, err := os.Create(*md)
		if err != nil {
			fmt.Fprintln(stderr, "shoal-bench report:", err)
			return 1
		}
		load.WriteMarkdown(f, rows, *a, *b)
		fmt.Fprintln(f)
		load.WriteRuns(f, results)
		if err := f.Close(); err != nil {
			fmt.Fprintln(stderr, "shoal-bench report:", err)
			return 1
		}
	}
	return 0
}
