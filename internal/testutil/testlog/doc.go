// Package testlog gives tests a *slog.Logger that writes to t.Log until the
// test ends: goroutines of clients and servers (franz-go's, the broker's)
// may log after that, and those lines are dropped instead of panicking.
// Buffer collects what a logger or a child process writes for a test to
// read while the writers go on; Records keeps a logger's records, for
// tests that assert on their attributes. Only tests import it.
package testlog
