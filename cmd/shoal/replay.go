package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/shoal-mqtt/shoal/compose/config"
	"github.com/shoal-mqtt/shoal/compose/replay"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// connectionFlags are the configuration flags replay passes on to
// config.Load: where the log is.
var connectionFlags = []struct{ name, usage string }{
	{"config", "YAML configuration file (the one the broker runs with); env SHOAL_CONFIG"},
	{"data-dir", "data directory of a shoal all (default ./shoal-data); env SHOAL_DATA_DIR"},
	{"kafka-brokers", "comma-separated brokers of a Kafka cluster instead of a data directory; env SHOAL_KAFKA_BROKERS"},
	{"kafka-partitions", "partitions of each event topic, when not the default; env SHOAL_KAFKA_PARTITIONS"},
	{"tenant-separator", "client-id tenant separator (gateway.tenant_separator); env SHOAL_TENANT_SEPARATOR"},
	{"kafka-sasl-mechanism", "SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN for a Kafka cluster; env SHOAL_KAFKA_SASL_MECHANISM"},
	{"kafka-sasl-user", "SASL user; env SHOAL_KAFKA_SASL_USER"},
	{"kafka-sasl-password-file", "file holding the SASL password; env SHOAL_KAFKA_SASL_PASSWORD_FILE"},
	{"kafka-tls", "true: TLS to the brokers; env SHOAL_KAFKA_TLS"},
	{"kafka-tls-ca-file", "PEM CA certificates that verify the brokers; env SHOAL_KAFKA_TLS_CA_FILE"},
	{"kafka-tls-cert-file", "PEM client certificate; env SHOAL_KAFKA_TLS_CERT_FILE"},
	{"kafka-tls-key-file", "PEM key of the client certificate; env SHOAL_KAFKA_TLS_KEY_FILE"},
	{"kafka-tls-server-name", "name the brokers' certificates must carry; env SHOAL_KAFKA_TLS_SERVER_NAME"},
}

// replayFlags parses replay's and trace's command line into options, the
// output format, the arguments for config.Load and the positional
// arguments.
type replayFlags struct {
	o                    replay.Options
	format, to           string
	rate                 float64
	quiet                bool
	configArgs           []string
	since, from, through string
	parts, types, topics string
	messageID            string
	args                 []string
}

// The usage texts of the commands that parse replayFlags.
const (
	replayUsage = `usage: shoal replay [flags]

Reads Shoal's event log back: a running or stopped shoal all (--data-dir) or
a Kafka cluster (--kafka-brokers). Without a range it reads everything the
log holds, up to its end when it started, in time order across partitions
and topics.

flags:
`
	traceUsage = `usage: shoal trace MESSAGE-ID [flags]

Follows one message through the log: its publish, the publisher's
connection, every delivery, inbox entry and acknowledgement. MESSAGE-ID is
the message_id shoal replay prints (0f3a9c0d11e5b7a2-17); flags go before
or after it. --format table (the default) prints the timeline, json the
events as replay prints them.

flags:
`
)

