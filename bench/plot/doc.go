// Command plot draws the load generator's JSON results (bench/load.Result)
// as PNG charts for the benchmark report: for every scenario of a
// comparison, the latency CDF and the deliveries per second over time of
// each broker on one chart. It is a module of its own so that Shoal's
// go.mod does not depend on gonum/plot.
//
//	go run . -dir ../results/2026-11-22 -a shoal -b mosquitto
//
// For each broker it draws the round with the median deliveries/s.
package main
