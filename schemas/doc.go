// Package schemas holds Shoal's wire and storage schemas: the Protocol
// Buffers definitions of the events on the log and of the session rows in
// the views (with their generated Go), and the CQL migrations of the view
// tables, embedded with go:embed and applied at start.
package schemas
