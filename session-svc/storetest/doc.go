// Package storetest is the conformance suite of sessionsvc.Store: every
// adapter (Pebble in compose/store/pebblestore, the CQL adapter) runs Run
// from its own tests, so all of them keep the same contract.
package storetest
