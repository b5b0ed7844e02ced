// Package quota keeps the limits of each tenant that a gateway enforces
// (DESIGN.md §5: "quotas (connections, message rate, bytes) apply per
// tenant"): connections at once and new connections per second, inbound
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
// holds, which is exact with one gateway (`shoal all`). A backend shared
// by the gateways of a tenant's pool implements the same two small
// interfaces, [Counter] and [Limiter].
package quota
