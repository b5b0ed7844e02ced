// Package console is Shoal's web console, served at / of the admin
// listener (admin.listen) beside the admin API (/v1/), which it reads and
// changes through: one console for shoal all and for a distributed
// deployment, whose other processes' admin APIs it asks too
// (admin.console_servers).
//
//   - console.go: the handler, its routes and security headers (a strict
//     Content-Security-Policy: the console's own script and style sheet,
//     nothing inline), the login and logout.
//   - auth.go: sessions in memory, the cookie (HttpOnly, SameSite=Strict,
//     Secure over TLS) and each session's CSRF token, which every change
//     (POST) must send back.
//   - tokens.go: the tenants' console tokens file (TENANT:sha256:HEX), a
//     login with one of which sees and changes its tenant alone.
//   - pages.go: clients, sessions, subscriptions, retained messages and
//     bridges, paged on the server (the admin API's keyset pages), and the
//     changes (kick, delete a session, delete a retained message).
//   - overview.go: connections and messages per second per tenant, with
//     a live chart (SVG drawn on the server, refreshed in place), the
//     roles' health and the consumer lag.
//   - logpages.go: a message's trace as a timeline (shoal trace) and the
//     log's query (shoal replay), paged, with a JSON-lines download.
//   - broker.go: UI, the console as broker.WithAdminUI takes it.
//   - assets/: the templates (html/template: every value from a client —
//     client ids, topics, payloads — is escaped where it lands) and the
//     one script and style sheet, written here: no Node.js, nothing to
//     build.
//
// docs/console.md has the pages, the tokens, the security decisions and
// the measurements.
package console
