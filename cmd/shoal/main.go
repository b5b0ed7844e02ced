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
	"github.com/shoal-mqtt/shoal/compose/console"
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
	switch {
	case len(args) > 0 && isHelp(args[0]):
		usage(stdout)
		return 0
	case len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-':
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "version":
		fmt.Fprintln(stdout, "shoal", version)
		return 0
	case "help":
		if len(args) == 0 {
			usage(stdout)
			return 0
		}
		// shoal help COMMAND is shoal COMMAND -h.
		return run(ctx, []string{args[0], "-h"}, stdout, stderr)
	case "all":
		return runRoles(ctx, "shoal all", broker.RolesAll, args, stdout, stderr)
	case "gateway":
		return runRoles(ctx, "shoal gateway", broker.RoleGateway, args, stdout, stderr)
	case "router":
		return runRoles(ctx, "shoal router", broker.RoleRouter, args, stdout, stderr)
	case "session":
		return runRoles(ctx, "shoal session", broker.RoleSession, args, stdout, stderr)
	case "bridge":
		return runRoles(ctx, "shoal bridge", broker.RoleBridge, args, stdout, stderr)
	case "passwd":
		return runPasswd(args, os.Stdin, stdout, stderr)
	case "console-token":
		return runConsoleToken(args, stdout, stderr)
	case "replay":
		return runReplay(ctx, args, stdout, stderr)
	case "trace":
		return runTrace(ctx, args, stdout, stderr)
	case "ctl":
		return runCtl(ctx, args, stdout, stderr)
	case "views":
		return runViews(ctx, args, stdout, stderr)
	}
	fmt.Fprintf(stderr, "shoal: unknown command %q; see shoal -h\n", cmd)
	return 2
}

// isHelp reports whether arg asks for help the way the flag package
// takes it.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "--h", "-help", "--help":
		return true
	}
	return false
}

func runRoles(ctx context.Context, name string, roles broker.Role, args []string, stdout, stderr io.Writer) int {
	cfg, err := config.Load(name, args, os.LookupEnv, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	log := newLogger(cfg, stderr)
	warnExposed(log, cfg, roles)
	b := broker.NewRoles(cfg, roles, log, version, broker.WithAdminUI(console.UI))
	// SIGHUP reloads the files Shoal reloads (the password file) and the
	// Kafka bridge's mappings, read again from the configuration; a file
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
				if roles&broker.RoleBridge != 0 {
					reloadBridges(b, log, name, args)
				}
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

// reloadBridges reads the configuration again, as it was read at start
// (the same flags, the environment as it is now), and reloads the
// bridge's mappings from it. A configuration that does not load keeps
// the mappings in force.
func reloadBridges(b *broker.Broker, log *slog.Logger, name string, args []string) {
	cfg, err := config.Load(name, args, os.LookupEnv, io.Discard)
	if err != nil {
		log.Error("SIGHUP: configuration not read again; the bridge's mappings in force stay", "err", err)
		return
	}
	_ = b.ReloadBridges(cfg.Bridges.Kafka) // logged by the reload itself
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

// warnExposed warns, at start, of each operators' listener reachable
// from beyond this machine, as the broker does of MQTT listeners without
// authentication.
func warnExposed(log *slog.Logger, cfg config.Config, roles broker.Role) {
	for _, e := range cfg.Exposed(roles == broker.RolesAll) {
		log.Warn(e.Warning, "listener", e.Key, "addr", e.Addr)
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: shoal [command] [flags]

Shoal is an MQTT broker on Kafka. Without a command it runs shoal all.

commands:
  all       every role in one process, on the embedded backbone or on Kafka
  gateway   the MQTT listeners of a distributed deployment
  router    matching and fan-out of a distributed deployment
  session   sessions, takeover, wills and inboxes of a distributed deployment
  bridge    the Kafka data bridge of a distributed deployment (bridges.kafka)
  passwd    add or replace a user in a password file
  console-token  make (or --revoke) a tenant's web console token
  replay    read the event log back, or publish its messages again
  trace     follow one message through the log
  ctl       inspect and manage a running deployment through its admin API
  views     rebuild the views from the log, compare them with the live ones
  version   print the version
  help      this text; shoal help COMMAND is shoal COMMAND -h

"shoal COMMAND -h" lists a command's flags: "shoal all -h" those of the
broker, each also a SHOAL_* environment variable and a key of the YAML file
given with --config (README.md, "Configuration").
`)
}
