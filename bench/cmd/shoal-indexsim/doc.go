// Command shoal-indexsim simulates the router's subscription index at many
// filters in one process, with the real shards (router-svc's Shard) and
// nothing else: no Kafka, no CQL, no gateways. Filling a real router over
// MQTT takes about half an hour at 10M filters, when this takes minutes;
// shoal-distbench's index ceiling (-unit-index, bench/router-index.json)
// measures the router process itself at 1M.
//
// The filters have the shapes of that ceiling's (bench/load's connections
// scenario: client "bench-ixc-c-{i}", filter "bench-ixc/sub/{i}/{j}", and
// "bench-ixw/sub/{i}/{j}/+" for the wildcard ones, of 1000 clients each).
// A concrete filter goes to the shard of its partition, computed as the
// gateway computes it (kafka.PartitionForKey of the record key
// kafka.Key(tenant, filter)); a wildcard filter goes to every shard, as
// the gateway writes its SubscriptionChange to every partition.
//
// The phases, each timed in wall and process CPU time around the shard
// calls alone and in whole, with the live heap after a collection:
//
//   - match-empty-*: publishes through Shard.Apply on empty shards;
//   - load-concrete, load-wildcard: the filters as a restarted router
//     reads them from the store (Shard.LoadSubscription), the CPU part of
//     a rebuild;
//   - match-full-*: publishes to topics that match one concrete filter
//     each, and to topics outside the index, on the loaded index;
//   - apply-concrete, apply-wildcard: the filters again as
//     SubscriptionChange ADDs through Shard.Apply on fresh shards, the
//     live path, once the loaded index is dropped.
//
// It writes the figures as JSON (-out) and a README with their tables
// (-readme), beside earlier runs (-beside) and the process's figures
// (-process bench/router-index.json). docs/capacity.md has them.
package main
