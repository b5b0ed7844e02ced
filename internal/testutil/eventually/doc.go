// Package eventually is the tests' one way to wait for what happens on
// other goroutines or in other processes: poll a condition, backing off
// from a millisecond to 50 ms, until it holds or a bound passes, then
// fail the test saying what did not happen. Waits on time itself belong
// to an injected clock or testing/synctest instead.
package eventually
