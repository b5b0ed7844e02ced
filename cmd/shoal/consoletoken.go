package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/shoal-mqtt/shoal/compose/console"
)

// runConsoleToken is "shoal console-token [--revoke] FILE TENANT": it makes
// a tenant's console token and adds its hash to the tokens file FILE
// (admin.console_tokens_file), printing the token once; --revoke takes
// every token of TENANT out instead.
func runConsoleToken(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("shoal console-token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	revoke := fs.Bool("revoke", false, "take every token of TENANT out of FILE")
	fs.Usage = func() {
		_, _ = io.WriteString(stderr, `usage: shoal console-token [--revoke] FILE TENANT

Makes a web console token for TENANT ('' is the default tenant) and adds its
SHA-256 to FILE (admin.console_tokens_file; created mode 0600 when missing,
every other line kept). The token is printed once, on stdout: a login with
it sees and changes TENANT alone. The running console reads FILE again
within seconds. --revoke takes every token of TENANT out of FILE; their
logins end at their next request.

flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(interspersedBools(args, "--revoke", "-revoke")); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 2 {
		fs.Usage()
		return 2
	}
	file, tenant := fs.Arg(0), fs.Arg(1)
	if *revoke {
		n, err := console.RevokeTokens(file, tenant)
		if err != nil {
			fmt.Fprintln(stderr, "shoal console-token:", err)
			return 1
		}
		fmt.Fprintf(stderr, "shoal console-token: %d token(s) of tenant %q taken out of %s\n", n, tenant, file)
		return 0
	}
	token, err := console.AddToken(file, tenant)
	if err != nil {
		fmt.Fprintln(stderr, "shoal console-token:", err)
		return 1
	}
	fmt.Fprintln(stdout, token)
	fmt.Fprintf(stderr, "shoal console-token: a token of tenant %q added to %s; it is shown this once\n", tenant, file)
	return 0
}

// interspersedBools moves the boolean flags named to the front, so that
// they may follow the positional arguments.
func interspersedBools(args []string, names ...string) []string {
	var flags, rest []string
	for _, a := range args {
		isFlag := false
		for _, n := range names {
			isFlag = isFlag || a == n
		}
		if isFlag {
			flags = append(flags, a)
		} else {
			rest = append(rest, a)
		}
	}
	return append(flags, rest...)
}
