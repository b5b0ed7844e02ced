// Package obs holds what the roles share to report themselves through
// OpenTelemetry without knowing its SDK: the bounded tenant label of the
// per-tenant metrics, the latency and count buckets, the counter of
// dropped messages every role counts into (its causes are a contract with
// dashboards), and the conversion between a span context and the W3C
// traceparent bytes that Shoal's records carry (internal/tracectx), done
// without allocating so that a record's trace context costs nothing more
// when tracing is off; and the context a line about a record is logged
// with (ContextWithTraceparent), so that it carries the record's trace id.
package obs
