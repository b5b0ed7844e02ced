// Package bench holds Shoal's load generator and benchmark results; see
// bench/README.md for the method, the commands that reproduce each figure,
// and the tables.
package bench
