// Package storetest is the conformance suite of the router's view store,
// [routersvc.Store]: every adapter (Pebble for the embedded backbone, CQL
// for ScyllaDB and Cassandra) runs [Run] in its tests, so they all keep the
// same contract. It also holds [Memory], an in-memory store for tests whose
// subject is something else. Only tests import it.
package storetest
