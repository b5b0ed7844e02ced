// Package testutil groups helpers that only Shoal's tests import
// (testlog: a logger that writes to t.Log until the test ends; qos2resend:
// the QoS 2 resend scenario shared by the unit and cluster tests; testpki:
// certificate authorities and certificates made in memory for TLS tests;
// testfile: replacing a watched file and waiting for its reload;
// testmetrics: the SDK's meter provider read by name and attributes;
// pahoconn: a connection a Paho client writes each packet through whole).
// Real servers as local processes live in internal/localserver, which the
// distributed benchmark imports too.
package testutil
