package main

import (
	"fmt"
	"io"
	"os"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cmd := "all"
	if len(args) > 0 {
		cmd = args[0]
	}
	switch cmd {
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "shoal", version)
		return 0
	case "help", "--help", "-h":
		usage(stdout)
		return 0
	case "all", "gateway", "router", "session", "replay", "ctl":
		fmt.Fprintf(stderr, "shoal: the %q role is not in this build yet; this build has the MQTT codec and topic trie only\n", cmd)
		return 2
	}
	fmt.Fprintf(stderr, "shoal: unknown command %q\n", cmd)
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: shoal [command]

commands:
  all       every role in one process on the embedded backbone (default)
  gateway   MQTT listeners
  router    subscription and retained indexes, matching, fan-out
  session   session ownership, takeover, expiry, wills, inbox
  version   print the version
`)
}
