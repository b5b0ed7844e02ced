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
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/shoal-mqtt/shoal/bench/load"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// The topologies.
const (
	// topoOne is one gateway: publishers and subscribers connect to it.
	topoOne = "one-gateway"
	// topoTwo is two gateways: publishers on the first, subscribers on
	// the second.
	topoTwo = "two-gateways"
	// topoCluster is shaped like production: 3 Kafka brokers, a Cassandra
	// ring of 3, 2 session services, 2 routers and 3 gateways, pair i's
	// publisher on gateway i mod 3 and its subscriber on the next one. It
	// has a backbone of its own, started once the one-node backbone is
	// stopped (the machine holds one of them at a time), so it must come
	// last.
	topoCluster = "cluster"
)

// The scenarios: the generator's latency scenario at a fixed rate, or its
// pairs scenario as fast as the flow control lets it.
const (
	scenLatency = load.ScenarioLatency
	scenPairs   = load.ScenarioPairs
)

// options are the command's settings.
type options struct {
	out         string
	shoal       string // the shoal binary; "" builds one
	shoalConfig string // YAML for every Shoal process; "" writes defaultShoalConfig
	topologies  []string
	scenario    string // scenLatency or scenPairs
	qos         []packet.QoS
	rounds      int
	clients     int
	rate        float64
	payload     int
	inflight    int
	window      int // pairs at QoS 0: the end-to-end window per publisher
	partitions  int
	warmup      time.Duration
	duration    time.Duration
	drain       time.Duration
	pause       time.Duration // between two runs
	timeout     time.Duration // the whole command; 0: computed
	prime       time.Duration // an unrecorded run per topology before the rounds
	connects    int           // clients of the connect waves after each round (0: none)
	// The units scenario's: fan-out subscribers and their publisher's
	// rate, clients of its connect phases, and its output file.
	fanout       int
	fanoutRate   float64
	unitConnects int
	unitQueued   int
	// The subscribe phases: connections, and filters each.
	unitSubscribers, unitFilters, unitWildcards int
	unitsOut                                    string
	unitsReadme                                 string
	// The router index ceiling (-unit-index): filters without and with a
	// wildcard, and the file of its figures.
	indexConcrete, indexWildcard int
	stormClients                 int   // -unit-storm
	stormSessions                []int // -storm-sessions
	stormOut                     string
	unitTicks                    bool // -unit-ticks
	// The fleet hold (-unit-hold): devices, gateways, keepalive, the
	// measured window, the bound on connecting them, the file; and, in a
	// generator child, its spec (-hold-child).
	holdClients, holdGateways int
	holdKeepAlive, holdWindow time.Duration
	holdSetup                 time.Duration
	holdOut, holdChild        string
	holdScale                 bool
	// The outside generator (-outside): its rounds, its saturating
	// warm-ups, and the script.
	outsideRounds, outsideWarmups int
	outsideScript                 string
	ticksOut                      string
	indexOut                      string
	unitIdle                      time.Duration
	c1Only                        bool
	profile                       bool
	keep                          bool
	args                          []string // the command line, for the README
}

// runs is the number of generator runs the options make.
func (o *options) runs() int { return len(o.topologies) * len(o.qos) * o.rounds }

// setupTimeout bounds connecting and subscribing the clients of one run.
const setupTimeout = 60 * time.Second

// startBound bounds starting Kafka and Cassandra (and fetching their jars
// the first time) plus Shoal's processes for every topology.
const startBound = 10 * time.Minute

