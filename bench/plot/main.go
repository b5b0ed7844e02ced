package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "directory of JSON results")
	outDir := fs.String("out", "", "where to write the PNGs (default: -dir)")
	a := fs.String("a", "shoal", "first label")
	b := fs.String("b", "mosquitto", "second label")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dir == "" {
		fmt.Fprintln(stderr, "plot: -dir is required")
		return 2
	}
	if *outDir == "" {
		*outDir = *dir
	}
	results, err := loadResults(*dir)
	if err != nil {
		fmt.Fprintln(stderr, "plot:", err)
		return 1
	}
	files, err := drawAll(results, []string{*a, *b}, *outDir)
	for _, f := range files {
		fmt.Fprintln(stdout, f)
	}
	if err != nil {
		fmt.Fprintln(stderr, "plot:", err)
		return 1
	}
	return 0
}
