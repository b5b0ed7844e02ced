package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/shoal-mqtt/shoal/compose/broker"
	"github.com/shoal-mqtt/shoal/compose/config"
	"github.com/shoal-mqtt/shoal/compose/telemetry"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := "all"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "version":
		fmt.Fprintln(stdout, "shoal", version)
		return 0
	case "help":
		usage(stdout)
		return 0
	case "all":
		return runRoles(ctx, "shoal all", broker.RolesAll, args, stderr)
	case "gateway":
		return runRoles(ctx, "shoal gateway", broker.RoleGateway, args, stderr)
	case "router":
		return runRoles(ctx, "shoal router", broker.RoleRouter, args, stderr)
	case "session":
		return runRoles(ctx, "shoal session", broker.RoleSession, args, stderr)
	case "passwd":
		return runPasswd(args, os.Stdin, stdout, stderr)
	case "replay":
		return runReplay(ctx, args, stdout, stderr)
	case "trace":
		return runTrace(ctx, args, stdout, stderr)
	case "ctl":
		return runCtl(ctx, args, stdout, stderr)
	case "views":
		return runViews(ctx, args, stdout, stderr)
	}
	fmt.Fprintf(stderr, "shoal: unknown command %q\n", cmd)
	usage(stderr)
	return 2
}

func runRoles(ctx context.Context, name string, roles broker.Role, args []string, stderr io.Writer) int {
	cfg, err := config.Load(name, args, os.LookupEnv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "shoal:", err)
		return 2
	}
	log := newLogger(cfg, stderr)
	b := broker.NewRoles(cfg, roles, log, version)
	// SIGHUP reloads the files Shoal reloads (the password file); a file
	// that fails to parse is logged and the old one stays in force.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	defer func() { signal.Stop(hup); close(done) }()
	go func() {
		for {
			select {
			case <-hup:
				log.Info("SIGHUP: reloading")
				_ = b.Reload() // logged by the reload itself
			case <-done:
				return
			}
		}
	}()
	if err := b.Run(ctx); err != nil {
		log.Error("shoal stopped", "err", err)
		return 1
	}
	return 0
}

// newLogger is the process's logger: a line logged with the context of an
// active span carries its trace_id and span_id (telemetry.LogHandler).
func newLogger(cfg config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if cfg.LogFormat == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(telemetry.LogHandler(h))
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: shoal [command] [flags]

commands:
  all       every role in one process (default): on the embedded backbone, or
            on an external Kafka and CQL database (--kafka-brokers, --cql-hosts)
  gateway   the MQTT listeners (needs --kafka-brokers; --cql-hosts to lease
            its slot, or an explicit --gateway-slot)
  router    matching and fan-out (needs --kafka-brokers and --cql-hosts)
  session   sessions, takeover, wills, inboxes (needs --kafka-brokers and
            --cql-hosts)
  passwd    add or replace a user in a password file: shoal passwd FILE USER
  replay    read the event log back, filtered, as JSON lines or a table, or
            publish its messages again ("shoal replay -h")
  trace     follow one message through the log: shoal trace MESSAGE-ID
  ctl       inspect and manage a running deployment through its admin API:
            clients, sessions, subscriptions, retained messages, kick,
            delete ("shoal ctl help" lists its commands)
  views     shoal views rebuild [--verify] [--swap] [--quiet]: rebuild the
            router's and session service's views from the log, compare them
            with the live ones, make them live (on a stopped deployment)
  version   print the version
  help      this text

"shoal all -h" lists the flags; every flag is also a SHOAL_* environment
variable and a key of the YAML file given with --config.
`)
}
