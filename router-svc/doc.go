// Package routersvc (folder router-svc) is Shoal's router service: it
// consumes message and subscription events, keeps the subscription and
// retained-message indexes (an in-memory trie per shard, rebuilt from the
// view store at start), matches each published message and plans its
// delivery as one record per target gateway.
//
// It meets the gateway and session services only through the log and
// declares the narrow view-store interface it needs in its own package.
package routersvc
