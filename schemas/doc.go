// Package schemas holds Shoal's wire and storage schemas: the Protocol
// Buffers definitions of the events on the log and of the session rows in
// the views (with their generated Go), and the CQL migrations of the view
// tables, embedded with go:embed and applied at start.
//
// `make proto-check` runs buf lint, checks that the generated Go is up to
// date, and runs buf breaking against the commit named in BASELINE: every
// schema must still read what that commit wrote (fields are added, never
// renumbered or retyped). Move BASELINE forward only to a commit whose
// data must stay readable, such as a release.
package schemas
