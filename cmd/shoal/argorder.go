package main

import (
	"flag"
	"strings"
)

// interspersed splits a command line into the flags of fs, each with its
// value, and the positional arguments, wherever they stand: the flag
// package stops at the first argument that is not a flag, which would
// leave the flags after "shoal trace ID" unparsed. A flag that takes a
// value takes the next argument unless it is written --name=value; "--"
// ends the flags, and what follows it is positional. An unknown flag stays
// with the flags, for fs.Parse to report.
func interspersed(fs *flag.FlagSet, args []string) (flags, positional []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return flags, append(positional, args[i+1:]...)
		case len(a) < 2 || a[0] != '-':
			positional = append(positional, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimPrefix(a[1:], "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil && !isBoolFlag(f) && i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	return flags, positional
}

// isBoolFlag reports whether f is a flag that takes no value (-quiet, not
// -quiet true).
func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
