// Package compose is the layer that composes Shoal's roles, between cmd/
// and the roles: broker (runs a set of roles as actors of a run group over
// the embedded or an external backbone, with the HTTP endpoints), config
// (the typed configuration of every role), and store (the view-store
// adapters, cqlstore and pebblestore, that implement the narrow store
// interfaces the router and the session service declare).
//
// Imports point down only: cmd → compose → roles (gateway, router-svc,
// session-svc) → kafka/ → internal/ and schemas/. No role imports
// anything here; a role's tests may run it on pebblestore.
package compose
