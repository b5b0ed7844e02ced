// Command otlp-sink is an OTLP/gRPC collector that counts what it is sent
// and throws it away: the far end of `shoal all` with tracing on in the
// benchmarks (scripts/bench-tracing.sh), so that the cost measured is
// Shoal's (spans made, batched, serialised, sent), not a collector's.
package main
