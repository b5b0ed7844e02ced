// Package pahoconn makes a connection safe for an Eclipse Paho (paho.golang)
// client to write through from several goroutines: see Locked.
package pahoconn
