// Package cqlschema holds the CQL schema of Shoal's views (ScyllaDB or
// Apache Cassandra), embedded in the binary: bootstrap.cql, the tables
// that record applied migrations, and the numbered migrations
// NNNN_name.cql. compose/store/cqlstore applies them at start;
// docs/cql.md describes the tables.
//
// Rules for the files:
//   - Every statement is idempotent (CREATE … IF NOT EXISTS, ALTER … IF
//     [NOT] EXISTS): a process that dies halfway through a migration
//     leaves it unrecorded, and the next one runs it again.
//   - Only CQL that Apache Cassandra 5 and ScyllaDB both accept: no
//     tablets options, no SAI indexes, no vector types, no Scylla-only
//     table options.
//   - The keyspace is written as the placeholder ${keyspace} before every
//     table name; the store substitutes the configured keyspace
//     ([Render]), so statements never depend on a session's current
//     keyspace.
//   - A migration that was applied is never edited (its checksum is
//     recorded and checked at start): changes are new migrations.
//
// The statements of a file end with ';'. Comments (-- or // to the end of
// the line, /* … */) are dropped; quoted strings ('…', "…", $$…$$) are
// kept as they are.
package cqlschema
