// Package brokertest starts `shoal all` inside a test: on loopback ports,
// in a temporary data directory, stopped (and checked to stop cleanly)
// when the test ends. The broker's own end-to-end tests and the load
// generator's tests share it.
package brokertest