// parseReplayFlags parses the command line of `shoal replay` (name "shoal
// replay") or `shoal trace`: flags before and after the positional
// arguments, which it returns in args.
func parseReplayFlags(name string, args []string, stderr io.Writer) (*replayFlags, error) {
	rf := &replayFlags{o: replay.DefaultOptions()}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	usage, format, formatUsage := replayUsage, "json", "json (one object a line), table, or mqtt (publish the messages again, see --to)"
	if name == "shoal trace" {
		usage, format, formatUsage = traceUsage, "table", "table (the timeline) or json (the events, one object a line)"
	}
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	fs.StringVar(&rf.topics, "topics", "messages", "topics to read: messages, sessions, deliveries, presence, quotas, or all")
	fs.StringVar(&rf.since, "since", "", "read from this long ago (e.g. 10m, 2h)")
	fs.StringVar(&rf.from, "from", "", "read from this time (RFC 3339)")
	fs.StringVar(&rf.through, "to", "", "read up to this time (RFC 3339); with --format mqtt, the broker to publish to: mqtt://[user[:password]@]host:port/prefix (mqtts:// for TLS)")
	fs.StringVar(&rf.parts, "partitions", "", "read only these partitions (comma-separated)")
	fs.Int64Var(&rf.o.FromOffset, "from-offset", -1, "with --partitions: the first offset to read")
	fs.Int64Var(&rf.o.ToOffset, "to-offset", -1, "with --partitions: the last offset to read")
	fs.BoolVar(&rf.o.Follow, "follow", false, "keep reading new events until interrupted")
	fs.StringVar(&rf.o.Tenant, "tenant", "", "only this tenant's events (\"\" is the default tenant)")
	fs.StringVar(&rf.o.ClientID, "client", "", "only events of this client identifier")
	fs.StringVar(&rf.o.TopicFilter, "topic", "", "only events whose message's topic this MQTT filter matches (+ and # allowed)")
	fs.StringVar(&rf.types, "type", "", "only these event types (comma-separated: publish, connect, disconnect, delivery, …)")
	fs.IntVar(&rf.o.QoS, "qos", -1, "only messages of this QoS")
	fs.StringVar(&rf.messageID, "message-id", "", "only events of this message (its id as replay prints it)")
	fs.Int64Var(&rf.o.Limit, "limit", 0, "stop after this many events")
	fs.StringVar(&rf.format, "format", format, formatUsage)
	fs.Float64Var(&rf.rate, "rate", 100, "with --format mqtt: messages a second at most")
	fs.BoolVar(&rf.quiet, "quiet", false, "no progress bar")
	conn := map[string]*string{}
	for _, c := range connectionFlags {
		conn[c.name] = fs.String(c.name, "", c.usage)
	}
	flags, positional := interspersed(fs, args)
	if err := fs.Parse(flags); err != nil {
		return nil, err
	}
	rf.args = append(positional, fs.Args()...)
	var errs []error
	fs.Visit(func(f *flag.Flag) {
		if v, ok := conn[f.Name]; ok {
			rf.configArgs = append(rf.configArgs, "--"+f.Name, *v)
		}
		if f.Name == "tenant" {
			rf.o.TenantSet = true
		}
	})
	rf.o.Topics = splitComma(rf.topics)
	rf.o.Types = splitComma(rf.types)
	for _, p := range splitComma(rf.parts) {
		n, err := strconv.ParseInt(p, 10, 32)
		if err != nil {
			errs = append(errs, fmt.Errorf("--partitions: %q is not a partition number", p))
			continue
		}
		rf.o.Partitions = append(rf.o.Partitions, int32(n))
	}
	if rf.since != "" {
		d, err := time.ParseDuration(rf.since)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("--since: %q is not a positive duration such as 10m", rf.since))
		} else {
			rf.o.From = time.Now().Add(-d)
		}
	}
	if rf.from != "" {
		if rf.since != "" {
			errs = append(errs, errors.New("--from: not with --since"))
		}
		t, err := time.Parse(time.RFC3339Nano, rf.from)
		if err != nil {
			errs = append(errs, fmt.Errorf("--from: %q is not an RFC 3339 time such as 2026-11-25T10:00:00Z", rf.from))
		}
		rf.o.From = t
	}
	switch {
	case rf.format == "mqtt":
		if rf.through == "" {
			errs = append(errs, errors.New("--to: --format mqtt needs the broker, mqtt://host:port/prefix"))
		}
		rf.to = rf.through
	case rf.format != "json" && rf.format != "table":
		errs = append(errs, fmt.Errorf("--format: %q is not json, table or mqtt", rf.format))
	case rf.through != "":
		t, err := time.Parse(time.RFC3339Nano, rf.through)
		if err != nil {
			errs = append(errs, fmt.Errorf("--to: %q is not an RFC 3339 time (an mqtt:// URL goes with --format mqtt)", rf.through))
		}
		rf.o.To = t
	}
	if rf.messageID != "" {
		id, err := kafka.ParseMessageID(rf.messageID)
		if err != nil {
			errs = append(errs, fmt.Errorf("--message-id: %w", err))
		}
		rf.o.MessageID = id
	}
	return rf, errors.Join(errs...)
}

// oneLine is err's text on one line: joined errors separated by "; ".
func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}

