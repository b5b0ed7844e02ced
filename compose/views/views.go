package views

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/shoal-mqtt/shoal/compose/config"
)

// Options say what Run does.
type Options struct {
	// Config describes the deployment: data_dir or kafka.* and cql.*, and
	// the router's and session service's sections (their limits apply
	// to the rebuild as to the services).
	Config config.Config
	// Verify compares the live views with the rebuilt ones.
	Verify bool
	// Swap makes the rebuilt views live; the deployment must be stopped.
	Swap bool
	// Out receives the differences, one per line, and the summary.
	Out io.Writer
	// Progress, when set, shows a progress bar (a terminal).
	Progress io.Writer
	// Log receives the stores' and clients' logs.
	Log *slog.Logger
	// Now is the clock naming the rebuild and judging retained messages'
	// expiry in the comparison; nil means time.Now.
	Now func() time.Time
}

// Result is what Run did.
type Result struct {
	// Target is where the rebuilt views are: a directory or a keyspace.
	Target string
	// Records is how many records of the log were applied.
	Records int64
	// Took is how long the rebuild took (without verify and swap).
	Took time.Duration
	// Differences counts what --verify found.
	Differences int
	// Replaced is where --swap put the views it replaced.
	Replaced string
}

// ErrDifferences is returned by Run when --verify found differences.
var ErrDifferences = errors.New("the live and rebuilt views differ")

// Run rebuilds the views, then verifies and swaps them as o says. It
// returns ErrDifferences (after any swap) when the views differ.
func Run(ctx context.Context, o Options) (Result, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	d, err := open(ctx, o)
	if err != nil {
		return Result{}, err
	}
	defer d.close()
	res := Result{Target: d.targetName}

	bounds, err := d.bounds(ctx)
	if err != nil {
		return res, err
	}
	began := time.Now()
	res.Records, err = d.rebuild(ctx, bounds)
	res.Took = time.Since(began)
	if err != nil {
		return res, fmt.Errorf("rebuild into %s: %w", d.targetName, err)
	}
	rate := float64(res.Records) / max(res.Took.Seconds(), 1e-6)
	fmt.Fprintf(o.Out, "rebuilt %d records of %s and %s into %s in %s (%.0f records/s)\n",
		res.Records, d.cat.Messages.Name, d.cat.Sessions.Name, d.targetName, res.Took.Round(time.Millisecond), rate)
	for _, w := range bounds.warnings {
		fmt.Fprintln(o.Out, "warning:", w)
	}

	if o.Verify {
		n, err := verify(ctx, d, o.Out, o.Now())
		if err != nil {
			return res, fmt.Errorf("verify: %w", err)
		}
		res.Differences = n
	}
	if o.Swap {
		replaced, err := d.swap(ctx)
		if err != nil {
			return res, fmt.Errorf("swap: %w", err)
		}
		res.Replaced = replaced
		fmt.Fprintf(o.Out, "swapped: %s is live; the views it replaced are in %s\n", d.liveName, replaced)
	}
	if res.Differences > 0 {
		return res, ErrDifferences
	}
	return res, nil
}