// clusterStartBound bounds stopping the one-node backbone and starting the
// cluster's (six JVMs on the machine at once).
const clusterStartBound = 10 * time.Minute

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opt, err := parse(args, stderr, time.Now())
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "shoal-distbench:", err)
		return 2
	}
	if opt.holdChild != "" {
		if err := runHoldChild(ctx, opt.holdChild, os.Stdin, stdout, stderr); err != nil {
			fmt.Fprintln(stderr, "shoal-distbench:", err)
			return 1
		}
		return 0
	}
	if opt.unitsReadme != "" {
		b, err := os.ReadFile(opt.unitsReadme)
		var f unitsFile
		if err == nil {
			err = json.Unmarshal(b, &f)
		}
		if err != nil {
			fmt.Fprintln(stderr, "shoal-distbench: units-readme:", err)
			return 1
		}
		_, _ = io.WriteString(stdout, unitsReadme(f))
		return 0
	}
	ctx, cancel := context.WithTimeout(ctx, opt.timeout)
	defer cancel()
	if err := bench(ctx, opt, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "shoal-distbench:", err)
		return 1
	}
	return 0
}

// parse reads the command line into options. It is long because it
// declares every flag of the tool, one per line, and then checks them:
// a list, not a knot, kept in one place so the usage text matches.
func parse(args []string, stderr io.Writer, now time.Time) (options, error) {
	opt := options{args: args}
	fs := flag.NewFlagSet("shoal-distbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: shoal-distbench [flags]\n\n"+
			"Starts a real Kafka, a real Cassandra and Shoal's roles as separate processes on\n"+
			"loopback, runs the latency or the pairs scenario against them and writes the\n"+
			"results. The cluster topology (3 Kafka brokers, a Cassandra ring of 3, 7 Shoal\n"+
			"processes) runs on a backbone of its own, after the others: it must come last.\n\nflags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&opt.out, "out", filepath.Join("bench", "results", now.UTC().Format("2006-01-02")+"-distributed"), "directory of the JSON results, the logs and README.md (results of an earlier run there are removed)")
	fs.StringVar(&opt.shoal, "shoal", "", "shoal binary to run (default: go build ./cmd/shoal into the work directory)")
	fs.StringVar(&opt.shoalConfig, "shoal-config", "", "YAML configuration of every Shoal process (default: log_level info, cql.replication_factor 1); the command's flags override its Kafka, CQL and listener settings")
	topos := fs.String("topologies", topoOne+","+topoTwo, "comma-separated: "+topoOne+" (publishers and subscribers on one gateway), "+topoTwo+" (publishers on one, subscribers on another), "+topoCluster+" (3 Kafka brokers, 3 Cassandra nodes, 2 session services, 2 routers, 3 gateways; last)")
	fs.StringVar(&opt.scenario, "scenario", scenLatency, scenLatency+" (a fixed -rate, latency against the target), "+scenPairs+" (as fast as flow control allows: throughput) or "+scenUnits+" (what a message and a connect cost each process, the log and the database, one phase after another, into -units-out)")
	fs.IntVar(&opt.fanout, "fanout", 1000, "units: subscribers of the fan-out phase's one publisher")
	fs.Float64Var(&opt.fanoutRate, "fanout-rate", 20, "units: the fan-out publisher's rate in msg/s (each message is delivered -fanout times)")
	fs.IntVar(&opt.unitConnects, "unit-connects", 2000, "units: clients of each connect phase")
	fs.IntVar(&opt.unitSubscribers, "unit-subscribers", 1000, "units: connections of each subscribe phase")
	fs.IntVar(&opt.unitFilters, "unit-filters", 100, "units: filters without wildcards each of the subscribe-concrete phase's connections subscribes to")
	fs.IntVar(&opt.unitWildcards, "unit-wildcards", 10, "units: filters with a '+' each of the subscribe-wildcard phase's connections subscribes to")
	fs.IntVar(&opt.unitQueued, "unit-queued", 200, "units: messages each of the offline phase's publishers sends while its subscriber is offline")
	fs.DurationVar(&opt.unitIdle, "unit-idle", 15*time.Second, "units: how long every process's idle CPU is measured before the first phase (it is subtracted from each phase)")
	fs.StringVar(&opt.unitsOut, "units-out", filepath.Join("bench", "units.json"), "units: the file of the costs")
	fs.Func("unit-index", "units: instead of the unit costs, the router index ceiling with CONCRETE,WILDCARD filters of persistent sessions (e.g. 1000000,100000): the router's heap per filter, its CPU per message with and without the index, and its rebuild when it restarts, into -index-out", func(v string) error {
		a, b, ok := strings.Cut(v, ",")
		n, err1 := strconv.Atoi(strings.TrimSpace(a))
		w, err2 := strconv.Atoi(strings.TrimSpace(b))
		if !ok || err1 != nil || err2 != nil || n < 1 || w < 1 {
			return fmt.Errorf("%q: want CONCRETE,WILDCARD, both ≥ 1", v)
		}
		opt.indexConcrete, opt.indexWildcard = n, w
		return nil
	})
	fs.IntVar(&opt.stormClients, "unit-storm", 0, "units: instead of the unit costs, connect storms of this many clients (e.g. 10000) on two gateways: all connect at once with persistent sessions, their gateway is killed, all resume at once on the other; with each count of -storm-sessions session services, into -storm-out")
	stormSessions := fs.String("storm-sessions", "1,2", "units with -unit-storm: comma-separated counts of session services, one topology each")
	fs.StringVar(&opt.stormOut, "storm-out", filepath.Join("bench", "connect-storm.json"), "units with -unit-storm: the file of the connect storms")
	fs.BoolVar(&opt.unitTicks, "unit-ticks", false, "units: instead of the unit costs, what the per-partition records (GatewayHeartbeat, SessionTick) cost each process: the idle topology with their default periods, then with both at 100ms, into -ticks-out")
	fs.StringVar(&opt.ticksOut, "ticks-out", filepath.Join("bench", "partition-costs.json"), "units with -unit-ticks: the file of the partition costs")
	fs.IntVar(&opt.holdClients, "unit-hold", 0, "units: instead of the unit costs, this many idle devices (e.g. 100000) held across -hold-gateways gateways, each with a persistent session and one subscription: memory per device in every process and the kernel, and CPU per device-second held, into -hold-out")
	fs.IntVar(&opt.holdGateways, "hold-gateways", 6, "units with -unit-hold: gateways, one generator process each")
	fs.DurationVar(&opt.holdKeepAlive, "hold-keepalive", 60*time.Second, "units with -unit-hold: the devices' keepalive (they ping every half of it)")
	fs.DurationVar(&opt.holdWindow, "hold-window", 60*time.Second, "units with -unit-hold: how long the held devices' CPU is measured")
	fs.DurationVar(&opt.holdSetup, "hold-setup", 10*time.Minute, "units with -unit-hold: the bound on connecting and subscribing every device")
	fs.BoolVar(&opt.holdScale, "hold-scale", false, "units with -unit-hold: while the devices are held, start a second session service and stop it again, each under persistent QoS 1 pairs, and measure the pause")
	fs.StringVar(&opt.holdOut, "hold-out", filepath.Join("bench", "fleet-hold.json"), "units with -unit-hold: the file of the fleet hold")
	fs.StringVar(&opt.holdChild, holdChildFlag, "", "internal: run as one of -unit-hold's generator processes (ADDR,DEVICES,PREFIX,KEEPALIVE)")
	fs.IntVar(&opt.outsideRounds, "outside", 0, "latency: first, right after each topology starts, this many rounds of scripts/outside-latency.py (a generator with nothing of Shoal's) after its saturating warm-ups, in the README beside Shoal's generator's rounds (other scenarios: ignored; -smoke: 0 unless given)")
	fs.IntVar(&opt.outsideWarmups, "outside-warmups", 2, "latency with -outside: the outside generator's saturating warm-ups of 10 s")
	fs.StringVar(&opt.outsideScript, "outside-script", filepath.Join("scripts", "outside-latency.py"), "latency with -outside: the outside generator")
	fs.StringVar(&opt.indexOut, "index-out", filepath.Join("bench", "router-index.json"), "units with -unit-index: the file of the router index ceiling")
	fs.StringVar(&opt.unitsReadme, "units-readme", "", "print the README of the costs in this units file (a -units-out of an earlier run) and exit")
	qos := fs.String("qos", "0,1", "comma-separated QoS levels to run")
	fs.IntVar(&opt.rounds, "rounds", 3, "rounds: each runs every QoS once per topology")
	fs.IntVar(&opt.clients, "clients", 50, "publisher → subscriber pairs")
	fs.Float64Var(&opt.rate, "rate", load.DefaultLatencyRate, "latency: total publish rate in msg/s")
	fs.IntVar(&opt.payload, "payload", 64, "payload bytes")
	fs.IntVar(&opt.inflight, "inflight", 64, "QoS 1 and 2: unacknowledged PUBLISH per publisher")
	fs.IntVar(&opt.window, "window", 100, "pairs at QoS 0: messages per publisher sent but not yet received (QoS 1 and 2 are bounded by -inflight)")
	fs.IntVar(&opt.partitions, "partitions", 16, "partitions of each event topic (kafka.partitions)")
	fs.DurationVar(&opt.warmup, "warmup", 3*time.Second, "warm-up before each measured window")
	fs.DurationVar(&opt.duration, "duration", 10*time.Second, "measured window of each run")
	fs.DurationVar(&opt.drain, "drain", 10*time.Second, "longest wait for deliveries after the last publish")
	fs.DurationVar(&opt.pause, "pause", 2*time.Second, "pause between two runs")
	fs.DurationVar(&opt.timeout, "timeout", 0, "bound on the whole command (default: computed from the runs)")
	fs.DurationVar(&opt.prime, "prime", 10*time.Second, "an unrecorded run at the same load before each topology's rounds, so that the JVMs have compiled their hot paths (0: none)")
	fs.BoolVar(&opt.c1Only, "c1", false, "run Kafka and Cassandra with the C1 compiler only (as the integration tests do: faster start, slower run) instead of the full JIT")
	fs.BoolVar(&opt.profile, "profile", false, "serve /debug/pprof/ in the Shoal processes and write a CPU profile of each over every measured window into OUT/profiles")
	fs.BoolVar(&opt.keep, "keep", false, "keep the work directory (Kafka and Cassandra data and logs)")
	fs.IntVar(&opt.connects, "connects", 0, "after each round, a wave of this many clients that connect (64 at a time) with client ids new to the broker, then a wave with the same ids again (their sessions ended: the session service reads them back from the database); 0: none")
	smoke := fs.Bool("smoke", false, "a quick check: -rounds 1 -warmup 1s -duration 2s -prime 0 unless given")
	if err := fs.Parse(args); err != nil {
		return opt, err
	}
	if fs.NArg() > 0 {
		return opt, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *smoke {
		if !set["rounds"] {
			opt.rounds = 1
		}
		if !set["warmup"] {
			opt.warmup = time.Second
		}
		if !set["duration"] {
			opt.duration = 2 * time.Second
		}
		if !set["prime"] {
			opt.prime = 0
		}
		if !set["outside"] {
			opt.outsideRounds = 0
		}
	}
	for t := range strings.SplitSeq(*topos, ",") {
		switch t = strings.TrimSpace(t); {
		case t == "":
		case t != topoOne && t != topoTwo && t != topoCluster:
			return opt, fmt.Errorf("topologies: %q is not %s, %s or %s", t, topoOne, topoTwo, topoCluster)
		case slices.Contains(opt.topologies, t):
			return opt, fmt.Errorf("topologies: %s given twice", t)
		case slices.Contains(opt.topologies, topoCluster):
			return opt, fmt.Errorf("topologies: %s after %s: %s must come last (its backbone starts once the one-node backbone is stopped)", t, topoCluster, topoCluster)
		default:
			opt.topologies = append(opt.topologies, t)
		}
	}
	if opt.scenario == scenUnits && !set["topologies"] {
		opt.topologies = []string{topoTwo} // every message crosses the log
	}
	for q := range strings.SplitSeq(*qos, ",") {
		if q = strings.TrimSpace(q); q == "" {
			continue
		}
		n, err := strconv.Atoi(q)
		if err != nil || n < 0 || n > 2 {
			return opt, fmt.Errorf("qos: %q is not 0, 1 or 2", q)
		}
		opt.qos = append(opt.qos, packet.QoS(n))
	}
	for v := range strings.SplitSeq(*stormSessions, ",") {
		if v = strings.TrimSpace(v); v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return opt, fmt.Errorf("storm-sessions: %q is not a count ≥ 1", v)
		}
		opt.stormSessions = append(opt.stormSessions, n)
	}
	switch {
	case len(opt.topologies) == 0:
		return opt, errors.New("topologies: none given")
	case opt.stormClients < 0 || (opt.stormClients > 0 && (opt.scenario != scenUnits || opt.indexConcrete > 0 || len(opt.stormSessions) == 0)):
		return opt, fmt.Errorf("unit-storm: %d clients (want ≥ 0; with -scenario units, without -unit-index, and at least one -storm-sessions)", opt.stormClients)
	case opt.holdClients < 0 || opt.holdClients > 0 && (opt.scenario != scenUnits || opt.indexConcrete > 0 || opt.stormClients > 0 || opt.unitTicks):
		return opt, fmt.Errorf("unit-hold: %d devices (want ≥ 0; with -scenario units, without -unit-index, -unit-storm or -unit-ticks)", opt.holdClients)
	case opt.holdClients > 0 && (opt.holdGateways < 1 || opt.holdGateways > opt.partitions || opt.holdClients < opt.holdGateways):
		return opt, fmt.Errorf("hold-gateways: %d (want 1 to -partitions, %d, and at most one per device)", opt.holdGateways, opt.partitions)
	case opt.holdClients > 0 && (opt.holdKeepAlive < time.Second || opt.holdWindow <= 0 || opt.holdSetup <= 0):
		return opt, fmt.Errorf("hold-keepalive, hold-window, hold-setup: %s, %s, %s (want ≥ 1s, > 0, > 0)", opt.holdKeepAlive, opt.holdWindow, opt.holdSetup)
	case opt.outsideRounds < 0 || opt.outsideWarmups < 0:
		return opt, fmt.Errorf("outside, outside-warmups: %d, %d (want ≥ 0)", opt.outsideRounds, opt.outsideWarmups)
	case opt.unitTicks && (opt.scenario != scenUnits || opt.indexConcrete > 0 || opt.stormClients > 0):
		return opt, errors.New("unit-ticks: with -scenario units, without -unit-index or -unit-storm")
	case opt.stormClients > 0 && opt.topologies[0] == topoOne:
		return opt, fmt.Errorf("topologies: the connect storms need two gateways (%s or %s)", topoTwo, topoCluster)
	case opt.scenario != scenLatency && opt.scenario != scenPairs && opt.scenario != scenUnits:
		return opt, fmt.Errorf("scenario: %q is not %s, %s or %s", opt.scenario, scenLatency, scenPairs, scenUnits)
	case opt.scenario == scenUnits && len(opt.topologies) != 1:
		return opt, fmt.Errorf("topologies: the %s scenario runs on one topology, got %d", scenUnits, len(opt.topologies))
	case opt.scenario == scenUnits && (opt.fanout < 1 || opt.fanoutRate <= 0 || opt.unitConnects < 1 || opt.unitQueued < 1 || opt.unitSubscribers < 1 || opt.unitFilters < 1 || opt.unitWildcards < 1):
		return opt, fmt.Errorf("fanout, fanout-rate, unit-connects, unit-queued, unit-subscribers, unit-filters, unit-wildcards: %d, %g, %d, %d, %d, %d, %d (want ≥ 1, > 0, then ≥ 1)",
			opt.fanout, opt.fanoutRate, opt.unitConnects, opt.unitQueued, opt.unitSubscribers, opt.unitFilters, opt.unitWildcards)
	case opt.scenario == scenUnits && set["rate"]:
		return opt, fmt.Errorf("rate: the %s scenario's pairs are not paced (-fanout-rate paces its fan-out)", scenUnits)
	case opt.scenario == scenPairs && set["rate"]:
		return opt, fmt.Errorf("rate: the %s scenario is not paced (it publishes as fast as flow control allows)", scenPairs)
	case opt.window < 1:
		return opt, fmt.Errorf("window: %d (want ≥ 1)", opt.window)
	case len(opt.qos) == 0:
		return opt, errors.New("qos: none given")
	case opt.rounds < 1:
		return opt, fmt.Errorf("rounds: %d (want ≥ 1)", opt.rounds)
	case opt.partitions < 1:
		return opt, fmt.Errorf("partitions: %d (want ≥ 1)", opt.partitions)
	case opt.prime < 0:
		return opt, fmt.Errorf("prime: %s (want ≥ 0)", opt.prime)
	case opt.pause < 0:
		return opt, fmt.Errorf("pause: %s (want ≥ 0)", opt.pause)
	case opt.timeout < 0:
		return opt, fmt.Errorf("timeout: %s (want ≥ 0)", opt.timeout)
	}
	// The generator's own checks, on the first run's configuration.
	cfg := opt.loadConfig(opt.topologies[0], opt.qos[0], 1)
	if err := cfg.Validate(); err != nil {
		return opt, err
	}
	if opt.timeout == 0 {
		opt.timeout = startBound + time.Duration(opt.runs())*(cfg.Deadline()+opt.pause)
		if opt.prime > 0 {
			opt.timeout += time.Duration(len(opt.topologies)) * (cfg.Deadline() - cfg.Duration + opt.prime)
		}
		if slices.Contains(opt.topologies, topoCluster) {
			opt.timeout += clusterStartBound
		}
		if opt.outsideRounds > 0 && opt.scenario == scenLatency {
			// Each warm-up and its drain, each round and its settle and drain.
			per := time.Duration(opt.outsideWarmups)*40*time.Second + time.Duration(opt.outsideRounds)*(opt.duration+5*time.Second)
			opt.timeout += time.Duration(len(opt.topologies)) * per
		}
		if opt.holdClients > 0 {
			// Restarting with the hold's gateways, then the idle window,
			// the setup, the hold and the disconnects.
			opt.timeout += startBound + opt.unitIdle + opt.holdSetup + opt.holdWindow + 5*time.Minute
			if opt.holdScale {
				opt.timeout += 2 * (scaleWindow + 90*time.Second) // each window, its drain and the start or stop
			}
		}
	}
	return opt, nil
}

// loadConfig is the generator's configuration of one run, without the
// addresses and processes.
func (o *options) loadConfig(topo string, qos packet.QoS, round int) load.Config {
	cfg := load.DefaultConfig()
	cfg.Scenario = o.scenario
	if o.scenario == scenUnits {
		cfg.Scenario = scenPairs // its prime; the phases set their own
	}
	cfg.QoS = qos
	cfg.Clients = o.clients
	cfg.Rate = o.rate
	if o.scenario == scenPairs || o.scenario == scenUnits {
		// Unpaced: QoS 1 and 2 publishers are bounded by their in-flight
		// window; at QoS 0 only an end-to-end window keeps the queues
		// between publisher and subscriber (socket buffers, the log)
		// from growing without bound.
		cfg.Rate = 0
		if qos == 0 {
			cfg.Window = o.window
		}
	}
	cfg.Payload = o.payload
	cfg.Inflight = o.inflight
	cfg.Warmup = o.warmup
	cfg.Duration = o.duration
	cfg.Drain = o.drain
	cfg.SetupTimeout = setupTimeout
	// Fresh client ids and topics per run, in one tenant ("bench": Shoal's
	// tenant is the client id up to the first '-').
	cfg.Prefix = fmt.Sprintf("bench-%s-q%d-r%d", topoShort(topo), qos, round)
	cfg.Name = fmt.Sprintf("%s-qos%d", o.scenario, qos)
	cfg.Label = topo
	cfg.Round = round
	return cfg
}

// topoShort is the topology's name in client ids.
func topoShort(topo string) string {
	switch topo {
	case topoTwo:
		return "2gw"
	case topoCluster:
		return "cl"
	}
	return "1gw"
}
