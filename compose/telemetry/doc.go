// Package telemetry builds a process's OpenTelemetry providers from its
// configuration: the tracer provider (off unless a traces exporter is
// chosen), the meter provider whose Prometheus exporter serves /metrics
// (and an OTLP or console reader when one is chosen), the Go runtime and
// process instruments, and the slog handler that stamps records with the
// active span's ids.
//
// The standard OTEL_* environment variables (OTEL_TRACES_EXPORTER,
// OTEL_METRICS_EXPORTER, OTEL_EXPORTER_OTLP_*, OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER[_ARG]) override the YAML
// keys of the telemetry section, as SHOAL_* variables override the others;
// OTLP exporters chosen by environment are made by the contrib autoexport
// package, so every variable it knows works.
//
// The roles never import the SDK: they take the trace.TracerProvider and
// metric.MeterProvider interfaces this package builds (noop ones when
// telemetry is off), so a role's tests need no exporter.
package telemetry
