// Package admin is the operators' side of Shoal: the admin HTTP API each
// role serves on its own listener (admin.listen, never an MQTT listener),
// and `shoal ctl`, the command-line client that talks to it.
//
//   - token.go: the bearer token, from admin.token_file or, for `shoal
//     all` without one, made at first start in data_dir/admin.token
//     (mode 0600); compared in constant time and never logged.
//   - api.go: the JSON types of the API (stable snake_case field names),
//     shared by the server and the client.
//   - server.go: the handler; a role is mounted through the narrow
//     interface it offers (Gateway, SessionService, Router), so the handler
//     serves what the process runs and says so at /v1/roles.
//   - client.go: asks every server given (a distributed deployment's
//     roles; a dns+ server is every address its name resolves to), merges
//     what they answer, and turns failures into one line.
//   - page.go: the listings' keyset pages (search=, after_tenant=,
//     after_client=, limit=), cut and merged in one order.
//   - local.go: LocalTransport, which serves a process's own API in
//     process for its web console (compose/console).
//   - ctl.go: the command line (subcommands, flags, table and JSON
//     output, bash and zsh completion).
//
// Mutations go through the log: a kick and a session's deletion are
// SessionCommand events the session service applies in the client's
// partition; a retained message is deleted by an empty, expired retained
// Publish on shoal.messages. docs/ctl.md has the endpoints and the
// decisions.
package admin
