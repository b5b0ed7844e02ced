// Command floor-broker is a measuring instrument, not a broker: the least
// a Go MQTT broker with a goroutine per connection does for a QoS 0
// message, so that bench/README.md can say how much of Shoal's CPU at a
// steady rate is Go's network I/O and how much is Shoal's own work. It
// answers CONNECT, SUBSCRIBE (exact topics, no wildcards) and PINGREQ,
// and writes each QoS 0 PUBLISH it reads, unchanged, to the connections
// subscribed to its topic name, from the publisher's goroutine. No QoS 1
// or 2, no retained messages, no sessions, no keep-alive, no log: point
// shoal-bench's latency scenario at it (bench/README.md) and nothing
// else.
package main
