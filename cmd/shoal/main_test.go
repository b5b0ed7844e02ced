package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/shoal-mqtt/shoal/compose/broker"
	"github.com/shoal-mqtt/shoal/compose/config"
)

// TestNewLoggerTraceIDs: the process logger, in either format, stamps a
// line logged with a span's context with its ids, and only that line.
func TestNewLoggerTraceIDs(t *testing.T) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x4b, 0xf9, 1}, SpanID: trace.SpanID{0x00, 0xf0, 2}, TraceFlags: trace.FlagsSampled,
	})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			cfg := config.Default()
			cfg.LogFormat = format
			var buf bytes.Buffer
			log := newLogger(cfg, &buf).With("role", "gateway").WithGroup("g")
			log.InfoContext(ctx, "with span", "a", 1)
			log.Info("without span", "a", 1)
			got := strings.Split(strings.TrimSpace(buf.String()), "\n")
			if len(got) != 2 {
				t.Fatalf("%d lines, want 2: %q", len(got), buf.String())
			}
			if format == "json" {
				var m map[string]any
				if err := json.Unmarshal([]byte(got[0]), &m); err != nil {
					t.Fatal(err)
				}
				if m["trace_id"] != sc.TraceID().String() || m["span_id"] != sc.SpanID().String() {
					t.Errorf("line %s: want trace_id %s and span_id %s at top level", got[0], sc.TraceID(), sc.SpanID())
				}
			} else if !strings.Contains(got[0], " trace_id="+sc.TraceID().String()+" span_id="+sc.SpanID().String()+" ") {
				t.Errorf("line %q: want trace_id=%s span_id=%s at top level", got[0], sc.TraceID(), sc.SpanID())
			}
			if strings.Contains(got[1], "trace_id") || strings.Contains(got[1], "span_id") {
				t.Errorf("line without a span has ids: %q", got[1])
			}
		})
	}
}

// runShoal runs the command line args and returns its exit code, stdout
// and stderr.
func runShoal(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(t.Context(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestHelpListsTheCommands: shoal's help is its commands, one line each,
// and how to get a command's flags; not the flags of shoal all.
func TestHelpListsTheCommands(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"-help"}, {"help"}} {
		code, out, errOut := runShoal(t, args...)
		if code != 0 || errOut != "" {
			t.Errorf("shoal %s: exit %d, stderr %q; want 0 and nothing", args[0], code, errOut)
		}
		for _, cmd := range []string{"all", "gateway", "router", "session", "passwd", "replay", "trace", "ctl", "views", "version", "help"} {
			if !strings.Contains(out, "\n  "+cmd+" ") {
				t.Errorf("shoal %s: command %s not listed:\n%s", args[0], cmd, out)
			}
		}
		if !strings.Contains(out, "shoal all -h") {
			t.Errorf("shoal %s: does not say how to list a command's flags:\n%s", args[0], out)
		}
		if strings.Contains(out, "mqtt-listen") || strings.Count(out, "\n") > 30 {
			t.Errorf("shoal %s: prints flags, or more than a screen:\n%s", args[0], out)
		}
	}
}

// TestCommandHelpListsItsFlags: shoal all -h, and shoal help all, print
// the flags of shoal all on stdout and exit 0.
func TestCommandHelpListsItsFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // the first line
	}{
		{[]string{"all", "-h"}, "usage: shoal all [flags]\n"},
		{[]string{"all", "--help"}, "usage: shoal all [flags]\n"},
		{[]string{"help", "all"}, "usage: shoal all [flags]\n"},
		{[]string{"gateway", "-h"}, "usage: shoal gateway [flags]\n"},
	} {
		code, out, errOut := runShoal(t, tc.args...)
		if code != 0 || errOut != "" {
			t.Errorf("shoal %q: exit %d, stderr %.200q; want 0 and nothing", tc.args, code, errOut)
		}
		if !strings.HasPrefix(out, tc.want) || !strings.Contains(out, "-mqtt-listen") || !strings.Contains(out, "SHOAL_MQTT_LISTEN") {
			t.Errorf("shoal %q: want %q and the flags on stdout:\n%.300s", tc.args, tc.want, out)
		}
	}
}

// TestNoCommandRunsAll: shoal without a command is shoal all (make run
// and the container image rely on it); a bad setting shows which one
// loaded it.
func TestNoCommandRunsAll(t *testing.T) {
	t.Setenv("SHOAL_LOG_LEVEL", "loud")
	for _, args := range [][]string{nil, {"--data-dir", t.TempDir()}} {
		code, out, errOut := runShoal(t, args...)
		if code != 2 || out != "" || !strings.HasPrefix(errOut, "shoal all: ") || !strings.Contains(errOut, "log_level") {
			t.Errorf("shoal %q with SHOAL_LOG_LEVEL=loud: exit %d, stdout %q, stderr %q; want 2 and shoal all naming log_level", args, code, out, errOut)
		}
	}
}

