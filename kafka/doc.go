// Package kafka is the only package of Shoal that imports franz-go: client
// options, the topic catalogue (names, keys, partitions, cleanup policy,
// retention), and reading and writing event envelopes. The embedded backbone
// runs the same code against an in-process kfake cluster.
package kafka
