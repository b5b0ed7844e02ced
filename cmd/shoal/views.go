package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/shoal-mqtt/shoal/compose/config"
	"github.com/shoal-mqtt/shoal/compose/views"
)

// runViews runs `shoal views rebuild [--verify] [--swap] [--quiet]
// [deployment flags]`: the deployment flags are those of `shoal all`
// (data_dir, kafka.*, cql.*, the router's and session service's
// sections), also from SHOAL_* variables and --config.
func runViews(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		fmt.Fprint(stderr, viewsUsage)
		return 2
	case isHelp(args[0]) || args[0] == "help":
		fmt.Fprint(stdout, viewsUsage)
		return 0
	case args[0] != "rebuild":
		fmt.Fprintf(stderr, "shoal views: unknown command %q; see shoal views -h\n", args[0])
		return 2
	}
	const name = "shoal views rebuild"
	args = args[1:]
	var verify, swap, quiet bool
	own := map[string]*bool{"verify": &verify, "swap": &swap, "quiet": &quiet}
	rest := args[:0:0]
	for _, a := range args {
		flagName, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if p, ok := own[flagName]; ok && strings.HasPrefix(a, "-") {
			*p = !hasVal || val == "true"
			continue
		}
		rest = append(rest, a)
	}
	// The tool logs errors only unless told otherwise: its output is the
	// report, not the stores' and clients' chatter.
	lookupEnv := func(k string) (string, bool) {
		v, ok := os.LookupEnv(k)
		if !ok && k == "SHOAL_LOG_LEVEL" {
			return "error", true
		}
		return v, ok
	}
	// Its help is its own flags; the deployment's are shoal all's.
	cfg, err := config.Load(name, rest, lookupEnv, io.Discard)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, rebuildUsage)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %s\n", name, strings.ReplaceAll(err.Error(), "\n", "; "))
		return 2
	}
	var bar io.Writer
	if f, ok := stderr.(*os.File); ok && !quiet && term.IsTerminal(int(f.Fd())) {
		bar = stderr
	}
	res, err := views.Run(ctx, views.Options{
		Config: cfg, Verify: verify, Swap: swap, Out: stdout, Progress: bar, Log: newLogger(cfg, stderr),
	})
	switch {
	case errors.Is(err, views.ErrDifferences):
		fmt.Fprintf(stderr, "shoal views: %d differences\n", res.Differences)
		return 1
	case err != nil:
		// One line: joined errors are put on it side by side.
		fmt.Fprintln(stderr, "shoal views:", strings.ReplaceAll(err.Error(), "\n", "; "))
		return 1
	}
	return 0
}

const viewsUsage = `usage: shoal views COMMAND [flags]

commands:
  rebuild   rebuild the router's and session service's views from the log,
            compare them with the live ones (--verify), make them live (--swap)

"shoal views rebuild -h" lists its flags.
`

const rebuildUsage = `usage: shoal views rebuild [--verify] [--swap] [--quiet] [deployment flags]

Replays the log into fresh views with the router's and the session
service's own code, writing nothing to Kafka (docs/views.md).

flags:
  --verify   compare the live views with the rebuilt ones key by key; exit 1
             on any difference (the deployment must be stopped)
  --swap     make the rebuilt views live (the deployment must be stopped)
  --quiet    no progress bar

The deployment flags say where its log and views are: --config, --data-dir,
--kafka-*, --cql-* and the others of shoal all, also as SHOAL_* variables
("shoal all -h" lists them).
`