func splitComma(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// openLogFor loads the configuration of rf's connection flags, checks
// rf's options against it and opens the log, for the command name; on
// failure it says why in one line and returns nil and the exit code (2: the
// command line, 1: the log).
func openLogFor(ctx context.Context, name string, rf *replayFlags, stderr io.Writer) (*replay.Log, int) {
	cfg, err := config.Load(name, rf.configArgs, os.LookupEnv, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %s\n", name, oneLine(err))
		return nil, 2
	}
	rf.o.TenantSeparator = cfg.Gateway.TenantSeparator
	if err := rf.o.Validate(); err != nil {
		fmt.Fprintf(stderr, "%s: %s\n", name, oneLine(err))
		return nil, 2
	}
	// The client's retries are not the user's business; what fails is
	// returned, and said in one line.
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	l, err := replay.Open(ctx, cfg, log)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %s\n", name, oneLine(err))
		return nil, 1
	}
	return l, 0
}

// runReplay is `shoal replay`.
func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	rf, err := parseReplayFlags("shoal replay", args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err == nil && len(rf.args) > 0 {
		err = fmt.Errorf("unexpected argument %q", rf.args[0])
	}
	if err != nil {
		fmt.Fprintln(stderr, "shoal replay:", oneLine(err))
		return 2
	}
	l, code := openLogFor(ctx, "shoal replay", rf, stderr)
	if l == nil {
		return code
	}
	defer func() { _ = l.Close() }()
	var sink replay.Sink
	switch rf.format {
	case "json":
		sink = replay.NewJSONSink(stdout)
	case "table":
		sink = replay.NewTableSink(stdout)
	case "mqtt":
		t, err := replay.ParseMQTTTarget(rf.to)
		if err != nil {
			fmt.Fprintln(stderr, "shoal replay:", oneLine(err))
			return 2
		}
		ms, err := replay.DialMQTT(ctx, t, rf.rate)
		if err != nil {
			fmt.Fprintln(stderr, "shoal replay:", oneLine(err))
			return 1
		}
		defer func() {
			_ = ms.Close()
			fmt.Fprintf(stderr, "shoal replay: published %d messages to %s (%d other events skipped)\n", ms.Published, t.Addr, ms.Skipped)
		}()
		sink = ms
	}
	var prog replay.Progress
	if f, ok := stderr.(*os.File); ok && !rf.quiet && term.IsTerminal(int(f.Fd())) {
		prog = replay.NewBar(stderr)
	}
	st, err := replay.Run(ctx, l.Client, rf.o, sink, prog)
	if errors.Is(err, replay.ErrNoEvents) {
		fmt.Fprintf(stderr, "shoal replay: %v (%d records read in %d partitions of %s)\n", err, st.Read, st.Partitions, l.Where)
		return 1
	}
	if err != nil {
		fmt.Fprintln(stderr, "shoal replay:", oneLine(err))
		return 1
	}
	return 0
}

// runTrace is `shoal trace MESSAGE-ID [flags]`: replay's connection and
// range flags, before or after the id; --format table (the default) prints
// the timeline, json the events as replay prints them.
func runTrace(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	rf, err := parseReplayFlags("shoal trace", args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err == nil && rf.format == "mqtt" {
		err = errors.New("--format: table or json")
	}
	var id *eventspb.MessageID
	if err == nil {
		switch len(rf.args) {
		case 0:
			err = errors.New("give the message id (as shoal replay prints it: 0f3a9c0d11e5b7a2-17)")
		case 1:
			id, err = kafka.ParseMessageID(rf.args[0])
		default:
			err = fmt.Errorf("unexpected argument %q: give one message id", rf.args[1])
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "shoal trace:", oneLine(err))
		return 2
	}
	l, code := openLogFor(ctx, "shoal trace", rf, stderr)
	if l == nil {
		return code
	}
	defer func() { _ = l.Close() }()
	evs, err := replay.Trace(ctx, l.Client, id, rf.o)
	if err != nil {
		fmt.Fprintf(stderr, "shoal trace: %s (searched %s)\n", oneLine(err), l.Where)
		return 1
	}
	if rf.format == "json" {
		s := replay.NewJSONSink(stdout)
		for _, e := range evs {
			if err := s.Write(&e.Event); err != nil {
				fmt.Fprintln(stderr, "shoal trace:", oneLine(err))
				return 1
			}
		}
		err = s.Flush()
	} else {
		err = replay.WriteTimeline(stdout, evs)
	}
	if err != nil {
		fmt.Fprintln(stderr, "shoal trace:", oneLine(err))
		return 1
	}
	return 0
}
