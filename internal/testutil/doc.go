// Package testutil groups helpers that only Shoal's tests import
// (testlog: a logger that writes to t.Log until the test ends; realkafka
// and realcql: real servers as local processes, on serverproc).
package testutil
