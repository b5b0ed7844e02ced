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
	if len(args) == 0 || args[0] != "rebuild" {
		fmt.Fprintln(stderr, "shoal views: usage: shoal views rebuild [--verify] [--swap] [--quiet] [flags of shoal all]")
		return 2
	}
	args = args[1:]
	var verify, swap, quiet bool
	own := map[string]*bool{"verify": &verify, "swap": &swap, "quiet": &quiet}
	rest := args[:0:0]
	for _, a := range args {
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if p, ok := own[name]; ok && strings.HasPrefix(a, "-") {
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
	cfg, err := config.Load("shoal views rebuild", rest, lookupEnv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(stderr, "  -verify\n    \tcompare the live views with the rebuilt ones key by key; exit 1 on any difference\n"+
			"  -swap\n    \tmake the rebuilt views live (the deployment must be stopped)\n"+
			"  -quiet\n    \tno progress bar")
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "shoal views:", err)
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
