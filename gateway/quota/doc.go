// Package quota keeps the limits of each tenant that a gateway enforces
// (docs/design.md, "Tenancy and HAProxy": quotas of connections, message
// rate and bytes apply per tenant): connections at once and new connections per second, inbound
// PUBLISH packets and bytes per second, subscriptions per client.
//
// A tenant's limits ([Limits]) come from the configuration's `tenants`
// section ([Config]: a default for every tenant, and entries of their
// own). [Quotas] makes each tenant's state ([Tenant]) at its first use:
// its connection count and its token buckets, shared by all its
// connections on this gateway, and the counters the metrics export.
//
// Rates are token buckets ([Bucket]): a rate of r units per second that
// holds at most a burst of units, kept as the theoretical arrival time of
// the generic cell rate algorithm (GCRA) in one atomic word, so that the
// connections of a tenant charge it concurrently without a lock and
// without allocating. Connections take from their bucket only what it
// holds ([Limiter].Take: a refused connection costs nothing); publishes
// may run it into debt ([Limiter].Reserve: the message is never refused,
// its reader waits until the debt is paid), so a PUBLISH larger than the
// burst still goes through, at the rate.
//
// Counts and rates are kept by a [Backend]. [Local], the default, keeps
// them in the process: each gateway enforces the limits for the clients it
// holds, which is exact with one gateway (`shoal all`). [Shared] is the
// backend of a gateway among several (distributed mode): each gateway
// still counts and rates its own clients, and learns from the others'
// reports (what each holds of each tenant, every interval) how many
// connections the tenant has in all and what share of each rate is its
// own; the gateway carries the reports over a compacted Kafka topic
// (gateway/quotashare.go), this package only computes. The limits then
// hold for the tenant as a whole, within the slack described in
// shared.go. A Bucket's rate can change while it is used
// ([Bucket.SetRate]), which is how a share moves.
package quota
