// Package testutil groups helpers that only Shoal's tests import
// (testlog: a logger that writes to t.Log until the test ends).
package testutil
