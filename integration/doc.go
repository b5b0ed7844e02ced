// Package integration holds Shoal's integration suites (build tag
// integration): the roles run against a real Apache Kafka, a real CQL
// database and a real HAProxy, started as local processes by the project's
// own scripts, or through testcontainers-go when a Docker engine answers.
package integration
