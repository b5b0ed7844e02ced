// Package views rebuilds the router's and the session service's views
// from the log (`shoal views rebuild`), compares them with the live ones
// (--verify) and puts the rebuilt ones in their place on a stopped
// deployment (--swap).
//
// A rebuild runs the services' own state machines (routersvc.Rebuild:
// the router's shards; sessionsvc.Rebuild: the session service's
// partitions) over shoal.messages and shoal.sessions from the oldest
// record still in the log up to a bound per partition, writing into a
// fresh store through the services' store ports, with every output they
// make dropped: a rebuild never writes to Kafka. The bound is the end of
// the log when the rebuild starts; with --verify it is the live view's own
// offset, so that both views reflect the same records.
//
// Sources and targets (the deployment is described by compose/config):
//
//   - `shoal all` on the embedded backbone (data_dir): the log is opened
//     with kafka.StartEmbedded when no process holds the directory, and
//     attached through its Unix socket (kafka.AttachEmbedded) while
//     `shoal all` runs; the rebuilt views go to a new Pebble directory,
//     data_dir/views-rebuild-<UTC time>, next to the live data_dir/views.
//     --verify and --swap need the live view, which a running `shoal all`
//     holds: they refuse to run then.
//   - a distributed deployment (kafka.brokers, cql.hosts, cql.keyspace):
//     the rebuilt views go to the keyspace <keyspace>_rebuild, created
//     with the same migrations and emptied first; --swap copies the live
//     views to <keyspace>_replaced, empties the live ones and copies the
//     rebuilt rows in.
//
// --verify loads both views whole through the ports (LoadShard,
// LoadSessions, every partition) and compares them key by key; what it
// ignores, and why, is in compare.go and docs/views.md ("--verify").
package views