// TestBadCommandLineIsOneLine: an unknown flag, a flag without its value,
// a stray argument or an unknown command is one line naming it and the
// help to read, exit 2.
func TestBadCommandLineIsOneLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"all", "--foo"}, "shoal all: unknown flag --foo; see shoal all -h\n"},
		{[]string{"--foo"}, "shoal all: unknown flag --foo; see shoal all -h\n"},
		{[]string{"gateway", "-foo=1"}, "shoal gateway: unknown flag --foo; see shoal gateway -h\n"},
		{[]string{"router", "--mqtt-listen"}, "shoal router: flag needs an argument: --mqtt-listen; see shoal router -h\n"},
		{[]string{"session", "stray"}, "shoal session: unexpected argument \"stray\"; see shoal session -h\n"},
		{[]string{"views", "rebuild", "--foo"}, "shoal views rebuild: unknown flag --foo; see shoal views rebuild -h\n"},
		{[]string{"views", "rebiuld"}, "shoal views: unknown command \"rebiuld\"; see shoal views -h\n"},
		{[]string{"serve"}, "shoal: unknown command \"serve\"; see shoal -h\n"},
	} {
		code, out, errOut := runShoal(t, tc.args...)
		if code != 2 || out != "" || errOut != tc.want {
			t.Errorf("shoal %q: exit %d, stdout %q, stderr %q; want 2 and %q", tc.args, code, out, errOut, tc.want)
		}
	}
}

// TestViewsHelp: shoal views -h lists its commands, shoal views rebuild
// -h its own flags and where the deployment's are; both exit 0.
func TestViewsHelp(t *testing.T) {
	for _, args := range [][]string{{"views", "-h"}, {"views", "--help"}, {"views", "help"}} {
		code, out, errOut := runShoal(t, args...)
		if code != 0 || errOut != "" || !strings.Contains(out, "\n  rebuild ") || !strings.Contains(out, "shoal views rebuild -h") {
			t.Errorf("shoal %q: exit %d, stderr %q, stdout:\n%s\nwant 0 and the commands", args, code, errOut, out)
		}
	}
	code, _, errOut := runShoal(t, "views")
	if code != 2 || !strings.Contains(errOut, "rebuild") {
		t.Errorf("shoal views: exit %d, stderr %q; want 2 and the commands", code, errOut)
	}
	for _, args := range [][]string{{"views", "rebuild", "-h"}, {"views", "rebuild", "--verify", "--help"}} {
		code, out, errOut := runShoal(t, args...)
		if code != 0 || errOut != "" {
			t.Errorf("shoal %q: exit %d, stderr %q; want 0 and nothing", args, code, errOut)
		}
		for _, own := range []string{"--verify", "--swap", "--quiet"} {
			if i := strings.Index(out, own); i < 0 || i > 1500 {
				t.Errorf("shoal %q: %s not among the first lines:\n%s", args, own, out)
			}
		}
		if strings.Contains(out, "-mqtt-listen") || !strings.Contains(out, "shoal all -h") {
			t.Errorf("shoal %q: lists the broker's flags, or does not point to them:\n%s", args, out)
		}
	}
}

// TestWarnsOfExposedListeners: a process whose metrics or admin API
// listen beyond loopback says so at start, as a warning naming the key and
// the address, the way the broker warns of MQTT listeners without
// authentication; on loopback (the defaults) it says nothing.
func TestWarnsOfExposedListeners(t *testing.T) {
	for _, tc := range []struct {
		name  string
		roles broker.Role
		set   func(*config.Config)
		want  []string
	}{
		{"defaults", broker.RolesAll, func(*config.Config) {}, nil},
		{"shoal all beyond loopback", broker.RolesAll, func(c *config.Config) { c.HTTPListen, c.Admin.Listen = ":9090", "0.0.0.0:9091" },
			[]string{"level=WARN msg=\"no authentication on http_listen: /metrics, /healthz and /readyz are served to anyone on a listener beyond loopback\" listener=http_listen addr=:9090",
				"level=WARN msg=\"admin API on a listener beyond loopback: its bearer token crosses the network unencrypted\" listener=admin.listen addr=0.0.0.0:9091"}},
		{"a gateway without an admin token", broker.RoleGateway, func(c *config.Config) { c.Admin.Listen = ":9091" }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			tc.set(&cfg)
			var buf bytes.Buffer
			warnExposed(newLogger(cfg, &buf), cfg, tc.roles)
			got := strings.Split(strings.TrimSpace(buf.String()), "\n")
			if len(tc.want) == 0 && buf.Len() > 0 {
				t.Fatalf("logged %q, want nothing", buf.String())
			}
			if len(tc.want) > 0 && len(got) != len(tc.want) {
				t.Fatalf("logged %q, want %d warnings", buf.String(), len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("line %q, want %q", got[i], w)
				}
			}
		})
	}
}

// TestMakeRunTakesArgs: make run passes ARGS to shoal all (README.md,
// "The two commands").
func TestMakeRunTakesArgs(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make not found (%v): the README's commands need it", err)
	}
	out, err := exec.Command("make", "-n", "-C", filepath.Join("..", ".."), "run", "ARGS=--log-level debug --data-dir /tmp/x").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n run: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "./bin/shoal all --log-level debug --data-dir /tmp/x\n") {
		t.Errorf("make -n run ARGS=…:\n%s\nwant ./bin/shoal all with the arguments", out)
	}
}
