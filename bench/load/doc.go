// Package load is Shoal's MQTT load generator: a minimal client built on
// Shoal's own codec (internal/mqtt/packet), the scenarios it drives (pairs,
// fan-out, idle connections and their subscriptions, wildcards, fixed-rate
// latency, a backlog queued for offline persistent sessions), the
// measurements it takes (HDR latency histograms from timestamps carried in
// the payload, per-subscriber sequence tracking, the broker's CPU and RSS
// read from /proc) and the aggregation the comparison report uses
// (median, min–max, ratio).
//
// # Cost per message
//
// On a 2-core machine the generator competes with the broker for CPU, so
// the client keeps its own cost low: one reader goroutine per connection
// decoding in place into a reused packet, buffered writes flushed when a
// writer goes idle or its buffer fills (acknowledgements are flushed when
// the read buffer is empty, so a burst of deliveries costs one write), no
// allocation per message in steady state, and latencies recorded into a
// few mutex-guarded HDR histogram shards.
//
// # Payload
//
// Every payload starts with a 16-byte stamp (see [PutStamp]): the send time
// in nanoseconds since the run's start, the publisher's index and its
// sequence number. Latency is receive time minus send time (one process,
// one monotonic clock); at a fixed rate the send time is the scheduled time,
// so a stalled broker shows up as latency rather than as fewer samples
// (no coordinated omission). A subscriber tracks each publisher's sequence
// (see [Tracker]) to count losses, duplicates and reordering.
//
// # Bounded runs
//
// [Run] puts a deadline on everything: set-up, warm-up, the measured
// window and a drain. When it passes every connection is closed, which
// unblocks every reader and writer, so a run ends even if the broker stops
// answering.
package load
