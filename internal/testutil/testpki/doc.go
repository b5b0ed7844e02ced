// Package testpki makes certificate authorities and the server and client
// certificates they issue, in memory, for tests of TLS and mutual TLS:
// nothing to commit, nothing that expires between runs. Only tests import
// it.
package testpki
