package main

import (
	"flag"
	"slices"
	"testing"
)

func TestInterspersed(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.String("format", "", "")
	fs.Bool("quiet", false, "")
	for _, tc := range []struct {
		args, flags, positional []string
	}{
		{[]string{"ID", "--format", "json"}, []string{"--format", "json"}, []string{"ID"}},
		{[]string{"--format", "json", "ID"}, []string{"--format", "json"}, []string{"ID"}},
		{[]string{"-format=json", "ID", "--quiet"}, []string{"-format=json", "--quiet"}, []string{"ID"}},
		// A bool flag takes no value: what follows is positional.
		{[]string{"--quiet", "ID"}, []string{"--quiet"}, []string{"ID"}},
		// After "--" everything is positional, flags too; "-" is an argument.
		{[]string{"--quiet", "--", "--format", "-"}, []string{"--quiet"}, []string{"--format", "-"}},
		{[]string{"-", "a", "--format"}, []string{"--format"}, []string{"-", "a"}},
		// An unknown flag is left to Parse, which reports it.
		{[]string{"--nope", "ID"}, []string{"--nope"}, []string{"ID"}},
	} {
		flags, positional := interspersed(fs, tc.args)
		if !slices.Equal(flags, tc.flags) || !slices.Equal(positional, tc.positional) {
			t.Errorf("%q: flags %q, positional %q; want %q, %q", tc.args, flags, positional, tc.flags, tc.positional)
		}
	}
}
