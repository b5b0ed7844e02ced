// Package tracectx makes and continues W3C Trace Context traceparent values
// (https://www.w3.org/TR/trace-context/#traceparent-header), which Shoal's
// records carry in their "traceparent" Kafka header: the gateway starts a
// trace for each PUBLISH (continuing the client's own when its MQTT 5.0
// user property "traceparent" holds one), and the router and the session
// service give each record they produce because of a record a child of its
// trace context. So one message's path, gateway → shoal.messages → router →
// shoal.deliveries (or shoal.sessions → session service) → gateway, is one
// trace for any tool that reads the headers.
package tracectx
